/**
 * `nft -j list table inet <t>` output → NftState, in the same text forms the renderer
 * writes, so an observed table compares with a desired one. Pure.
 *
 * What is read back (libnftables JSON schema, nft 1.0.x): sets and maps with their
 * elements (prefixes, concatenations, verdicts, marks as numbers), chains with their hook,
 * and per chain the rule count and the `passlb <hash>` comment of its last rule. Rule
 * bodies are not reconstructed (the kernel prints them normalised); the hash stands for them.
 * Declarations are not reconstructed either (`decl` is "?", matching any). Named counters
 * are read by name (and, by countersFromNftJson, with their packets and bytes).
 *
 * Does not: run nft; judge whether the table is ours beyond its name.
 */
import { flowLimits, isFlowMap } from "./flow-map.ts";
import { HASH_COMMENT_PREFIX, type NftChain, type NftSet, type NftState } from "./nft-state.ts";

type Json = unknown;

export function stateFromNftJson(json: Json, table: string): NftState {
  const items = (json as { nftables?: unknown[] }).nftables;
  if (!Array.isArray(items)) throw new TypeError("stateFromNftJson: not an nft JSON listing");
  const sets = new Map<string, NftSet>();
  const chainBase = new Map<string, string | null>();
  const rules = new Map<string, { count: number; lastComment: string | undefined }>();
  const counters = new Set<string>();
  for (const item of items as Record<string, Record<string, unknown>>[]) {
    if (item.counter) {
      if (item.counter.table === table) counters.add(String(item.counter.name));
      continue;
    }
    const set = item.set ?? item.map;
    if (set) {
      if (set.table !== table) continue;
      const isMap = item.map !== undefined;
      const elements = new Map<string, string>();
      // the flow maps' elements are the packet path's (flow-map.ts): not ours to compare
      // (but their limits, which a later run may change: flow-table-keeper.ts)
      if (isFlowMap(String(set.name))) {
        const decl = flowLimits({ size: Number(set.size), timeoutSeconds: Number(set.timeout) });
        sets.set(String(set.name), { name: String(set.name), decl, isMap, elements, dynamic: true });
        continue;
      }
      for (const e of (set.elem as Json[] | undefined) ?? []) {
        if (isMap && Array.isArray(e)) elements.set(valueText(e[0]), valueText(e[1]));
        else elements.set(valueText(e), "");
      }
      sets.set(String(set.name), { name: String(set.name), decl: "?", isMap, elements });
      continue;
    }
    const chain = item.chain;
    if (chain) {
      if (chain.table !== table) continue;
      const base =
        chain.hook === undefined
          ? null
          : `type ${chain.type} hook ${chain.hook} priority ${priorityName(Number(chain.prio))}; policy ${chain.policy};`;
      chainBase.set(String(chain.name), base);
      continue;
    }
    const rule = item.rule;
    if (rule) {
      if (rule.table !== table) continue;
      const name = String(rule.chain);
      const r = rules.get(name) ?? { count: 0, lastComment: undefined };
      r.count++;
      r.lastComment = typeof rule.comment === "string" ? rule.comment : undefined;
      rules.set(name, r);
    }
  }
  const chains = new Map<string, NftChain>();
  for (const [name, base] of chainBase) {
    const r = rules.get(name);
    const comment = r?.lastComment ?? "";
    chains.set(name, {
      name,
      base,
      rules: null,
      ruleCount: r?.count ?? 0,
      hash: comment.startsWith(HASH_COMMENT_PREFIX) ? comment.slice(HASH_COMMENT_PREFIX.length) : "",
    });
  }
  return { table, sets, chains, counters };
}

/** `nft -j list counters table …` → packets and bytes per counter name. */
export function countersFromNftJson(
  json: Json,
  table: string,
): Map<string, { packets: number; bytes: number }> {
  const items = (json as { nftables?: unknown[] }).nftables;
  if (!Array.isArray(items)) throw new TypeError("countersFromNftJson: not an nft JSON listing");
  const out = new Map<string, { packets: number; bytes: number }>();
  for (const item of items as { counter?: Record<string, unknown> }[]) {
    const c = item.counter;
    if (!c || c.table !== table) continue;
    out.set(String(c.name), { packets: Number(c.packets) || 0, bytes: Number(c.bytes) || 0 });
  }
  return out;
}

function priorityName(prio: number): string {
  const names: Record<number, string> = { [-300]: "raw", [-150]: "mangle", [-100]: "dstnat", 0: "filter" };
  return names[prio] ?? String(prio);
}

/** One element key or value in render form. */
export function valueText(v: Json): string {
  if (typeof v === "number") return markOrNumber(v);
  if (typeof v === "string") return v;
  if (v && typeof v === "object") {
    const o = v as Record<string, Json>;
    if ("elem" in o) return valueText((o.elem as Record<string, Json>).val);
    if ("prefix" in o) {
      const p = o.prefix as { addr: string; len: number };
      return `${p.addr}/${p.len}`;
    }
    if ("range" in o) {
      const [a, b] = o.range as [Json, Json];
      return `${valueText(a)}-${valueText(b)}`;
    }
    if ("concat" in o) return (o.concat as Json[]).map(valueText).join(" . ");
    if ("goto" in o) return `goto ${(o.goto as { target: string }).target}`;
    if ("jump" in o) return `jump ${(o.jump as { target: string }).target}`;
    for (const verdict of ["accept", "drop", "continue", "return"]) if (verdict in o) return verdict;
  }
  return JSON.stringify(v);
}

/** Keys and values that are integers: slots stay decimal, marks (≥ 2^24) become 0x%08x. */
function markOrNumber(n: number): string {
  return n >= 0x01000000 ? `0x${(n >>> 0).toString(16).padStart(8, "0")}` : String(n);
}
