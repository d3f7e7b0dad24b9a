/**
 * What the BGP announcer does about a set of VIPs (docs/vip-announce.md "BGP"). Pure.
 *
 * - A VIP's route is in the kernel table exactly while this host can serve it (issue #19
 *   §1 "Announce only what this host can serve": the data plane is programmed with the
 *   current plan and at least one listener has a healthy backend: ../announcer.ts
 *   `vipReadiness`, the caller's). Routes for VIPs no longer planned at all (a previous process's) go too.
 * - A VIP counts as *announced* when its route is in the table and a BGP session of its
 *   address family is established; otherwise it is withdrawn, with the reason.
 * No election: every LB host that can serve a VIP announces it, and the routers' ECMP
 * spreads flows over them (docs/maglev.md: identical Maglev tables make any LB host
 * send a flow to the same node).
 */
import type { VipReadiness } from "../announcer.ts";
import type { IpFamily, SpeakerState, VipAnnouncement } from "./bgp-types.ts";

export function routeChanges(
  readiness: readonly VipReadiness[],
  present: readonly string[],
  /** the table's routes of a ready VIP: its host route and its aggregates (bgp-advertisements.ts routesFor) */
  routesFor: (vip: string) => readonly string[] = (vip) => [vip],
): { add: string[]; remove: string[] } {
  // an aggregate stays while any of its VIPs is ready, and goes with the last one
  const want = new Set(readiness.filter((s) => s.ready).flatMap((s) => routesFor(s.vip)));
  const have = new Set(present);
  return {
    add: [...want].filter((v) => !have.has(v)).sort(),
    remove: [...have].filter((v) => !want.has(v)).sort(),
  };
}

const familyOf = (address: string): IpFamily => (address.includes(":") ? "IPv6" : "IPv4");

export function announcementsOf(
  readiness: readonly VipReadiness[],
  present: ReadonlySet<string>,
  speaker: SpeakerState,
): VipAnnouncement[] {
  const up = (f: IpFamily) =>
    speaker.sessions.filter((s) => s.established && familyOf(s.peer) === f).map((s) => s.peer);
  return readiness.map((s): VipAnnouncement => {
    const base = { vip: s.vip, family: s.family };
    if (!s.ready) return { ...base, state: "withdrawn", reason: `not ready: ${s.detail}` };
    if (!present.has(s.vip))
      return { ...base, state: "withdrawn", reason: "ready; its route is not in the kernel table yet" };
    if (!speaker.running) return { ...base, state: "withdrawn", reason: "the BGP speaker is not running" };
    const peers = up(s.family);
    if (peers.length === 0)
      return { ...base, state: "withdrawn", reason: `no ${s.family} BGP session is established` };
    return { ...base, state: "announced", reason: `${s.detail}; to ${peers.join(", ")}` };
  });
}
