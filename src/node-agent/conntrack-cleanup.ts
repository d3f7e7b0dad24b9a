/**
 * Which UDP and SCTP conntrack entries a node agent must delete after a sync: those whose
 * original destination is a listener's VIP and port and whose reply source is an endpoint
 * that no longer serves it. Pure: the memory of the previous sync and the new rules in,
 * the deletions and the next memory out; `conntrack-tool.ts` runs them.
 *
 * Why: a UDP "connection" is a conntrack entry that every datagram of the client renews.
 * A client that always sends from one source port (resolvers, syslog, VoIP) keeps the
 * entry, and with it the DNAT to a deleted pod, alive for ever; new rules are never
 * consulted. kube-proxy deletes such entries after every sync (kubernetes
 * pkg/proxy/conntrack/cleanup.go `CleanStaleEntries`): for every UDP service port with at
 * least one serving endpoint, entries with `--orig-dst` a Service IP (ClusterIP,
 * LoadBalancer IPs, external IPs), `--orig-port-dst` the port, and a `--reply-src` that is
 * not a serving endpoint (`IsServing`, whatever the traffic policy, topology or
 * terminating state); a port with no serving endpoint is skipped, there is nothing
 * better to send to. kube-proxy cleans UDP only; the agent also cleans SCTP (issue 18:
 * an SCTP association to a deleted pod's address is as stuck, and nothing else would
 * send it anywhere better). TCP is left alone (a reset or a timeout ends those).
 *
 * The difference, and the bound: kube-proxy lists the whole table every sync; here only
 * endpoints that went away are looked for. The memory holds, per listener, the serving
 * addresses last seen (plus those that went away while the listener had no serving
 * endpoint, so a pod replaced after a gap is still cleaned once its successor serves).
 * A sync asks for at most one deletion per (UDP/SCTP listener, endpoint address that
 * stopped serving it): nothing at all while endpoints do not change. What served before
 * the agent started is not in that memory, so its first sync lists instead, once: one
 * `conntrack -L` per UDP/SCTP listener with a serving endpoint (`startupListings`), and
 * deletes the entries whose reply source is neither serving nor the VIP itself (an entry
 * that was not DNATed — an LB host's own pinned flow — is not the agent's to touch)
 * (`staleFromListing`).
 * Also not here: NodePorts and ClusterIPs (the agent serves neither).
 */

import type { ConntrackFilter } from "../drivers/conntrack-tool.ts";
import type { AgentRule } from "./agent-rules.ts";

export interface ConntrackDeletion extends ConntrackFilter {
  /** `--reply-src`: the endpoint that stopped serving */
  readonly replySrc: string;
  /** `namespace/name` and listener, for the log */
  readonly service: string;
}

/** listener key (`vip proto port`) → addresses that may still have entries */
export type ConntrackMemory = ReadonlyMap<string, readonly string[]>;

export const EMPTY_CONNTRACK_MEMORY: ConntrackMemory = new Map();

export function staleConntrackEntries(
  previous: ConntrackMemory,
  rules: readonly AgentRule[],
): { deletions: ConntrackDeletion[]; next: ConntrackMemory } {
  const deletions: ConntrackDeletion[] = [];
  const next = new Map<string, readonly string[]>();
  for (const rule of rules) {
    if (rule.protocol !== "udp" && rule.protocol !== "sctp") continue;
    const key = `${rule.vip} ${rule.protocol} ${rule.port}`;
    if (next.has(key)) continue; // a duplicate listener: the ruleset keeps the first
    const known = previous.get(key) ?? [];
    if (rule.serving.length === 0) {
      // nothing serves: keep what may still have entries until something does
      if (known.length > 0) next.set(key, known);
      continue;
    }
    const serving = new Set(rule.serving);
    for (const address of known)
      if (!serving.has(address))
        deletions.push({
          family: rule.family,
          protocol: rule.protocol,
          origDst: rule.vip,
          origPortDst: rule.port,
          replySrc: address,
          service: `${rule.service} ${rule.listener}`,
        });
    next.set(key, rule.serving);
  }
  return { deletions, next };
}

/** The memory after some deletions failed: they are asked for again on the next sync. */
export function rememberFailed(
  memory: ConntrackMemory,
  failed: readonly ConntrackDeletion[],
): ConntrackMemory {
  if (failed.length === 0) return memory;
  const out = new Map(memory);
  for (const d of failed) {
    const key = `${d.origDst} ${d.protocol} ${d.origPortDst}`;
    const list = out.get(key) ?? [];
    if (!list.includes(d.replySrc)) out.set(key, [...list, d.replySrc]);
  }
  return out;
}

/** The first sync's listings: one per UDP/SCTP listener that has a serving endpoint. */
export function startupListings(rules: readonly AgentRule[]): AgentRule[] {
  const seen = new Set<string>();
  const out: AgentRule[] = [];
  for (const r of rules) {
    if ((r.protocol !== "udp" && r.protocol !== "sctp") || r.serving.length === 0) continue;
    const key = `${r.vip} ${r.protocol} ${r.port}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(r);
  }
  return out;
}

/** Deletions for a listing of one listener's entries: reply sources neither serving nor the VIP. */
export function staleFromListing(rule: AgentRule, replySources: readonly string[]): ConntrackDeletion[] {
  if (rule.protocol !== "udp" && rule.protocol !== "sctp") return [];
  const protocol = rule.protocol;
  const serving = new Set(rule.serving);
  const stale = [...new Set(replySources)].filter((a) => !serving.has(a) && a !== rule.vip).sort();
  return stale.map((replySrc) => ({
    family: rule.family,
    protocol,
    origDst: rule.vip,
    origPortDst: rule.port,
    replySrc,
    service: `${rule.service} ${rule.listener}`,
  }));
}
