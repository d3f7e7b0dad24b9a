/**
 * NftState: the contents of passlb's own nftables table as plain data, in the exact text
 * forms the renderer writes and the dump parser reads back, so that desired and observed
 * states compare with `===`. One model serves the full ruleset, the incremental diff, the
 * fake applier and drift detection.
 *
 * Objects (docs/dataplane-nftables.md has the picture):
 *   - `live` (set of marks): every node mark in use; an established flow whose conntrack mark
 *     is in it keeps its node;
 *   - `nexthops4` / `nexthops6` (mark → node address): the record of which mark routes where,
 *     read back when a new process adopts the table;
 *   - `dispatch4` / `dispatch6` (VIP . protocol . port → goto listener chain): one lookup
 *     per packet, as kube-proxy's nftables mode does (landscape.md §2.4, §4.5);
 *   - `m<n>` slot maps (Maglev slot → node mark), shared by every listener whose table has
 *     the same contents;
 *   - `src_*` / `zone_*` interval sets (loadBalancerSourceRanges, client zones);
 *   - `node_<mark>` named counters and the `nodecounters` map (mark → counter): packets
 *     and bytes sent to each node, read back by `nft -j list counters` (issue 9 metrics);
 *   - chains: `prerouting` (the hook), one chain per Service listener and family, and
 *     `count` (a later prerouting base chain: one counter lookup by the mark just set),
 *     `untrack` (raw priority: a VIP's TCP SYN is not tracked).
 * The TCP flow table is a table of its own beside this one (flow-map.ts), in the same model.
 * A chain's rules are compared by a hash carried in its last rule's comment, because the
 * kernel prints rules back in a normalised form that differs from what we wrote.
 *
 * Does not: talk to nft (drivers/nft.ts), decide policy (forwarding-state.ts).
 */

export const TABLE_FAMILY = "inet";

/** Node marks live in 0x5a000000..0x5affffff; IPv6 next hops set bit 23. The mark is also the
 * policy-routing table id, so the route set needs no second allocator. */
export const MARK_BASE = 0x5a000000;
export const MARK_V6_BIT = 0x00800000;
export const MARK_INDEX_LIMIT = 0x00800000;

export type Fam = 4 | 6;

export const FAMS: readonly Fam[] = [4, 6];
export const familyName = (fam: Fam): "IPv4" | "IPv6" => (fam === 4 ? "IPv4" : "IPv6");
/** the nft payload keyword of a family (`ip saddr`, `ip6 saddr`) */
export const ipKey = (fam: Fam): "ip" | "ip6" => (fam === 4 ? "ip" : "ip6");

export interface NftSet {
  readonly name: string;
  /** the declaration inside the braces, e.g. `type ipv4_addr; flags interval;` */
  readonly decl: string;
  readonly isMap: boolean;
  /** key → value ("" for sets), in render form */
  readonly elements: ReadonlyMap<string, string>;
  /** slot maps built by desired-state: the marks per slot and their content key, so the
   * next pass compares arrays instead of re-reading elements (absent when read back) */
  readonly slots?: Uint32Array;
  readonly contentKey?: string;
  /** written by the packet path (the flow maps, flow-map.ts): its elements are the kernel's,
   * never rendered, compared or read back; `decl` read back holds only its limits */
  readonly dynamic?: boolean;
}

export interface NftChain {
  readonly name: string;
  /** base-chain declaration (`type filter hook … policy accept;`), null for a regular chain */
  readonly base: string | null;
  /** rule texts without the hash comment; null when read back from the kernel */
  readonly rules: readonly string[] | null;
  readonly ruleCount: number;
  /** hash of the rules, carried as `comment "passlb <hash>"` on the last rule */
  readonly hash: string;
}

export interface NftState {
  readonly table: string;
  readonly sets: ReadonlyMap<string, NftSet>;
  readonly chains: ReadonlyMap<string, NftChain>;
  /** named counters (`node_<mark>`: packets and bytes forwarded to one node); absent = none */
  readonly counters?: ReadonlySet<string>;
}

/** The named counter of a node mark. */
export const nodeCounterName = (mark: number): string => `node_${hex8(mark)}`;

/** Names of the sets and chains a pass added, replaced or removed (undefined: compare all). */
export interface Touched {
  readonly sets: ReadonlySet<string>;
  readonly chains: ReadonlySet<string>;
}

export const emptyNftState = (table: string): NftState => ({ table, sets: new Map(), chains: new Map() });

export const formatMark = (mark: number): string => `0x${(mark >>> 0).toString(16).padStart(8, "0")}`;

export const markFor = (fam: Fam, index: number): number =>
  (MARK_BASE | (fam === 6 ? MARK_V6_BIT : 0) | index) >>> 0;

/** FNV-1a over a string: short stable names and chain hashes (not security relevant). */
export function fnv1a(text: string, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** Content key of a slot table: its size and two independent hashes of the marks. */
export function slotContentKey(marks: Uint32Array): string {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let k = 0; k < marks.length; k++) {
    const m = marks[k]!;
    a = Math.imul(a ^ m, 0x01000193) >>> 0;
    b = Math.imul(b ^ ((m + k) >>> 0), 0x5bd1e995) >>> 0;
    b ^= b >>> 15;
  }
  return `${marks.length}:${hex8(a)}${hex8(b)}`;
}

export const hex8 = (n: number): string => (n >>> 0).toString(16).padStart(8, "0");

export function chainOf(name: string, rules: readonly string[], base: string | null = null): NftChain {
  return {
    name,
    base,
    rules,
    ruleCount: rules.length,
    hash: hex8(fnv1a(`${base ?? ""}\n${rules.join("\n")}`)),
  };
}

export const HASH_COMMENT_PREFIX = "passlb ";

/** A name nft accepts as an identifier: letters, digits, `_`, `.`, `-`; anything else becomes
 * `_` and a hash suffix keeps distinct inputs distinct. */
export function safeName(text: string): string {
  const cleaned = text.replace(/[^A-Za-z0-9_.-]/g, "_");
  const ok = cleaned === text && /^[A-Za-z_]/.test(text);
  return ok ? text : `${/^[A-Za-z_]/.test(cleaned) ? "" : "x"}${cleaned}_${hex8(fnv1a(text)).slice(0, 6)}`;
}
