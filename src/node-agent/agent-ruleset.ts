/**
 * Prints a node agent's rules (`agent-rules.ts`) as one nft transaction that replaces the
 * agent's own table, `inet passlb-agent`, atomically. Pure text out; the applier runs it.
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
 * Established connections keep their translation in conntrack, so replacing the table
 * does not move them. A second listener with the same VIP, protocol and port (a shared IP
 * misconfigured) is left out: the first one, in service order, wins.
 */
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
 * The script, in order (each step returns its lines):
 *   1. distinctListeners — the rules less a repeated VIP . protocol . port;
 *   2. replaceTable — create-then-delete, then open the table;
 *   3. familySets — per family: vips, remote-endpoints, served, no-endpoints, listeners;
 *   4. preroutingChain — the verdict-map lookup;
 *   5. listenerChain — one per kept rule: sources, mark, DNAT (or drop);
 *   6. guardChain, rejectChains, postroutingChain;
 *   7. mssChains — only with `mss`;
 * then the table is closed.
 */
export function agentRuleset(rules: readonly AgentRule[], options: AgentRulesetOptions = {}): string {
  const kept = distinctListeners(rules);
  const lines = [
    ...replaceTable(),
    ...familySets(kept, "IPv4"),
    ...familySets(kept, "IPv6"),
    ...preroutingChain(),
    ...kept.flatMap((r) => listenerChain(kept, r)),
    ...guardChain(),
    ...rejectChains(),
    ...postroutingChain(),
    ...(options.mss ? mssChains(options.mss) : []),
    "}",
  ];
  return `${lines.join("\n")}\n`;
}

const MARK = `0x${MASQUERADE_MARK.toString(16)}`;

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

function replaceTable(): string[] {
  // Create-then-delete makes the delete valid whether or not the table exists (nft 1.0.6
  // has no `destroy`); the whole script is one transaction.
  return [`table inet ${AGENT_TABLE}`, `delete table inet ${AGENT_TABLE}`, `table inet ${AGENT_TABLE} {`];
}

/** a set (or map) declaration with its elements on one line, none when empty */
function setLines(head: string, type: string, elements: readonly string[]): string[] {
  return [
    `  ${head} {`,
    `    type ${type}`,
    ...(elements.length > 0 ? [`    elements = { ${elements.join(", ")} }`] : []),
    "  }",
  ];
}

function familySets(kept: readonly AgentRule[], family: "IPv4" | "IPv6"): string[] {
  const f = fam(family);
  const mine = kept.filter((r) => r.family === family);
  const vips = [...new Set(mine.map((r) => r.vip))];
  const remote = [
    ...new Set(mine.flatMap((r) => r.targets.filter((t) => t.remote).map((t) => t.address))),
  ].sort();
  const key = (r: AgentRule) => `${r.vip} . ${r.protocol} . ${r.port}`;
  const rejected = mine.filter((r) => r.targets.length === 0 && r.noEndpoints);
  const keyType = `${f.addrType} . inet_proto . inet_service`;
  return [
    ...setLines(`set vips${f.n}`, f.addrType, vips),
    ...setLines(`set remote-endpoints${f.n}`, f.addrType, remote),
    // the listener keys again, as a set the guard can test (a vmap cannot be used as one)
    ...setLines(`set served${f.n}`, keyType, mine.map(key)),
    ...setLines(`set no-endpoints${f.n}`, keyType, rejected.map(key)),
    `  map listeners${f.n} {`,
    `    type ${keyType} : verdict`,
    ...(mine.length > 0
      ? ["    elements = {", ...mine.map((r) => `      ${key(r)} : goto ${chainName(kept, r)},`), "    }"]
      : []),
    "  }",
  ];
}

function preroutingChain(): string[] {
  return [
    "  chain prerouting {",
    "    type nat hook prerouting priority dstnat; policy accept;",
    "    ip daddr . meta l4proto . th dport vmap @listeners4",
    "    ip6 daddr . meta l4proto . th dport vmap @listeners6",
    "  }",
  ];
}

function listenerChain(kept: readonly AgentRule[], r: AgentRule): string[] {
  const f = fam(r.family);
  const lines = [
    `  chain ${chainName(kept, r)} {`,
    `    # ${r.service} ${r.listener} ${r.policy}${r.terminatingFallback ? " (terminating endpoints)" : ""}`,
  ];
  if (r.sourceRanges !== null) {
    if (r.sourceRanges.length === 0) lines.push("    drop");
    else lines.push(`    ${f.proto} saddr != { ${r.sourceRanges.join(", ")} } drop`);
  }
  if (r.targets.length === 0) {
    // no endpoint at all: left undone here, rejected by reject-forward/-input
    if (!r.noEndpoints) lines.push("    drop");
  } else {
    if (r.targets.some((t) => t.remote)) lines.push(`    meta mark set meta mark | ${MARK}`);
    const pick =
      r.pick === "client-ip"
        ? `jhash ${f.proto} saddr mod ${r.targets.length} seed 0x${AFFINITY_SEED.toString(16)}`
        : `numgen random mod ${r.targets.length}`;
    const map = r.targets.map((t, i) => `${i} : ${f.literal(t.address)} . ${t.port}`).join(", ");
    lines.push(`    meta l4proto ${r.protocol} dnat ${f.proto} to ${pick} map { ${map} }`);
  }
  lines.push("  }");
  return lines;
}

function guardChain(): string[] {
  return [
    "  chain guard {",
    "    type filter hook prerouting priority dstnat + 10; policy accept;",
    // A listener's packet still addressed to the VIP here had its NAT claimed by a chain
    // before ours (an LB host's passlb lb, docs/dataplane-nftables.md): kube-proxy lets such
    // packets pass, and so do we. What nobody serves is dropped.
    "    ip daddr . meta l4proto . th dport @served4 accept",
    "    ip6 daddr . meta l4proto . th dport @served6 accept",
    "    ip daddr @vips4 drop",
    "    ip6 daddr @vips6 drop",
    "  }",
  ];
}

function rejectChains(): string[] {
  return ["forward", "input"].flatMap((hook) => [
    `  chain reject-${hook} {`,
    `    type filter hook ${hook} priority -10; policy accept;`,
    "    ct state new ip daddr . meta l4proto . th dport @no-endpoints4 reject",
    "    ct state new ip6 daddr . meta l4proto . th dport @no-endpoints6 reject",
    "  }",
  ]);
}

function postroutingChain(): string[] {
  return [
    "  chain postrouting {",
    "    type nat hook postrouting priority srcnat; policy accept;",
    `    meta mark & ${MARK} == ${MARK} ip daddr @remote-endpoints4 masquerade`,
    `    meta mark & ${MARK} == ${MARK} ip6 daddr @remote-endpoints6 masquerade`,
    "  }",
  ];
}

function mssChains(mss: { readonly 4: number; readonly 6: number }): string[] {
  const synAck = "tcp flags & (syn | ack) == syn | ack";
  const clamp = (n: number) => `tcp option maxseg size > ${n} tcp option maxseg size set ${n}`;
  return [
    "  chain mss-forward {",
    "    type filter hook forward priority mangle; policy accept;",
    `    ct direction reply ct original ip daddr @vips4 ${synAck} ${clamp(mss[4])}`,
    `    ct direction reply ct original ip6 daddr @vips6 ${synAck} ${clamp(mss[6])}`,
    "  }",
    "  chain mss-output {",
    "    type filter hook output priority mangle; policy accept;",
    `    ip saddr @vips4 ${synAck} ${clamp(mss[4])}`,
    `    ip6 saddr @vips6 ${synAck} ${clamp(mss[6])}`,
    "  }",
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
