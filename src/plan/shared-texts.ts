/**
 * Explanation and issue texts that recur across Services, made once and shared: most Local
 * members host a few endpoints, and every subsetted Cluster Service over the same nodes
 * reports the same counts. Strings are immutable, so sharing changes no output; at 10,000
 * Services it saves ~100,000 allocations per plan. Pure: the memo is a bounded cache.
 */

const localExplanations = new Map<number, string>();

/** A Local member's explanation (see service-plan.ts). */
export function localExplanation(
  nonTerminating: number,
  ready: number,
  weighted: boolean,
  nodeReady: boolean,
): string {
  const make = () =>
    `hosts ${nonTerminating} non-terminating endpoint(s), ${ready} ready` +
    (weighted ? `; weight ${ready} (pods-per-node)` : "") +
    (nodeReady ? "" : "; node not Ready, kept as a member: the health check decides (KEP-3458)");
  if (nonTerminating >= 1024 || ready >= 1024) return make();
  const key = (((nonTerminating << 10) | ready) << 2) | (weighted ? 2 : 0) | (nodeReady ? 1 : 0);
  let text = localExplanations.get(key);
  if (text === undefined) {
    text = make();
    if (localExplanations.size >= 4096) localExplanations.clear(); // a cache, not a record
    localExplanations.set(key, text);
  }
  return text;
}

let lastSubsetMessage: { eligible: number; limit: number; chosen: number; text: string } | undefined;

/** The `cluster_subset` issue's message. */
export function subsetMessage(eligible: number, limit: number, chosen: number): string {
  const last = lastSubsetMessage;
  if (last && last.eligible === eligible && last.limit === limit && last.chosen === chosen) return last.text;
  const text = `${eligible} eligible nodes exceed clusterBackendLimit ${limit}: a stable per-Service subset of ${chosen} carries traffic (split across zones smallest-first, sticky across re-plans)`;
  lastSubsetMessage = { eligible, limit, chosen, text };
  return text;
}
