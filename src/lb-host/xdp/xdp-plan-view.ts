/**
 * `passlb plan --dataplane xdp`: what the XDP fast path would hold for one plan, and what it
 * hands to the nftables table behind it, with the reason (docs/dataplane-xdp.md "What the
 * stack (nftables) handles"). The forwarding state is the LB host's own — the same
 * `serviceForwarding` with the kernel's table sizes (kernel-table-size.ts) — before any
 * health verdict, so every member counts as it does with unknown health.
 *
 * Per listener: whether XDP forwards it (TCP and UDP; SCTP is the table's), the ring's
 * slots and the nodes holding them, the per-zone rings of zonal affinity, and the `vips`
 * entries (one per VIP of each family). Per member: `xdp` when the LB host reaches it on the
 * segment, `nftables` when it is routed (`--forward encap`: the program does not
 * encapsulate). Source ranges: the prefixes of the LPM trie that drops other clients at the
 * driver. Decided at run time and not shown: a node whose neighbour is not resolved yet goes
 * through the table until the next drift check; fragments, IP options, TTL ≤ 1 and frames
 * above the node's MTU always do.
 *
 * Pure.
 */
import { ALL_UNKNOWN, serviceForwarding } from "../../forwarding/forwarding-state.ts";
import type { LoadBalancerPlan } from "../../plan/load-balancer-plan.ts";
import { describePath, type Forward, nodePath } from "../routing/encap.ts";

export interface XdpListenerView {
  /** `TCP/80` */
  readonly listener: string;
  readonly by: "xdp" | "nftables";
  readonly why?: string;
  /** the ring's slots (M) and the nodes owning slots; XDP listeners only */
  readonly slots?: number;
  readonly nodes?: number;
  /** zonal affinity: one ring per zone with clientCIDRs and healthy members */
  readonly zoneRings?: number;
  /** `vips` map entries: one per VIP address of the listener's Service */
  readonly vipEntries?: number;
}

export interface XdpMemberView {
  readonly node: string;
  readonly by: "xdp" | "nftables";
  /** `xdp`, or the nftables path (`encap vxlan-gpe:4790`) with the reason */
  readonly path: string;
}

export interface XdpPlanView {
  readonly listeners: readonly XdpListenerView[];
  readonly members: readonly XdpMemberView[];
  /** prefixes in the source-range trie (both families); absent without loadBalancerSourceRanges */
  readonly sourceRangePrefixes?: number;
  readonly affinity: "none" | "ClientIP";
}

export interface XdpPlanOptions {
  readonly seed: number;
  readonly sizeFor: (backends: number) => number;
  /** how the LB host reaches nodes; default: on the segment (`route`) */
  readonly forward?: Forward;
  /** PasslbConfig zones with client CIDRs (a zone without them gets no ring) */
  readonly zonesWithClients: ReadonlySet<string>;
}

const NOT_ENCAPSULATED = "XDP does not encapsulate";

export function xdpPlanView(plan: LoadBalancerPlan, options: XdpPlanOptions): XdpPlanView {
  const forward: Forward = options.forward ?? { mode: "route" };
  const forwarding = serviceForwarding(plan, ALL_UNKNOWN, { seed: options.seed, sizeFor: options.sizeFor });
  const listeners = forwarding.listeners.map((l): XdpListenerView => {
    if (l.protocol === "SCTP")
      return { listener: l.listener, by: "nftables", why: "XDP forwards TCP and UDP only" };
    const zoneRings = [...l.zoneTables.keys()].filter((z) => options.zonesWithClients.has(z)).length;
    return {
      listener: l.listener,
      by: "xdp",
      slots: l.table.size,
      nodes: l.table.backends.length,
      ...(zoneRings > 0 && { zoneRings }),
      vipEntries: plan.vips.length,
    };
  });
  const members = plan.members.map((m): XdpMemberView => {
    const address = m.addresses.IPv4 ?? m.addresses.IPv6;
    const path = address === undefined ? "route" : nodePath(forward, address);
    return path === "route"
      ? { node: m.node, by: "xdp", path: "xdp" }
      : {
          node: m.node,
          by: "nftables",
          path: `${describePath(forward, path)} (through nftables: ${NOT_ENCAPSULATED})`,
        };
  });
  return {
    listeners,
    members,
    ...(plan.sourceRanges.length > 0 && { sourceRangePrefixes: plan.sourceRanges.length }),
    affinity: plan.sessionAffinity.type === "ClientIP" ? "ClientIP" : "none",
  };
}

/** The view's lines for `passlb plan`'s text output (after "Data plane:"). */
export function xdpPlanLines(view: XdpPlanView): string[] {
  const lines: string[] = [];
  for (const l of view.listeners) {
    if (l.by === "nftables") {
      lines.push(`nftables — ${l.listener}: ${l.why}`);
      continue;
    }
    const zones = l.zoneRings ? `, ${l.zoneRings} zone ring(s)` : "";
    const hash = view.affinity === "ClientIP" ? "client address" : "5-tuple";
    lines.push(
      `xdp — ${l.listener}: ${l.slots}-slot ring over ${l.nodes} node(s)${zones}, ${l.vipEntries} vips entr${l.vipEntries === 1 ? "y" : "ies"}, hash of the ${hash}, flows pinned in the flow table`,
    );
  }
  if (view.sourceRangePrefixes !== undefined)
    lines.push(
      `xdp — other clients dropped at the driver (${view.sourceRangePrefixes} source-range prefix(es))`,
    );
  const handed = view.members.filter((m) => m.by === "nftables").length;
  if (handed > 0) lines.push(`nftables — ${handed} routed member(s): ${NOT_ENCAPSULATED}`);
  return lines;
}
