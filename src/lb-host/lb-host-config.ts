/**
 * `passlb lb --dataplane nftables|xdp` flags → the LB host's config: validated once, before
 * anything is started, each refusal naming its flag (the messages the CLI tests assert).
 * No I/O: the caller prints the message and exits 2 (issue 26 item 3: the CLI only turns
 * flags into a config).
 */

import { announceConfig, wireCheckMs } from "../cli/lb-announce.ts";
import { bgpAnnounceConfig } from "../cli/lb-announce-bgp.ts";
import { flowSettingsFromFlags } from "../cli/lb-flow-flags.ts";
import type { NftLbFlags } from "../cli/lb-nftables.ts";
import { kernelTableSize } from "./nftables/render/kernel-table-size.ts";
import { forwardFromFlags } from "./routing/encap.ts";
import { encapCheckPortsFromFlag } from "./routing/encap-check.ts";

type Ok<T> = Exclude<T, string>;

export interface NftablesLbHostConfig {
  /** manifest files and folders (-f and --manifests); empty in Kubernetes mode */
  readonly paths: readonly string[];
  readonly table: string;
  readonly seed: number;
  /** the Maglev table size for n members, bounded by --max-table-size */
  readonly sizeFor: (n: number) => number;
  readonly pollMs: number;
  readonly driftMs: number;
  readonly countersMs: number;
  readonly conntrackMax: number | undefined;
  readonly forward: Ok<ReturnType<typeof forwardFromFlags>>;
  readonly flows: Ok<ReturnType<typeof flowSettingsFromFlags>>;
  readonly checkPorts: Ok<ReturnType<typeof encapCheckPortsFromFlag>>;
  /** --announce l2 (keepalived); undefined for none and bgp */
  readonly announce: Ok<ReturnType<typeof announceConfig>>;
  /** --announce bgp (BIRD); settings undefined when the peers come from LoadBalancerBGPPeers */
  readonly bgp: Ok<ReturnType<typeof bgpAnnounceConfig>>;
  readonly wireMs: number;
  /** --once: one sync, then exit (no prober, tunnel check, drift check, announcer or watch) */
  readonly once: boolean;
  /** policy routes installed (--no-routes: someone else routes marked packets) */
  readonly routes: boolean;
  /** the nodes probed (--no-probe: every member counts as serving) */
  readonly probe: boolean;
  /** --claim-nat */
  readonly claimNat: boolean;
}

export type LbHostConfigResult =
  | { readonly ok: true; readonly config: NftablesLbHostConfig }
  | { readonly ok: false; readonly message: string };

/** What the input mode offers that the flags depend on (Kubernetes mode: lb-kube.ts). */
export interface LbHostInputMode {
  readonly kube: boolean;
  /** the LoadBalancerBGPPeers can stand in for --bgp-asn/--bgp-peer */
  readonly bgpPeers: boolean;
}

/** Validates the nftables LB host's flags, in the order the CLI always checked them. */
export function nftablesLbHostConfig(flags: NftLbFlags, input: LbHostInputMode): LbHostConfigResult {
  const refuse = (message: string): LbHostConfigResult => ({ ok: false, message });
  const paths = [...flags.filename, ...flags.manifests];
  const seed = Number(flags.seed);
  const pollMs = Number(flags.pollMs);
  const driftMs = Number(flags.driftCheckMs);
  const countersMs = Number(flags.countersMs ?? "10000");
  if (paths.length === 0 && !input.kube) return refuse("pass -f/--manifests DIR (repeatable)");
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) return refuse("--seed must be 0..4294967295");
  if (!/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/.test(flags.table)) return refuse("--table must be an nft identifier");
  let sizeFor: (n: number) => number;
  try {
    sizeFor = kernelTableSize(Number(flags.maxTableSize));
  } catch (e) {
    return refuse(`--max-table-size: ${(e as Error).message}`);
  }
  if (!(pollMs >= 50) || !(driftMs >= 0) || !(countersMs >= 0))
    return refuse("--poll-ms must be ≥ 50, --drift-check-ms and --counters-ms ≥ 0");
  const conntrackMax = flags.conntrackMax === undefined ? undefined : Number(flags.conntrackMax);
  if (conntrackMax !== undefined && !(Number.isSafeInteger(conntrackMax) && conntrackMax >= 1))
    return refuse(`--conntrack-max must be a positive integer, got ${flags.conntrackMax}`);
  const forward = forwardFromFlags(flags);
  if (typeof forward === "string") return refuse(forward);
  const flows = flowSettingsFromFlags(flags);
  if (typeof flows === "string") return refuse(flows);
  const checkPorts = encapCheckPortsFromFlag(flags.encapCheckPorts);
  if (typeof checkPorts === "string") return refuse(checkPorts);
  if (flags.encapCheck && (!flags.probe || !flags.routes))
    return refuse("--encap-check needs the prober and policy routes (drop --no-probe / --no-routes)");
  const announce = announceConfig(flags);
  if (typeof announce === "string") return refuse(announce);
  const bgp = bgpAnnounceConfig(flags);
  if (typeof bgp === "string") return refuse(bgp);
  const wireMs = wireCheckMs(flags);
  if (typeof wireMs === "string") return refuse(wireMs);
  if (bgp && !bgp.settings && !input.bgpPeers)
    return refuse(
      "--announce bgp needs --bgp-asn and --bgp-peer (in Kubernetes mode: LoadBalancerBGPPeer objects instead)",
    );
  const config = { paths, table: flags.table, seed, sizeFor, pollMs, driftMs, countersMs, conntrackMax };
  const switches = {
    once: flags.once === true,
    routes: flags.routes,
    probe: flags.probe,
    claimNat: flags.claimNat === true,
  };
  return { ok: true, config: { ...config, forward, flows, checkPorts, announce, bgp, wireMs, ...switches } };
}
