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
 *     masqueraded, so the reply returns through this node and is un-NATed here.
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

export function agentRuleset(rules: readonly AgentRule[]): string {
  const seen = new Set<string>();
  const kept: AgentRule[] = [];
  for (const r of rules) {
    const key = `${r.vip} ${r.protocol} ${r.port}`;
    if (seen.has(key)) continue;
    seen.add(key);
    kept.push(r);
  }
  const mark = `0x${MASQUERADE_MARK.toString(16)}`;
  const lines: string[] = [];
  const out = (s: string) => lines.push(s);
  // Create-then-delete makes the delete valid whether or not the table exists (nft 1.0.6
  // has no `destroy`); the whole script is one transaction.
  out(`table inet ${AGENT_TABLE}`);
  out(`delete table inet ${AGENT_TABLE}`);
  out(`table inet ${AGENT_TABLE} {`);
  for (const family of ["IPv4", "IPv6"] as const) {
    const f = fam(family);
    const mine = kept.filter((r) => r.family === family);
    const vips = [...new Set(mine.map((r) => r.vip))];
    const remote = [
      ...new Set(mine.flatMap((r) => r.targets.filter((t) => t.remote).map((t) => t.address))),
    ].sort();
    out(`  set vips${f.n} {`);
    out(`    type ${f.addrType}`);
    if (vips.length > 0) out(`    elements = { ${vips.join(", ")} }`);
    out("  }");
    out(`  set remote-endpoints${f.n} {`);
    out(`    type ${f.addrType}`);
    if (remote.length > 0) out(`    elements = { ${remote.join(", ")} }`);
    out("  }");
    // the listener keys again, as a set the guard can test (a vmap cannot be used as one)
    out(`  set served${f.n} {`);
    out(`    type ${f.addrType} . inet_proto . inet_service`);
    if (mine.length > 0)
      out(`    elements = { ${mine.map((r) => `${r.vip} . ${r.protocol} . ${r.port}`).join(", ")} }`);
    out("  }");
    const rejected = mine.filter((r) => r.targets.length === 0 && r.noEndpoints);
    out(`  set no-endpoints${f.n} {`);
    out(`    type ${f.addrType} . inet_proto . inet_service`);
    if (rejected.length > 0)
      out(`    elements = { ${rejected.map((r) => `${r.vip} . ${r.protocol} . ${r.port}`).join(", ")} }`);
    out("  }");
    out(`  map listeners${f.n} {`);
    out(`    type ${f.addrType} . inet_proto . inet_service : verdict`);
    if (mine.length > 0) {
      out("    elements = {");
      for (const r of mine) out(`      ${r.vip} . ${r.protocol} . ${r.port} : goto ${chainName(kept, r)},`);
      out("    }");
    }
    out("  }");
  }
  out("  chain prerouting {");
  out("    type nat hook prerouting priority dstnat; policy accept;");
  out("    ip daddr . meta l4proto . th dport vmap @listeners4");
  out("    ip6 daddr . meta l4proto . th dport vmap @listeners6");
  out("  }");
  for (const r of kept) {
    const f = fam(r.family);
    out(`  chain ${chainName(kept, r)} {`);
    out(
      `    # ${r.service} ${r.listener} ${r.policy}${r.terminatingFallback ? " (terminating endpoints)" : ""}`,
    );
    if (r.sourceRanges !== null) {
      if (r.sourceRanges.length === 0) out("    drop");
      else out(`    ${f.proto} saddr != { ${r.sourceRanges.join(", ")} } drop`);
    }
    if (r.targets.length === 0) {
      // no endpoint at all: left undone here, rejected by reject-forward/-input
      if (!r.noEndpoints) out("    drop");
    } else {
      if (r.targets.some((t) => t.remote)) out(`    meta mark set meta mark | ${mark}`);
      const pick =
        r.pick === "client-ip"
          ? `jhash ${f.proto} saddr mod ${r.targets.length} seed 0x${AFFINITY_SEED.toString(16)}`
          : `numgen random mod ${r.targets.length}`;
      const map = r.targets.map((t, i) => `${i} : ${f.literal(t.address)} . ${t.port}`).join(", ");
      out(`    meta l4proto ${r.protocol} dnat ${f.proto} to ${pick} map { ${map} }`);
    }
    out("  }");
  }
  out("  chain guard {");
  out("    type filter hook prerouting priority dstnat + 10; policy accept;");
  // A listener's packet still addressed to the VIP here had its NAT claimed by a chain
  // before ours (an LB host's passlb lb, docs/dataplane-nftables.md): kube-proxy lets such
  // packets pass, and so do we. What nobody serves is dropped.
  out("    ip daddr . meta l4proto . th dport @served4 accept");
  out("    ip6 daddr . meta l4proto . th dport @served6 accept");
  out("    ip daddr @vips4 drop");
  out("    ip6 daddr @vips6 drop");
  out("  }");
  for (const hook of ["forward", "input"]) {
    out(`  chain reject-${hook} {`);
    out(`    type filter hook ${hook} priority -10; policy accept;`);
    out("    ct state new ip daddr . meta l4proto . th dport @no-endpoints4 reject");
    out("    ct state new ip6 daddr . meta l4proto . th dport @no-endpoints6 reject");
    out("  }");
  }
  out("  chain postrouting {");
  out("    type nat hook postrouting priority srcnat; policy accept;");
  out(`    meta mark & ${mark} == ${mark} ip daddr @remote-endpoints4 masquerade`);
  out(`    meta mark & ${mark} == ${mark} ip6 daddr @remote-endpoints6 masquerade`);
  out("  }");
  out("}");
  return `${lines.join("\n")}\n`;
}

function chainName(kept: readonly AgentRule[], r: AgentRule): string {
  return `listener-${kept.indexOf(r)}`;
}

function fam(family: "IPv4" | "IPv6") {
  return family === "IPv4"
    ? { n: "4", proto: "ip", addrType: "ipv4_addr", literal: (a: string) => a }
    : { n: "6", proto: "ip6", addrType: "ipv6_addr", literal: (a: string) => `[${a}]` };
}
