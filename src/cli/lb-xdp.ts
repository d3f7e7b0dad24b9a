/**
 * `passlb lb --dataplane xdp` (or auto with `--xdp-interface`): the flags of the XDP fast
 * path, the facts `auto` decides on, and the wiring of an XdpDataplane (real bpftool, real
 * next-hop resolver) into a FastPath whose counters feed the metrics
 * (docs/dataplane-xdp.md). The nftables table runs behind it (lb-nftables.ts).
 *
 * Wiring only.
 */
import { spawnSync } from "node:child_process";
import type { Command } from "commander";
import { createBpfTool } from "../drivers/bpftool.ts";
import type { XdpFacts } from "../lb-host/choose-dataplane.ts";
import { FastPath } from "../lb-host/fast-path.ts";
import { type Forward, nodePath } from "../lb-host/routing/encap.ts";
import { XdpDataplane } from "../lb-host/xdp/xdp-dataplane.ts";
import { createNextHopResolver } from "../lb-host/xdp/xdp-next-hops.ts";
import { objectProblem, XDP_OBJECT } from "../lb-host/xdp/xdp-object.ts";
import type { CliIo } from "./load-input.ts";
import type { Observability } from "./observability.ts";

export interface XdpFlags {
  xdpInterface?: string[];
  xdpPinDir?: string;
  xdpObject?: string;
  xdpUdpTimeout?: string;
  xdpSynRate?: string;
  xdpOff?: boolean;
}

export const DEFAULT_PIN_DIR = "/sys/fs/bpf/passlb/v1";

export function addXdpOptions(command: Command): void {
  command
    .option(
      "--xdp-interface <if>",
      "xdp: attach the XDP fast path to this client-facing interface (native mode); repeatable; with it, auto picks xdp where it can run",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option("--xdp-pin-dir <dir>", "xdp: where the program and maps are pinned (a bpffs)", DEFAULT_PIN_DIR)
    .option("--xdp-object <path>", "xdp: the compiled program (npm run build:xdp)", XDP_OBJECT)
    .option("--xdp-udp-timeout <s>", "xdp: a UDP flow idle this long takes the current Maglev choice", "30")
    .option(
      "--xdp-syn-rate <n>",
      "xdp: new TCP connections per CPU and second that get a flow entry; past it SYNs are forwarded by the ring without one (0: no limit)",
      "100000",
    )
    .option(
      "--xdp-off",
      "xdp: detach the program from the --xdp-interface interfaces, remove its pins, and exit",
    );
}

/** What auto and an explicit request judge XDP by (checked only with --xdp-interface). */
export async function xdpFacts(flags: XdpFlags): Promise<XdpFacts> {
  const interfaces = flags.xdpInterface ?? [];
  if (interfaces.length === 0) return { interfaces };
  for (const [cmd, arg, pkg] of [
    ["bpftool", "version", "bpftool"],
    ["ip", "-V", "iproute2"],
  ] as const)
    if (spawnSync(cmd, [arg]).error)
      return { interfaces, problem: `no ${cmd} command (Debian package ${pkg})` };
  return { interfaces, problem: await objectProblem(flags.xdpObject ?? XDP_OBJECT) };
}

export interface XdpWiring {
  readonly flags: XdpFlags;
  readonly seed: number;
  readonly maxTableSize: number;
  readonly forward: Forward;
  readonly driftMs: number;
  readonly countersMs: number;
}

export function createXdpFastPath(w: XdpWiring, io: CliIo, obs?: Observability): FastPath | string {
  const udp = Number(w.flags.xdpUdpTimeout ?? "30");
  const syn = Number(w.flags.xdpSynRate ?? "100000");
  if (!(Number.isInteger(udp) && udp >= 0)) return "--xdp-udp-timeout must be a whole number of seconds";
  if (!(Number.isInteger(syn) && syn >= 0)) return "--xdp-syn-rate must be a non-negative integer";
  const interfaces = w.flags.xdpInterface ?? [];
  const dataplane = new XdpDataplane({
    bpf: createBpfTool(),
    nextHops: createNextHopResolver({ routed: (a) => nodePath(w.forward, a) === "encap" }),
    interfaces,
    pinDir: w.flags.xdpPinDir ?? DEFAULT_PIN_DIR,
    object: w.flags.xdpObject ?? XDP_OBJECT,
    seed: w.seed,
    blockSize: w.maxTableSize,
    udpTimeoutS: udp,
    maxSynPerCpu: syn,
    now: () => performance.now(),
  });
  return new FastPath(
    dataplane,
    { driftMs: w.driftMs, countersMs: w.countersMs },
    {
      log: (line) => io.stderr(`passlb lb: ${line}\n`),
      applied: (seconds) => obs?.metrics.programmed("xdp", seconds),
      drift: (findings) => {
        for (const i of interfaces) obs?.metrics.xdpAttached(i, !findings.some((f) => f.endsWith(` ${i}`)));
        for (const f of findings) obs?.observer.note({ event: "xdp_drift", severity: "warning", message: f });
      },
      counters: (c) => {
        if (!obs) return;
        obs.observer.fastPathCounters("xdp", c);
        for (const [node, t] of c.nodes) obs.metrics.nodeTraffic(node, t.packets, t.bytes, "xdp");
        for (const [service, t] of c.services) obs.metrics.serviceTraffic(service, t.packets, t.bytes, "xdp");
        for (const [reason, t] of c.reasons) obs.metrics.xdpReason(reason, t.packets);
        if (c.flows) {
          for (const [family, n] of c.flows.entries)
            obs.metrics.flowTable("xdp", family, n, c.flows.capacity);
          if (c.flows.evictions !== undefined) obs.metrics.flowEvictions("xdp", c.flows.evictions);
        }
      },
    },
  );
}

/** `--xdp-off`: detach and unpin; 0 when done. */
export async function xdpOff(flags: XdpFlags, io: CliIo): Promise<number> {
  const bpf = createBpfTool();
  for (const i of flags.xdpInterface ?? []) {
    const a = await bpf.attached(i).catch(() => undefined);
    if (a?.progId !== undefined) await bpf.detach(i);
    io.stderr(`passlb lb: xdp: ${a?.progId === undefined ? "nothing attached to" : "detached from"} ${i}\n`);
  }
  const dir = flags.xdpPinDir ?? DEFAULT_PIN_DIR;
  await bpf.unpin(dir);
  io.stderr(`passlb lb: xdp: removed the pins under ${dir}\n`);
  return 0;
}
