/**
 * Which LB hosts announce each VIP, and why (`passlb plan --announce l2|bgp`,
 * docs/plan.md "Announcement"). Pure: the plans, the LB hosts and (BGP) the
 * LoadBalancerBGPPeers in; per VIP, each host's role and reason out. It predicts from the
 * plan what `passlb lb` would do with every host up and every probe agreeing with the plan;
 * it cannot see live health, so it also lists the conditions under which a host gives a VIP up.
 *
 * - L2 (keepalived): the VRRP instance keepalived-config.ts renders for the VIP, its host
 *   order and priorities (250 − 10 × place): the first host holds the VIP, the others stand
 *   by in that order. Hosts without an address of the VIP's family take no part.
 * - BGP: no election (docs/maglev.md: identical Maglev tables on every host): every
 *   host that has a session of the VIP's family announces it. A host has sessions when a
 *   LoadBalancerBGPPeer selects its Node (bgp-peer-config.ts `peerSelectsHost`); with no
 *   such objects in the input the sessions are the host's `--bgp-peer` flags, not known here.
 * - Either way: a VIP whose plan has no member node is announced by nobody
 *   (announcer.ts `vipReadiness`: no healthy backend).
 */
import type { LoadBalancerBGPPeer } from "../k8s/load-balancer-bgp-peer.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import type { IpFamily, PeerAddresses } from "./announcer.ts";
import { peerSelectsHost } from "./bgp/bgp-peer-config.ts";
import { BASE_PRIORITY, keepalivedInstances, PRIORITY_STEP } from "./keepalived-config.ts";

export type AnnounceMode = "l2" | "bgp";

export interface LbHost {
  readonly name: string;
  readonly addresses: { readonly IPv4?: string; readonly IPv6?: string };
  /** the host's Node labels (hosts from `--peer-label`); undefined when it is not a Node */
  readonly labels?: Readonly<Record<string, string>>;
}

export interface AnnouncePlanInput {
  readonly mode: AnnounceMode;
  readonly hosts: readonly LbHost[];
  readonly plans: readonly LoadBalancerPlan[];
  /** BGP: the LoadBalancerBGPPeers of the input (none: the hosts' --bgp-peer flags) */
  readonly bgpPeers?: readonly LoadBalancerBGPPeer[];
}

/** holds: answers ARP/ND (L2); backup: takes over in `priority` order (L2); announces: a
 * route to the routers (BGP); none: takes no part, see `reason` */
export type HostRole = "holds" | "backup" | "announces" | "none";

export interface HostAnnouncement {
  readonly host: string;
  readonly role: HostRole;
  /** L2: the VRRP priority */
  readonly priority?: number;
  readonly reason: string;
}

export interface VipAnnouncePlan {
  readonly vip: string;
  readonly family: IpFamily;
  readonly services: readonly string[];
  /** L2: the vrrp_instance */
  readonly group?: string;
  readonly hosts: readonly HostAnnouncement[];
  /** what makes a host give the VIP up while passlb lb runs */
  readonly withdrawsWhen: readonly string[];
}

const WITHDRAW_COMMON = [
  "no_healthy_backend: every member node fails its health check on that host",
  "not_programmed: the host's data plane does not hold the current plan (a failed or pending sync, or the Service kept at its last good state)",
  "stopping: passlb lb stops (graceful: the VIP is handed over or withdrawn first)",
];
const WITHDRAW = {
  l2: [
    ...WITHDRAW_COMMON.map((w) => `${w}; its priority drops by 200 and the next ready host takes it`),
    "the holder dies: the next host takes it after 3 VRRP adverts plus skew (about 0.3 s at --advert-ms 100)",
  ],
  bgp: [
    ...WITHDRAW_COMMON.map((w) => `${w}; its route is withdrawn`),
    "the host dies or its session goes down: BFD (100 ms × 3 by default) or the hold time ends the session and the routers drop its path",
  ],
} as const;

export function announcePlan(input: AnnouncePlanInput): VipAnnouncePlan[] {
  const byVip = new Map<string, { family: IpFamily; services: string[]; members: number }>();
  for (const p of input.plans)
    for (const v of p.vips) {
      const e = byVip.get(v.address) ?? { family: v.family, services: [], members: 0 };
      e.services.push(p.service);
      e.members = Math.max(e.members, p.members.length);
      byVip.set(v.address, e);
    }
  const vips = [...byVip].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (input.mode === "l2") return l2Plan(input, vips);
  return vips.map(([vip, e]) => ({
    vip,
    family: e.family,
    services: e.services,
    hosts: input.hosts.map((h) => bgpHost(h, e.family, e.members, input.bgpPeers ?? [])),
    withdrawsWhen: WITHDRAW.bgp,
  }));
}

function bgpHost(
  h: LbHost,
  family: IpFamily,
  members: number,
  objects: readonly LoadBalancerBGPPeer[],
): HostAnnouncement {
  const none = (reason: string): HostAnnouncement => ({ host: h.name, role: "none", reason });
  if (members === 0) return none("no_healthy_backend: the plan has no member node");
  if (objects.length === 0)
    return {
      host: h.name,
      role: "announces",
      reason: `${members} member node(s); to its --bgp-peer routers of ${family}`,
    };
  const mine = objects.filter((p) => peerSelectsHost(p, h.labels));
  if (mine.length === 0) return none("no LoadBalancerBGPPeer selects this host");
  const same = mine.filter((p) => p.spec.peerAddress.includes(":") === (family === "IPv6"));
  if (same.length === 0)
    return none(
      `no ${family} session: its LoadBalancerBGPPeers (${mine.map((p) => p.metadata.name).join(", ")}) are at ${family === "IPv4" ? "IPv6" : "IPv4"} addresses`,
    );
  return {
    host: h.name,
    role: "announces",
    reason: `${members} member node(s); to ${same.map((p) => `${p.metadata.name} (${p.spec.peerAddress})`).join(", ")}`,
  };
}

function l2Plan(
  input: AnnouncePlanInput,
  vips: readonly (readonly [string, { family: IpFamily; services: string[]; members: number }])[],
): VipAnnouncePlan[] {
  const peers: PeerAddresses = new Map(input.hosts.map((h) => [h.name, h.addresses]));
  const out: VipAnnouncePlan[] = [];
  for (const [vip, e] of vips) {
    const base = { vip, family: e.family, services: e.services, withdrawsWhen: WITHDRAW.l2 };
    const self = input.hosts.find((h) => h.addresses[e.family] !== undefined);
    const outside = input.hosts
      .filter((h) => h.addresses[e.family] === undefined)
      .map(
        (h): HostAnnouncement => ({
          host: h.name,
          role: "none",
          reason: `no ${e.family} address on the segment`,
        }),
      );
    if (!self) {
      out.push({ ...base, hosts: outside });
      continue;
    }
    // the instance every host renders for this VIP (the same on each: keepalived-config.ts)
    const { instances } = keepalivedInstances({
      self: self.name,
      interface: "plan",
      peers,
      vips: [...byVipFamily(vips, e.family)].map((v) => ({ vip: v, ready: true })),
      advertMs: 100,
      fifo: "",
      trackDir: "",
    });
    const instance = instances.find((i) => i.vips.includes(vip));
    if (!instance) {
      out.push({ ...base, hosts: outside });
      continue;
    }
    const ready = e.members > 0;
    const hosts = instance.order.map((h, place): HostAnnouncement => {
      const priority = BASE_PRIORITY - PRIORITY_STEP * place;
      if (!ready)
        return {
          host: h,
          role: place === 0 ? "holds" : "backup",
          priority: priority - 200,
          reason:
            "no_healthy_backend on every host: all at −200, the order stays and the first still answers",
        };
      return place === 0
        ? { host: h, role: "holds", priority, reason: "first in the VIP's rendezvous order (vip-owners.ts)" }
        : {
            host: h,
            role: "backup",
            priority,
            reason: `takes over when the ${place} host(s) before it cannot serve`,
          };
    });
    out.push({ ...base, group: instance.name, hosts: [...hosts, ...outside] });
  }
  return out;
}

function byVipFamily(vips: readonly (readonly [string, { family: IpFamily }])[], family: IpFamily): string[] {
  return vips.filter(([, e]) => e.family === family).map(([v]) => v);
}
