/**
 * `passlb lb -f DIR --dataplane userspace|auto`: the LB host. Plans the Services (with
 * `ipMode: Proxy`, as Kubernetes defines it for a proxying LB), probes the member nodes
 * and runs the userspace proxy on every VIP:port until stopped. `--loopback` applies the
 * quickstart's loopback rewrite first. With `--dataplane nftables` (or auto as root with
 * nft) the kernel data plane runs instead (lb-nftables.ts, docs/dataplane-nftables.md).
 *
 * Kubernetes mode (`--kubeconfig`, `--in-cluster`, or no -f and a kubeconfig found:
 * lb-kube.ts, docs/kubernetes.md): the API server is the input, watched; VIPs come from
 * Service status only; both data planes follow every change.
 */

import { hostname } from "node:os";
import type { Command } from "commander";
import { serviceForwarding } from "../forwarding/forwarding-state.ts";
import { ProberHealth } from "../health/prober-health.ts";
import { chooseDataplane, type DataplaneRequest } from "../lb-host/choose-dataplane.ts";
import { forwardFromFlags } from "../lb-host/routing/encap.ts";
import { describeTcpPlumbing, parseTcpPlumbing } from "../lb-host/userspace/tcp-plumbing.ts";
import { UserspaceLb } from "../lb-host/userspace/userspace-lb.ts";
import { planSnapshot } from "../plan/planner.ts";
import { loopbackSnapshot } from "../quickstart/loopback-rewrite.ts";
import { poolUsage } from "../web/pool-usage.ts";
import { addNftablesOptions, type KubeLbRun, type NftLbFlags, runNftablesLb } from "./lb-nftables.ts";
import { runUserspaceKube } from "./lb-userspace-kube.ts";
import { addXdpOptions, createXdpFastPath, type XdpFlags, xdpFacts, xdpOff } from "./lb-xdp.ts";
import { type CliIo, loadSnapshot } from "./load-input.ts";
import {
  addObservabilityOptions,
  type Observability,
  type ObservabilityFlags,
  startObservability,
} from "./observability.ts";
import { runUntil } from "./run-until.ts";
import type { RunEnv } from "./up-command.ts";

interface LbOptions extends NftLbFlags, ObservabilityFlags, XdpFlags {
  filename: string[];
  dataplane: string;
  proxyProtocol?: boolean;
  tcpPlumbing: string;
  loopback?: boolean;
  duration?: string;
  kubeconfig?: string;
  inCluster?: boolean;
  defaultClass?: boolean;
  acceptClass: string[];
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
    .option(
      "--dataplane <mode>",
      "auto, userspace, nftables or xdp (nftables with the XDP fast path in front)",
      "auto",
    )
    .option("--proxy-protocol", "send PROXY protocol v2 to the nodes")
    .option(
      "--tcp-plumbing <kind>",
      "userspace TCP: net (node:net sockets) or experimental-libuv (libuv handles through undocumented Node internals; may break on a Node upgrade)",
      "net",
    )
    .option("--loopback", "apply the loopback rewrite of passlb up (docs/quickstart.md)")
    .option("--duration <seconds>", "stop by itself after this many seconds")
    .option("--kubeconfig <path>", "read the cluster through this kubeconfig (Kubernetes mode)")
    .option("--in-cluster", "read the cluster with the Pod's service account (Kubernetes mode)")
    .option("--default-class", "Kubernetes mode: also own LoadBalancer Services without a loadBalancerClass")
    .option(
      "--accept-class <class>",
      "Kubernetes mode: also serve this foreign loadBalancerClass (as the controller's --accept-class); repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    );
  addNftablesOptions(command);
  addXdpOptions(command);
  addObservabilityOptions(command, "127.0.0.1:9797");
  command.action(async (opts: LbOptions) => {
    // the Kubernetes modules (and @kubernetes/client-node, which doubles the start-up time)
    // are loaded only when the LB may read a cluster
    const manifests = opts.filename.length + (opts.manifests?.length ?? 0) > 0;
    const kubeMod =
      !manifests || opts.kubeconfig !== undefined || opts.inCluster === true
        ? await import("./lb-kube.ts")
        : undefined;
    const input = kubeMod ? kubeMod.chooseLbInput(opts, env.kubeEnv ?? {}) : ({ kind: "manifests" } as const);
    if (typeof input === "string") {
      io.stderr(`error: ${input}\n`);
      setExitCode(2);
      return;
    }
    const tcp = parseTcpPlumbing(opts.tcpPlumbing);
    if (tcp === undefined) {
      io.stderr(`error: --tcp-plumbing must be net or experimental-libuv, not ${opts.tcpPlumbing}\n`);
      setExitCode(2);
      return;
    }
    if (opts.xdpOff) {
      setExitCode(await xdpOff(opts, io));
      return;
    }
    const requested = opts.dataplane as DataplaneRequest;
    if (!["auto", "userspace", "nftables", "xdp"].includes(requested)) {
      io.stderr(`error: --dataplane must be auto, userspace, nftables or xdp, not ${opts.dataplane}\n`);
      setExitCode(2);
      return;
    }
    const xdp = await xdpFacts(opts);
    const choice = chooseDataplane({ isRoot: env.isRoot, hasNft: env.hasNft(), requested, xdp });
    if (!choice.ok) {
      io.stderr(`error: ${choice.reason}\n`);
      setExitCode(1);
      return;
    }
    const obs = await startObservability(opts, {
      io,
      process: "passlb lb",
      component: "lb",
      dataplane: choice.dataplane,
    });
    if (typeof obs === "string") {
      io.stderr(`error: ${obs}\n`);
      setExitCode(2);
      return;
    }
    let kube: KubeLbRun | undefined;
    if (input.kind === "kube" && kubeMod) {
      io.stderr(`passlb lb: reading the cluster at ${input.found.server} (${input.found.from})\n`);
      // --announce bgp with neither --bgp-asn nor --bgp-peer: the routers are LoadBalancerBGPPeers
      const crdPeers =
        opts.announce === "bgp" && opts.bgpAsn === undefined && (opts.bgpPeer ?? []).length === 0;
      const source = kubeMod.kubeLbSource(input, obs, crdPeers);
      kube = {
        source,
        prepare: kubeMod.kubeReadHandler(obs, (line) => io.stderr(`passlb lb: ${line}\n`)),
        ...(crdPeers && {
          bgpStatus: kubeMod.kubeBgpStatusWriter(input, opts.hostName ?? hostname()),
          bgpPeers: () => source.bgpPeers,
          bgpExtras: () => ({
            advertisements: source.bgpAdvertisements,
            secrets: source.bgpSecrets,
            pools: source.ipPools
              .filter((p) => !p.spec.disabled)
              .map((p) => ({
                name: p.metadata.name,
                labels: { ...p.metadata.labels },
                addresses: p.spec.addresses,
              })),
          }),
        }),
        // the wire checks' findings as Events on the Services (lb-events.ts)
        serviceEvent: (await import("./lb-events.ts")).serviceEventRecorder(
          input.found.config,
          opts.hostName ?? hostname(),
          (line) => io.stderr(`passlb lb: ${line}\n`),
        ),
      };
    }
    if (choice.dataplane === "nftables" || choice.dataplane === "xdp") {
      io.stderr(`passlb lb: data plane ${choice.dataplane} (${choice.reason})\n`);
      const fastPath = choice.dataplane === "xdp" ? xdpFastPath(opts, io, obs) : undefined;
      if (typeof fastPath === "string") {
        io.stderr(`error: ${fastPath}\n`);
        await obs.close();
        setExitCode(2);
        return;
      }
      setExitCode(
        await runNftablesLb(opts, io, env.shutdownSignal, obs, kube, fastPath ? { fastPath } : undefined),
      );
      await obs.close();
      return;
    }
    if (kube) {
      io.stdout(`passlb lb: data plane userspace (${choice.reason})\n`);
      await runUserspaceKube(kube, { ...opts, tcp }, io, env, obs);
      return;
    }
    const loaded = await loadSnapshot(opts.filename, io);
    if (!loaded) {
      await obs.close();
      setExitCode(2);
      return;
    }
    const snapshot = opts.loopback ? loopbackSnapshot(loaded).snapshot : loaded;
    const { plans } = planSnapshot(snapshot, { ipMode: "Proxy" });
    obs.metrics.ipPools(poolUsage(snapshot.config.pools, plans));
    for (const p of plans) for (const i of p.issues) obs.logger.finding(i, "plan_issue");
    const lb = new UserspaceLb({
      seed: 0x5eed,
      proxyProtocol: opts.proxyProtocol ?? false,
      tcp,
    });
    // connections and bytes: the LB's own tallies, read at each scrape and dashboard refresh
    obs.observer.traffic(() => lb.trafficTotals());
    const apply = async () => {
      const since = Date.now();
      const fw = plans.map((p) => serviceForwarding(p, prober.lookup, { seed: 0x5eed }));
      const findings = await lb.update(fw);
      obs.observer.forwarding(fw, prober.lookup);
      obs.metrics.programmed("userspace", (Date.now() - since) / 1000);
      obs.observer.setFindings(findings);
    };
    const prober: ProberHealth = new ProberHealth({
      onChange: () => void apply(),
      onEvent: (e) => obs.observer.proberEvent(e),
      onProbe: (node, ok, seconds) => obs.observer.probeFinished(node, ok, seconds),
    });
    prober.setPlans(plans);
    await apply();
    io.stdout(
      `passlb lb: data plane userspace (${choice.reason}); ${describeTcpPlumbing(lb.tcpPlumbing, tcp)}\n`,
    );
    const dashboard = await obs.serve();
    if (dashboard) io.stdout(`  dashboard: ${dashboard} (metrics at ${dashboard}metrics)\n`);
    for (const p of plans)
      for (const v of p.vips) io.stdout(`  ${p.service}: ingress ${v.address} ipMode ${p.ipMode}\n`);
    await runUntil(env.shutdownSignal(), opts.duration);
    await prober.close();
    await lb.close();
    await obs.close();
  });
}

/** the XDP fast path for `--dataplane xdp` from the same flags the nftables path reads */
function xdpFastPath(opts: LbOptions, io: CliIo, obs: Observability) {
  const forward = forwardFromFlags(opts);
  if (typeof forward === "string") return forward;
  return createXdpFastPath(
    {
      flags: opts,
      seed: Number(opts.seed),
      maxTableSize: Number(opts.maxTableSize),
      forward,
      driftMs: opts.once ? 0 : Number(opts.driftCheckMs),
      countersMs: opts.once ? 0 : Number(opts.countersMs ?? "10000"),
    },
    io,
    obs,
  );
}
