/**
 * `passlb lb --dataplane nftables` (or auto as root with nft): the LB host's kernel data
 * plane. Reads the manifests (polled for changes), plans, probes the member nodes, and
 * programs the kernel through the LbController (nftables table `inet <table>` + policy
 * routes) until the shutdown signal. On exit the kernel state is left in place: traffic
 * keeps flowing while the process is down and the next process adopts the table without a
 * flush (docs/dataplane-nftables.md).
 *
 * In Kubernetes mode (`kube` given: lb-kube.ts) the API server replaces the manifests: the
 * source's reads feed the controller, VIPs come from Service status only, and while the API
 * server is away the kernel keeps the last table (docs/kubernetes.md).
 *
 * This file declares the flags and runs the host: src/lb-host/lb-host-config.ts turns the
 * flags into a config (a refusal exits 2), src/lb-host/nftables-host/build-nftables-lb-host.ts
 * builds the LbHost from it and the drivers, and the host runs until the shutdown signal.
 * Exit codes: 0 stopped cleanly (or `--once` synced), 1 the sync failed, nft is unusable or
 * a part could not start, 2 bad flags or unreadable input at start.
 */

import { hostname } from "node:os";
import type { BgpObjectConditions } from "../announce/bgp/bgp-conditions.ts";
import type { BgpPeerConfigInput } from "../announce/bgp/bgp-peer-config.ts";
import type { SnapshotSource, SourceRead } from "../cluster/snapshot-source.ts";
import type { LoadBalancerBGPPeer } from "../k8s/load-balancer-bgp-peer.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { FastPath } from "../lb-host/fast-path.ts";
import { LbHostStartError } from "../lb-host/lb-host.ts";
import { nftablesLbHostConfig } from "../lb-host/lb-host-config.ts";
import { aborted, buildNftablesLbHost } from "../lb-host/nftables-host/build-nftables-lb-host.ts";
import { lbHostDrivers } from "../lb-host/nftables-host/host-drivers.ts";
import type { NftablesLbHostDrivers } from "../lb-host/nftables-host/lb-host-drivers.ts";
import { StartRefused } from "../lb-host/nftables-host/start-refused.ts";
import { type AnnounceFlags, addAnnounceOptions } from "./lb-announce.ts";
import { addBgpOptions, type BgpFlags } from "./lb-announce-bgp.ts";
import { addFlowOptions } from "./lb-flow-flags.ts";
import type { CliIo } from "./load-input.ts";
import type { Observability } from "./observability.ts";

/** Kubernetes mode: the source and how a read becomes the LB's snapshot (lb-kube.ts). */
export interface KubeLbRun {
  readonly source: SnapshotSource;
  /** `--announce bgp` without --bgp-peer: the LoadBalancerBGPPeers of the last read */
  readonly bgpPeers?: () => readonly LoadBalancerBGPPeer[];
  /** with bgpPeers: the LoadBalancerBGPAdvertisements and the pools they select */
  readonly bgpExtras?: () => Pick<BgpPeerConfigInput, "advertisements" | "pools" | "secrets">;
  /** with bgpPeers: writes this host's conditions to the objects' status (bgp-status-writer.ts) */
  readonly bgpStatus?: (objects: readonly BgpObjectConditions[]) => Promise<string[]>;
  readonly prepare: (read: Extract<SourceRead, { ok: true }>) => { snapshot: Snapshot; degraded: boolean };
  /** an Event on each of these Services (namespace/name); the wire checks report through it */
  readonly serviceEvent?: (
    services: readonly string[],
    type: "Normal" | "Warning",
    reason: string,
    message: string,
  ) => void;
}

export interface NftLbFlags extends AnnounceFlags, BgpFlags {
  filename: string[];
  manifests: string[];
  table: string;
  seed: string;
  maxTableSize: string;
  routes: boolean;
  probe: boolean;
  once?: boolean;
  pollMs: string;
  driftCheckMs: string;
  countersMs?: string;
  forward?: string;
  encap?: string;
  encapPort?: string;
  encapMtu?: string;
  direct?: string[];
  encapCheck?: boolean;
  encapCheckPorts?: string;
  conntrackMax?: string;
  flowTableSize?: string;
  flowTimeout?: string;
  expectedFlows?: string;
}

/** Adds the nftables flags to `passlb lb`. */
export function addNftablesOptions(command: import("commander").Command): void {
  addFlowOptions(command);
  command
    .option(
      "--manifests <path>",
      "same as -f (watched for changes); repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option("--table <name>", "nftables: the table (family inet) passlb owns", "passlb")
    .option("--seed <n>", "nftables: Maglev and jhash seed; the same on every LB host", "1")
    .option("--max-table-size <m>", "nftables: largest Maglev table in the kernel (a listed prime)", "4093")
    .option("--no-routes", "nftables: do not install policy routes (someone else routes marked packets)")
    .option(
      "--forward <mode>",
      "nftables: how packets reach a node: route (policy route on the shared segment) or encap (tunnel to nodes in other subnets)",
      "route",
    )
    .option("--encap <kind>", "nftables, --forward encap: vxlan-gpe (default), ipip, gre or gue")
    .option("--encap-port <n>", "nftables: UDP port of vxlan-gpe (4790) or gue (6080); the same on the nodes")
    .option("--encap-mtu <n>", "nftables: MTU of the underlay toward the nodes (1500)")
    .option(
      "--direct <cidr>",
      "nftables, --forward encap: nodes in this prefix are on this host's segment and routed directly; repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option(
      "--encap-check",
      "nftables, --forward encap: also probe each routed node through the tunnel (TCP); a node whose tunnel check fails gets no new connections",
    )
    .option(
      "--encap-check-ports <first-last>",
      "nftables, --encap-check: local TCP ports the tunnel probes use (outside ip_local_port_range)",
      "61000-61255",
    )
    .option("--no-probe", "nftables: do not probe the nodes (every member counts as serving)")
    .option("--once", "nftables: sync once and exit")
    .option("--poll-ms <ms>", "how often to look for manifest changes (both data planes)", "1000")
    .option(
      "--drift-check-ms <ms>",
      "nftables: how often to compare the kernel table with what was applied",
      "5000",
    )
    .option(
      "--counters-ms <ms>",
      "nftables: how often to read the per-node counters into metrics (0: never)",
      "10000",
    )
    .option(
      "--conntrack-max <n>",
      "nftables: set the host's nf_conntrack_max at start (keep it ≥ nf_conntrack_buckets; checked and warned about either way)",
    );
  addAnnounceOptions(command);
  addBgpOptions(command);
}

/**
 * flags → config → the LB host (lb-host/nftables-host/build-nftables-lb-host.ts) → start →
 * `--once`'s one sync, or the shutdown signal → stop. A part that cannot start has said why;
 * its exit code is the process's.
 */
export async function runNftablesLb(
  flags: NftLbFlags,
  io: CliIo,
  shutdownSignal: () => AbortSignal,
  obs?: Observability,
  kube?: KubeLbRun,
  options: {
    /** tests: fake-drivers.ts; the host's real ones otherwise */
    readonly drivers?: NftablesLbHostDrivers;
    /** `--dataplane xdp`: the fast path in front of the table (lb-xdp.ts), fed every committed pass */
    readonly fastPath?: FastPath;
  } = {},
): Promise<number> {
  const given = nftablesLbHostConfig(flags, {
    kube: kube !== undefined,
    bgpPeers: kube?.bgpPeers !== undefined,
  });
  if (!given.ok) {
    io.stderr(`error: ${given.message}\n`);
    return 2;
  }
  const say = (line: string) => io.stderr(`${line}\n`);
  const built = buildNftablesLbHost(
    given.config,
    options.drivers ?? lbHostDrivers(),
    { say, obs },
    {
      host: flags.hostName ?? hostname(),
      kube,
      fastPath: options.fastPath,
      readStdin: io.readStdin,
      events: { stopFailed: (part, e) => say(`passlb lb: stopping ${part} failed: ${(e as Error).message}`) },
    },
  );
  try {
    await built.host.start();
  } catch (e) {
    const refused = e instanceof LbHostStartError && e.cause instanceof StartRefused ? e.cause : undefined;
    if (refused?.line !== undefined) say(refused.line);
    if (!refused) say(`error: ${(e as Error).message}`);
    return refused?.exitCode ?? 1;
  }
  const code = flags.once ? await built.once(shutdownSignal()) : 0;
  if (!flags.once) await aborted(shutdownSignal());
  await built.host.stop();
  if (!flags.once) say("passlb lb: stopped; the kernel keeps forwarding with the last table");
  return code;
}
