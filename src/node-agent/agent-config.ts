/**
 * Pure: the `passlb agent` flags → an `AgentConfig`, or the one problem, naming the flag.
 * What each setting means is in cli/agent-command.ts's flag help and docs/health.md; this
 * module only checks and converts. Deliberately not here: reading files, binding, logging.
 */

import type { BindAddress } from "../health/health-servers.ts";
import { type Encap, encapFromFlags } from "../lb-host/routing/encap.ts";
import { canonicalIp } from "../net/ip.ts";

/** the flags as commander hands them over (strings, as typed) */
export interface AgentFlags {
  readonly node: string;
  readonly dataplane: string;
  readonly proxyProtocol?: boolean;
  readonly loopback?: boolean;
  readonly manifests?: string | undefined;
  readonly healthzBindAddress: string;
  readonly bindAddress?: string;
  readonly syncPeriod: string;
  readonly decap?: string;
  readonly encapPort?: string;
  readonly encapMtu?: string;
  readonly procSys: string;
}

export type AgentDataplaneMode = "none" | "userspace" | "nftables";

export interface AgentConfig {
  readonly node: string;
  /** the manifest folder; undefined: decapsulation alone */
  readonly manifests: string | undefined;
  readonly healthz: BindAddress;
  /** host of the per-Service health servers (and of the userspace proxy); undefined: every address */
  readonly serviceHost: string | undefined;
  /** --sync-period: the folder's periodic re-read; health answers are stale after twice this */
  readonly syncMs: number;
  readonly dataplane: AgentDataplaneMode;
  readonly decap: Encap | undefined;
  /** where the host's /proc/sys is writable (--decap) */
  readonly procSys: string;
  /** userspace: apply passlb up's loopback rewrite to each read */
  readonly loopback: boolean;
  /** userspace: send PROXY v2 to pods */
  readonly sendProxyProtocol: boolean;
  /** userspace: the Maglev seed of the node proxy */
  readonly seed: number;
}

export type AgentConfigResult = { readonly config: AgentConfig } | { readonly error: string };

const DATAPLANES: readonly string[] = ["none", "userspace", "nftables"];

/**
 * `host:port`, `[v6]:port` or `:port` (every address), as kube-proxy takes them. `0.0.0.0`
 * means every address of both families, as it does for kube-proxy: Go's `net.Listen("tcp",
 * "0.0.0.0:10256")` listens on "all available unicast and anycast IP addresses of the local
 * system" (pkg/net Listen docs; only "tcp4" is IPv4-only), so an LB probing a dual-stack
 * node's IPv6 address reaches kube-proxy's default healthz. Node's `listen()` without a host
 * does the same (`::` with IPv4-mapped addresses, or 0.0.0.0 where IPv6 is absent).
 */
export function parseBindAddress(text: string): BindAddress | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  const host = m[1] ?? m[2] ?? "";
  if (host === "" || host === "0.0.0.0") return { host: undefined, port };
  if (canonicalIp(host) === undefined) return undefined;
  return { host, port };
}

/** The flags, checked in the order the CLI always checked them: the first problem wins. */
export function agentConfig(flags: AgentFlags): AgentConfigResult {
  if (!flags.manifests && flags.decap === undefined)
    return {
      error:
        "--manifests DIR is required (the agent stands in for kube-proxy in standalone mode; in a cluster, kube-proxy does its job — there only --decap KIND runs, alone)",
    };
  if (!flags.manifests && flags.dataplane !== "none")
    return { error: `--dataplane ${flags.dataplane} needs --manifests (decapsulation alone takes none)` };
  const healthz = parseBindAddress(flags.healthzBindAddress);
  if (!healthz) return { error: `--healthz-bind-address ${flags.healthzBindAddress}: expected host:port` };
  const serviceHost = flags.bindAddress;
  if (serviceHost !== undefined && canonicalIp(serviceHost) === undefined)
    return { error: `--bind-address ${serviceHost}: expected an IP address` };
  const syncSeconds = Number(flags.syncPeriod);
  if (!(syncSeconds > 0))
    return { error: `--sync-period ${flags.syncPeriod}: expected a positive number of seconds` };
  if (!DATAPLANES.includes(flags.dataplane))
    return { error: `--dataplane ${flags.dataplane}: expected none, userspace or nftables` };
  const decap =
    flags.decap === undefined
      ? undefined
      : encapFromFlags(flags.decap, flags.encapPort, flags.encapMtu, "--decap");
  if (typeof decap === "string") return { error: decap };
  return {
    config: {
      node: flags.node,
      manifests: flags.manifests || undefined,
      healthz,
      serviceHost,
      syncMs: syncSeconds * 1000,
      dataplane: flags.dataplane as AgentDataplaneMode,
      decap,
      procSys: flags.procSys,
      loopback: flags.loopback ?? false,
      sendProxyProtocol: flags.proxyProtocol ?? false,
      seed: 0x5eed,
    },
  };
}
