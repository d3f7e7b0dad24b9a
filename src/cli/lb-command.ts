/**
 * `passlb lb -f DIR --dataplane userspace|auto`: the LB host. Plans the Services (with
 * `ipMode: Proxy`, as Kubernetes defines it for a proxying LB), probes the member nodes
 * and runs the userspace proxy on every VIP:port until stopped. `--loopback` applies the
 * quickstart's loopback rewrite first. With `--dataplane nftables` (or auto as root with
 * nft) the kernel data plane runs instead (lb-nftables.ts, docs/dataplane-nftables.md).
 */
import type { Command } from "commander";
import { chooseDataplane, type DataplaneRequest } from "../dataplane/choose-dataplane.ts";
import { serviceForwarding } from "../dataplane/forwarding-state.ts";
import { UserspaceLb } from "../dataplane/userspace/userspace-lb.ts";
import { planSnapshot } from "../plan/planner.ts";
import { loopbackSnapshot } from "../quickstart/loopback-rewrite.ts";
import { ProberHealth } from "../quickstart/prober-health.ts";
import { addNftablesOptions, type NftLbFlags, runNftablesLb } from "./lb-nftables.ts";
import { type CliIo, loadSnapshot } from "./load-input.ts";
import type { RunEnv } from "./up-command.ts";

interface LbOptions extends NftLbFlags {
  filename: string[];
  dataplane: string;
  proxyProtocol?: boolean;
  loopback?: boolean;
  duration?: string;
}

export function registerLbCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  env: RunEnv,
): void {
  const command = program
    .command("lb")
    .description("run the load balancer for the planned Services (userspace proxy)")
    .option(
      "-f, --filename <path>",
      "manifest file or directory; repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option("--dataplane <mode>", "auto, userspace or nftables", "auto")
    .option("--proxy-protocol", "send PROXY protocol v2 to the nodes")
    .option("--loopback", "apply the loopback rewrite of passlb up (docs/quickstart.md)")
    .option("--duration <seconds>", "stop by itself after this many seconds");
  addNftablesOptions(command);
  command.action(async (opts: LbOptions) => {
    const requested = opts.dataplane as DataplaneRequest;
    const choice = chooseDataplane({ isRoot: env.isRoot, hasNft: env.hasNft(), requested });
    if (!choice.ok) {
      io.stderr(`error: ${choice.reason}\n`);
      setExitCode(1);
      return;
    }
    if (choice.dataplane === "nftables") {
      io.stderr(`passlb lb: data plane nftables (${choice.reason})\n`);
      setExitCode(await runNftablesLb(opts, io, env.shutdownSignal));
      return;
    }
    const loaded = await loadSnapshot(opts.filename, io);
    if (!loaded) {
      setExitCode(2);
      return;
    }
    const snapshot = opts.loopback ? loopbackSnapshot(loaded).snapshot : loaded;
    const { plans } = planSnapshot(snapshot, { ipMode: "Proxy" });
    const lb = new UserspaceLb({ seed: 0x5eed, proxyProtocol: opts.proxyProtocol ?? false });
    const apply = async () => {
      const findings = await lb.update(
        plans.map((p) => serviceForwarding(p, prober.lookup, { seed: 0x5eed })),
      );
      for (const f of findings) io.stderr(`${f.severity}: ${f.code}: ${f.subject}: ${f.message}\n`);
    };
    const prober: ProberHealth = new ProberHealth({ onChange: () => void apply() });
    prober.setPlans(plans);
    await apply();
    io.stdout(`passlb lb: data plane userspace (${choice.reason})\n`);
    for (const p of plans)
      for (const v of p.vips) io.stdout(`  ${p.service}: ingress ${v.address} ipMode ${p.ipMode}\n`);
    const signal = env.shutdownSignal();
    await new Promise<void>((resolve) => {
      const t = opts.duration ? setTimeout(resolve, Number(opts.duration) * 1000) : undefined;
      signal.addEventListener("abort", () => {
        if (t) clearTimeout(t);
        resolve();
      });
    });
    await prober.close();
    await lb.close();
  });
}
