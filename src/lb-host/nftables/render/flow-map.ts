/**
 * The TCP flow table of the LB host (issue 25; docs/dataplane-nftables.md "Flow pinning").
 * Pure: names, the table's contents and its script.
 *
 * A table of its own, `inet <table>-flows`, beside passlb's: one dynamic map per family,
 * `flows4` / `flows6` (the flow's tuple → the node mark its SYN took, or its first packet
 * without an entry, with an idle timeout that every packet renews), and two base chains around passlb's listener chains
 * (prerouting, priority mangle):
 *   - `follow` (mangle − 1): a TCP packet that is not a SYN takes its flow's mark, if the
 *     flow has an entry; passlb's listener chain then keeps it while that node is `live`;
 *   - `write` (mangle + 1): a SYN passlb marked replaces its tuple's entry with its mark
 *     (`delete` then `add`: an `update` of an existing element renews its timeout but keeps
 *     the old value, net/netfilter/nft_dynset.c `nft_dynset_eval`); any other TCP packet
 *     passlb marked `update`s it: adds it with its mark if missing, else renews its timeout.
 *     Not `delete` + `add` for every packet: a packet-path delete only marks the element
 *     dead (nft_set_hash.c `nft_rhash_delete`), and it counts against the map's `size`
 *     until the set's GC frees it (`nft_dynset_new`: `atomic_add_unless(&set->nelems, 1,
 *     set->size)`), so per-packet replacement filled the map with dead elements (measured in
 *     test/e2e/flow-capacity.test.ts, size 64: 0 live entries for 40 or 100 connections;
 *     now 40 and 64).
 * So a SYN, which `follow` skips, always takes the current Maglev table's choice and
 * overwrites whatever its tuple had (Katran's rule, katran/lib/bpf/balancer_kern.c: a SYN
 * skips the LRU lookup and its choice replaces the entry), and every other packet follows
 * its flow's entry (a non-SYN packet placed elsewhere because that node is not `live`
 * leaves the entry as it is: nft cannot compare the mark with the entry's value). A packet
 * without an entry (the map was flushed, the entry idled out)
 * falls back to its conntrack mark, then to the current choice.
 *
 * Its own table because the maps hold up to millions of elements that only the packet path
 * writes: passlb's table is listed whole by the drift check and replaced whole by a full
 * sync, which would list them every time and empty them. This one is created once and
 * never replaced (`add` is idempotent, chains are flushed and refilled); its drift check
 * lists it terse (no elements).
 *
 * Keys: IPv4 `saddr . sport . daddr . dport` (16 bytes: each part padded to 4). nft 1.0.6
 * refuses packet-path updates of longer keys, so IPv6 uses two 32-bit `jhash`es of the same
 * tuple with independent seeds (8 bytes): two concurrent flows share a key with
 * probability 2^-64 per pair (bench/flow-table.bench.ts: 0 of 10^6 tuples; 140 pairs with
 * one 32-bit hash).
 *
 * Does not: decide which node (passlb's listener chains, service-part.ts), pin UDP or SCTP
 * (no SYN starts them; conntrack's mark pins them as before).
 */
import { type Transaction, TransactionBuilder } from "../../../drivers/nft-transaction.ts";
import {
  chainOf,
  FAMS,
  type Fam,
  formatMark,
  ipKey,
  MARK_BASE,
  MARK_V6_BIT,
  type NftChain,
  type NftSet,
  type NftState,
} from "./nft-state.ts";
import { pushRules } from "./render-ruleset.ts";

export interface FlowTableConfig {
  /** elements per family; a full map admits no new entry (the flow then keeps its node by
   * conntrack mark only) */
  readonly size: number;
  /** seconds an entry lives after its flow's last packet */
  readonly timeoutSeconds: number;
}

/** 1 Mi flows per family, 300 s idle: conntrack's `nf_conntrack_tcp_timeout_unacknowledged`,
 * the lifetime of a flow's conntrack entry when replies bypass the host. */
export const DEFAULT_FLOW_TABLE: FlowTableConfig = { size: 1_048_576, timeoutSeconds: 300 };

export const flowTableName = (table: string): string => `${table}-flows`;
export const flowMapName = (fam: Fam): string => `flows${fam}`;
export const isFlowMap = (name: string): boolean => name === "flows4" || name === "flows6";

export const FOLLOW_BASE = "type filter hook prerouting priority -151; policy accept;";
export const WRITE_BASE = "type filter hook prerouting priority -149; policy accept;";

/** The second seed of the IPv6 key: independent of the first for any table seed. */
const SEED_B = 0x5bd1e995;

/** The key of a packet's flow in its family's map. */
export function flowKey(fam: Fam, seed: number): string {
  const ip = ipKey(fam);
  const tuple = `${ip} saddr . th sport . ${ip} daddr . th dport`;
  if (fam === 4) return tuple;
  const h = (s: number) => `jhash ${tuple} mod 4294967295 seed ${formatMark(s)}`;
  return `${h(seed)} . ${h((seed ^ SEED_B) >>> 0)}`;
}

export function flowMap(fam: Fam, config: FlowTableConfig): NftSet {
  // two 32-bit integers: `typeof jhash …` makes nft 1.0.6 crash when it lists the map back,
  // numgen has the same integer type and prints
  const key =
    fam === 4
      ? "type ipv4_addr . inet_service . ipv4_addr . inet_service : mark"
      : "typeof numgen inc mod 2 . numgen inc mod 2 : meta mark";
  return {
    name: flowMapName(fam),
    decl: `${key}; ${flowLimits(config)} flags dynamic,timeout;`,
    isMap: true,
    elements: new Map(),
    dynamic: true,
  };
}

/** the part of a flow map's declaration a later run may change; what a listing gives back */
export const flowLimits = (c: FlowTableConfig): string => `size ${c.size}; timeout ${c.timeoutSeconds}s;`;

const SYN = "tcp flags & (syn | ack) == syn";
const NOT_SYN = "tcp flags & (syn | ack) != syn";
/** the marks of a family's nodes (nft-state.ts): v6 marks set bit 23 */
const markRange = (fam: Fam) =>
  `meta mark & 0xff800000 == ${formatMark(MARK_BASE | (fam === 6 ? MARK_V6_BIT : 0))}`;

/** The flow table's contents (what the drift check compares: names, rule counts, hashes). */
export function flowTableState(table: string, seed: number, config: FlowTableConfig): NftState {
  const follow = FAMS.map(
    (fam) => `meta l4proto tcp ${NOT_SYN} meta mark set ${flowKey(fam, seed)} map @${flowMapName(fam)}`,
  );
  const write = FAMS.flatMap((fam) => {
    const e = `@${flowMapName(fam)} { ${flowKey(fam, seed)} : meta mark }`;
    return [
      `meta l4proto tcp ${SYN} ${markRange(fam)} delete ${e} add ${e}`,
      `meta l4proto tcp ${NOT_SYN} ${markRange(fam)} update ${e}`,
    ];
  });
  const chains: NftChain[] = [chainOf("follow", follow, FOLLOW_BASE), chainOf("write", write, WRITE_BASE)];
  return {
    table: flowTableName(table),
    sets: new Map(FAMS.map((fam) => [flowMapName(fam), flowMap(fam, config)])),
    chains: new Map(chains.map((c) => [c.name, c])),
  };
}

/** Creates the table or brings its chains back, never touching the maps' elements (one
 * transaction). A map of another size or timeout makes nft refuse it: then `replace`. */
export function flowTableTransaction(state: NftState, replace = false): Transaction {
  const out = new TransactionBuilder(state.table);
  out.add({ kind: "table" });
  if (replace) out.delete({ kind: "table" }).add({ kind: "table" });
  for (const s of state.sets.values()) out.add({ kind: "map", name: s.name, decl: s.decl });
  for (const c of state.chains.values())
    out.add({ kind: "chain", name: c.name, base: c.base }).flush({ kind: "chain", name: c.name });
  for (const c of state.chains.values()) pushRules(out, c.name, c.rules!, c.hash);
  return out.done();
}
