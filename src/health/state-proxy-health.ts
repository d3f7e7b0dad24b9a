/**
 * The freshness rule behind kube-proxy's `/healthz` and `/livez`, as data
 * (kubernetes pkg/proxy/healthcheck/proxy_health.go).
 *
 * Per IP family: `updated` records when the rules were last brought up to date and clears
 * the pending mark; `queued` records the oldest change not yet applied (kept if one is
 * already pending). A family is unhealthy iff it was updated at least once and has a
 * pending change at least `timeoutMs` old; families never updated do not count, so a
 * fresh agent is healthy.
 *
 * Pure: time is an argument. Node eligibility is not here (see state-responses.ts).
 */
import type { IpFamily } from "../net/ip.ts";

export interface FamilyFreshness {
  /** ms since the epoch of the last completed sync; undefined until the first */
  readonly lastUpdated: number | undefined;
  /** ms since the epoch of the oldest change not yet synced */
  readonly pendingSince: number | undefined;
}

export type ProxyFreshness = Readonly<Partial<Record<IpFamily, FamilyFreshness>>>;

export interface ProxyHealth {
  readonly healthy: boolean;
  /** the most recent update over all families (undefined when none) */
  readonly lastUpdated: number | undefined;
  readonly families: Readonly<
    Partial<Record<IpFamily, { lastUpdated: number | undefined; healthy: boolean }>>
  >;
}

const FAMILIES: readonly IpFamily[] = ["IPv4", "IPv6"];

export function markUpdated(state: ProxyFreshness, family: IpFamily, now: number): ProxyFreshness {
  return { ...state, [family]: { lastUpdated: now, pendingSince: undefined } };
}

export function markQueued(state: ProxyFreshness, family: IpFamily, now: number): ProxyFreshness {
  const current = state[family] ?? { lastUpdated: undefined, pendingSince: undefined };
  if (current.pendingSince !== undefined) return state;
  return { ...state, [family]: { ...current, pendingSince: now } };
}

export function proxyHealth(state: ProxyFreshness, now: number, timeoutMs: number): ProxyHealth {
  let healthy = true;
  let lastUpdated: number | undefined;
  const families: Partial<Record<IpFamily, { lastUpdated: number | undefined; healthy: boolean }>> = {};
  for (const family of FAMILIES) {
    const f = state[family];
    if (!f) continue;
    const stale =
      f.lastUpdated !== undefined && f.pendingSince !== undefined && now - f.pendingSince >= timeoutMs;
    if (stale) healthy = false;
    if (f.lastUpdated !== undefined && (lastUpdated === undefined || f.lastUpdated > lastUpdated))
      lastUpdated = f.lastUpdated;
    families[family] = { lastUpdated: f.lastUpdated, healthy: !stale };
  }
  return { healthy, lastUpdated, families };
}
