/**
 * Turns a node agent's rules (`agent-rules.ts`) into one nft Transaction of typed operations
 * (drivers/nft-transaction.ts) that replaces the agent's own table, `inet passlb-agent`,
 * atomically. Pure: operations out; the one nft driver (drivers/nft.ts) runs them, its fake
 * (drivers/fake-nft.ts) applies them in memory, `nftScript` prints them (the goldens).
 *
 * Shape (nftables wiki "Performing Network Address Translation", "Maps", "Concatenations"):
 *   - `prerouting` (nat, dstnat): one verdict-map lookup on destination . protocol . port
 *     jumps to a chain per VIP listener, before routing, so the node needs no VIP on an
 *     interface;
 *   - a listener chain drops sources outside the ranges, marks Cluster traffic for
 *     masquerade, then DNATs to `numgen random` (or `jhash` of the client address for
 *     ClientIP affinity) mod N over a map of `address . port`; with nothing to DNAT to it
 *     drops (eTP Local, no endpoint here) or, when the Service port has no endpoint at
 *     all, lets the packet on to be rejected;
 *   - `reject-forward` / `reject-input` (filter, forward and input hooks, priority -10):
 *     a new connection to a listener in `no-endpoints4/6` is rejected (`reject`: ICMP or
 *     ICMPv6 port unreachable), as kube-proxy's `reject-chain` does, from its filter chains
 *     on the forward/input/output hooks (kubernetes pkg/proxy/nftables/proxier.go; the
 *     kernel accepts `reject` only on those hooks, not in a nat prerouting chain);
 *   - `guard` (filter, after dstnat): what is still addressed to a VIP on a port no
 *     listener serves is dropped instead of being routed back out (no endpoint and refused
 *     sources are dropped in the listener chain already); a listener's packet whose NAT an
 *     earlier nat chain claimed (an LB host that is also a node) passes, as with kube-proxy;
 *   - `postrouting` (nat, srcnat): marked packets to an endpoint on another node are
 *     masqueraded, so the reply returns through this node and is un-NATed here;
 *   - with `mss` (a node behind encapsulation, issue 21): `mss-forward` and `mss-output`
 *     lower the MSS of the SYN-ACKs this node sends for VIP flows — a pod's (forwarded, the
 *     reply of a connection whose original destination is a VIP) and a local listener's
 *     (source VIP) — so the client's segments fit the tunnel (docs/agent-dataplane.md "Decapsulation",
 *     "MSS clamp"; only lowered, never raised).
 * The operations come in an order nft accepts one at a time: the table replaced, the sets and
 * maps declared (with their elements), each chain with its rules (a rule's `@set` exists),
 * then the listener verdict maps' elements (each `goto` names a chain that exists).
 * Elements go in chunks of CHUNK per operation, as the LB's renderer does.
 * Established connections keep their translation in conntrack, so replacing the table
 * does not move them. A second listener with the same VIP, protocol and port (a shared IP
 * misconfigured) is left out: the first one, in service order, wins.
 */
import {
  elementOps,
  type NftObject,
  type NftOp,
  type Transaction,
  transaction,
} from "../drivers/nft-transaction.ts";
import type { AgentRule } from "./agent-rules.ts";

export const AGENT_TABLE = "passlb-agent";
/** the packet mark bit that asks postrouting to masquerade (kube-proxy uses the same bit) */
export const MASQUERADE_MARK = 0x4000;
/** jhash seed for ClientIP affinity; fixed so every node and every restart agree */
export const AFFINITY_SEED = 0x706c62;

export interface AgentRulesetOptions {
  /** clamp the MSS of VIP flows' SYN-ACKs to this, per family (encap.ts clampedMss) */
  readonly mss?: { readonly 4: number; readonly 6: number };
}

/**
 * The transaction, in order (each step returns its operations):
 *   1. distinctListeners — the rules less a repeated VIP . protocol . port;
 *   2. replaceTable — add, delete, add the table;
 *   3. familySets — per family: vips, remote-endpoints, served, no-endpoints, the listeners map;
 *   4. preroutingChain — the verdict-map lookup;
 *   5. listenerChain — one per kept rule: sources, mark, DNAT (or drop);
 *   6. guardChain, rejectChains, postroutingChain;
 *   7. mssChains — only with `mss`;
 *   8. listenerVerdicts — per family: the listeners map's `goto` elements.
 */
export function agentRuleset(rules: readonly AgentRule[], options: AgentRulesetOptions = {}): Transaction {
  const kept = distinctListeners(rules);
  return transaction(AGENT_TABLE, [
    ...replaceTable(),
    ...familySets(kept, "IPv4"),
    ...familySets(kept, "IPv6"),
    ...preroutingChain(),
    ...kept.flatMap((r) => listenerChain(kept, r)),
    ...guardChain(),
    ...rejectChains(),
    ...postroutingChain(),
    ...(options.mss ? mssChains(options.mss) : []),
    ...listenerVerdicts(kept, "IPv4"),
    ...listenerVerdicts(kept, "IPv6"),
  ]);
}

/** Removes the agent's table whether or not it exists (the agent's `close`). */
export function agentTableRemoval(): Transaction {
  return transaction(AGENT_TABLE, [add(TABLE), { verb: "delete", object: TABLE }]);
}

const MARK = `0x${MASQUERADE_MARK.toString(16)}`;
/** elements per operation: no one command line grows with the table */
const CHUNK = 1024;
const TABLE = { kind: "table" } as const;

const add = (object: NftObject): NftOp => ({ verb: "add", object });

/** the first rule of each VIP . protocol . port, in service order */
function distinctListeners(rules: readonly AgentRule[]): AgentRule[] {
  const seen = new Set<string>();
  const kept: AgentRule[] = [];
  for (const r of rules) {
    const key = `${r.vip} ${r.protocol} ${r.port}`;
    if (seen.has(key)) continue;
    seen.add(key);
    kept.push(r);
  }
  return kept;
}

function replaceTable(): NftOp[] {
  // Add-then-delete makes the delete valid whether or not the table exists (nft 1.0.6 has
  // no `destroy`); the whole transaction is one kernel transaction (nft(8) "TABLES").
  return [add(TABLE), { verb: "delete", object: TABLE }, add(TABLE)];
}

/** a set's declaration, then its elements */
function set(name: string, type: string, keys: readonly string[]): NftOp[] {
  return [
    add({ kind: "set", name, decl: `type ${type};` }),
    ...elementOps(
      "add",
      name,
      keys.map((key) => ({ key })),
      CHUNK,
    ),
  ];
}

/** a chain (a base chain with its hook spec) and its rules */
function chain(name: string, base: string | null, rules: readonly string[]): NftOp[] {
  return [
    add({ kind: "chain", name, base }),
    ...rules.map((rule) => add({ kind: "rule", chain: name, rule })),
  ];
}

const listenerKey = (r: AgentRule) => `${r.vip} . ${r.protocol} . ${r.port}`;
const keyType = (family: "IPv4" | "IPv6") => `${fam(family).addrType} . inet_proto . inet_service`;

function familySets(kept: readonly AgentRule[], family: "IPv4" | "IPv6"): NftOp[] {
  const f = fam(family);
  const mine = kept.filter((r) => r.family === family);
  const vips = [...new Set(mine.map((r) => r.vip))];
  const remote = [
    ...new Set(mine.flatMap((r) => r.targets.filter((t) => t.remote).map((t) => t.address))),
  ].sort();
  const rejected = mine.filter((r) => r.targets.length === 0 && r.noEndpoints);
  return [
    ...set(`vips${f.n}`, f.addrType, vips),
    ...set(`remote-endpoints${f.n}`, f.addrType, remote),
    // the listener keys again, as a set the guard can test (a vmap cannot be used as one)
    ...set(`served${f.n}`, keyType(family), mine.map(listenerKey)),
    ...set(`no-endpoints${f.n}`, keyType(family), rejected.map(listenerKey)),
    // its elements come last (listenerVerdicts): each names a listener chain
    add({ kind: "map", name: `listeners${f.n}`, decl: `type ${keyType(family)} : verdict;` }),
  ];
}

function listenerVerdicts(kept: readonly AgentRule[], family: "IPv4" | "IPv6"): NftOp[] {
  const mine = kept.filter((r) => r.family === family);
  const items = mine.map((r) => ({ key: listenerKey(r), value: `goto ${chainName(kept, r)}` }));
  return elementOps("add", `listeners${fam(family).n}`, items, CHUNK);
}

function preroutingChain(): NftOp[] {
  return chain("prerouting", "type nat hook prerouting priority dstnat; policy accept;", [
    "ip daddr . meta l4proto . th dport vmap @listeners4",
    "ip6 daddr . meta l4proto . th dport vmap @listeners6",
  ]);
}

/** one kept rule's chain, named by its index (the rules goldens, `*.rules.golden.json`, say which Service it is) */
function listenerChain(kept: readonly AgentRule[], r: AgentRule): NftOp[] {
  const f = fam(r.family);
  const rules: string[] = [];
  if (r.sourceRanges !== null) {
    if (r.sourceRanges.length === 0) rules.push("drop");
    else rules.push(`${f.proto} saddr != { ${r.sourceRanges.join(", ")} } drop`);
  }
  if (r.targets.length === 0) {
    // no endpoint at all: left undone here, rejected by reject-forward/-input
    if (!r.noEndpoints) rules.push("drop");
  } else {
    if (r.targets.some((t) => t.remote)) rules.push(`meta mark set meta mark | ${MARK}`);
    const pick =
      r.pick === "client-ip"
        ? `jhash ${f.proto} saddr mod ${r.targets.length} seed 0x${AFFINITY_SEED.toString(16)}`
        : `numgen random mod ${r.targets.length}`;
    const map = r.targets.map((t, i) => `${i} : ${f.literal(t.address)} . ${t.port}`).join(", ");
    rules.push(`meta l4proto ${r.protocol} dnat ${f.proto} to ${pick} map { ${map} }`);
  }
  return chain(chainName(kept, r), null, rules);
}

function guardChain(): NftOp[] {
  // A listener's packet still addressed to the VIP here had its NAT claimed by a chain
  // before ours (an LB host's passlb lb, docs/dataplane-nftables.md): kube-proxy lets such
  // packets pass, and so do we. What nobody serves is dropped.
  return chain("guard", "type filter hook prerouting priority dstnat + 10; policy accept;", [
    "ip daddr . meta l4proto . th dport @served4 accept",
    "ip6 daddr . meta l4proto . th dport @served6 accept",
    "ip daddr @vips4 drop",
    "ip6 daddr @vips6 drop",
  ]);
}

function rejectChains(): NftOp[] {
  return ["forward", "input"].flatMap((hook) =>
    chain(`reject-${hook}`, `type filter hook ${hook} priority -10; policy accept;`, [
      "ct state new ip daddr . meta l4proto . th dport @no-endpoints4 reject",
      "ct state new ip6 daddr . meta l4proto . th dport @no-endpoints6 reject",
    ]),
  );
}

function postroutingChain(): NftOp[] {
  return chain("postrouting", "type nat hook postrouting priority srcnat; policy accept;", [
    `meta mark & ${MARK} == ${MARK} ip daddr @remote-endpoints4 masquerade`,
    `meta mark & ${MARK} == ${MARK} ip6 daddr @remote-endpoints6 masquerade`,
  ]);
}

function mssChains(mss: { readonly 4: number; readonly 6: number }): NftOp[] {
  const synAck = "tcp flags & (syn | ack) == syn | ack";
  const clamp = (n: number) => `tcp option maxseg size > ${n} tcp option maxseg size set ${n}`;
  return [
    ...chain("mss-forward", "type filter hook forward priority mangle; policy accept;", [
      `ct direction reply ct original ip daddr @vips4 ${synAck} ${clamp(mss[4])}`,
      `ct direction reply ct original ip6 daddr @vips6 ${synAck} ${clamp(mss[6])}`,
    ]),
    ...chain("mss-output", "type filter hook output priority mangle; policy accept;", [
      `ip saddr @vips4 ${synAck} ${clamp(mss[4])}`,
      `ip6 saddr @vips6 ${synAck} ${clamp(mss[6])}`,
    ]),
  ];
}

function chainName(kept: readonly AgentRule[], r: AgentRule): string {
  return `listener-${kept.indexOf(r)}`;
}

function fam(family: "IPv4" | "IPv6") {
  return family === "IPv4"
    ? { n: "4", proto: "ip", addrType: "ipv4_addr", literal: (a: string) => a }
    : { n: "6", proto: "ip6", addrType: "ipv6_addr", literal: (a: string) => `[${a}]` };
}
