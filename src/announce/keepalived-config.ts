/**
 * keepalived's configuration for L2 announcement, from data (docs/vip-announce.md "The
 * keepalived engine"). Pure: the segment's LB hosts, this host, the VIPs and the timing in;
 * the VRRP instances, the text of keepalived.conf and the content of each instance's track
 * file out. Every LB host renders the same instances (names, VRIDs, members, priorities)
 * from the same peers and VIPs; only `unicast_src_ip`, the peer list and this host's own
 * priority differ.
 *
 * Rules:
 *   - one vrrp_instance per address family and owner order: VIPs whose rendezvous ranking
 *     (vip-owners.ts `vipRanking`) starts with the same hosts share an instance. The order is
 *     cut to its first k hosts, the largest k with n!/(n-k)! ≤ 255, because a segment has
 *     VRIDs 1..255 per family (RFC 5798 §5.2.3; keepalived.conf(5) `virtual_router_id`); the
 *     hosts after the cut follow in a fixed order per instance.
 *   - VRID = 1 + the rank of that k-host prefix among all of them (lexicographic over the
 *     sorted host names): the same on every host, and unchanged when VIPs come and go.
 *   - priority = 250 − 10 × (place in the order), so the first host is master and each next
 *     one takes over in turn, exactly as vipOwners moves VIPs; a host that cannot serve a VIP
 *     of the instance adds −200 through its track file (keepalived.conf(5) "Track files": the
 *     value read × weight 1 is added, the result clamped to 1..254), below every ready host.
 *   - VRRPv3 (RFC 5798) for both families, unicast to the other hosts (`unicast_peer`, no
 *     multicast), advert_int from `advertMs` (v3 has centisecond resolution); a dead master
 *     is detected after 3 × advert_int + skew (RFC 5798 §6.1).
 *   - preempt (keepalived's default): a host that comes back ready takes its instances again;
 *     all instances start in BACKUP, so a starting host never takes a VIP before it has
 *     listened for one master-down interval.
 *   - one address per instance in `virtual_ipaddress` (keepalived needs one, and it goes into
 *     every advertisement), the rest in `virtual_ipaddress_excluded`, so adverts stay small
 *     and hosts that briefly disagree about the VIP list do not disagree about the adverts.
 *
 * Does not read or write files and does not decide readiness (announcer.ts `vipReadiness`).
 */
import { score, vipRanking } from "./vip-owners.ts";

export type Family = "IPv4" | "IPv6";

export interface KeepalivedInput {
  readonly self: string;
  readonly interface: string;
  /** every LB host of the segment, this one included */
  readonly peers: ReadonlyMap<string, { readonly IPv4?: string; readonly IPv6?: string }>;
  /** VIP → whether this host can serve it now */
  readonly vips: readonly { readonly vip: string; readonly ready: boolean }[];
  readonly advertMs: number;
  readonly fifo: string;
  /** the directory of the per-instance track files */
  readonly trackDir: string;
  /** the VRIDs passlb may use on this segment (`--vrid-range`; default 1..255) */
  readonly vridRange?: { readonly first: number; readonly last: number };
  /** the master's periodic gratuitous ARP / unsolicited NA (`--garp-refresh-s`, 0: off) and
   * how many each time (`--garp-refresh-repeat`): keepalived.conf(5) global_defs
   * `vrrp_garp_master_refresh`, `vrrp_garp_master_refresh_repeat` */
  readonly garpRefresh?: { readonly seconds: number; readonly repeat: number };
}

export interface KeepalivedInstance {
  readonly name: string;
  readonly family: Family;
  readonly vrid: number;
  /** hosts in priority order (first: the master while it is ready) */
  readonly order: readonly string[];
  /** this host's configured priority */
  readonly priority: number;
  readonly vips: readonly string[];
  readonly trackFile: string;
  /** what the track file holds: 0, or −200 when this host cannot serve some VIP of it */
  readonly trackValue: number;
}

export interface KeepalivedIssue {
  readonly code: "no_address_for_family" | "too_many_hosts" | "self_not_a_peer" | "vrid_range_too_small";
  readonly message: string;
}

export interface KeepalivedRender {
  readonly instances: readonly KeepalivedInstance[];
  readonly config: string;
  /** path → content ("0\n" or "-200\n") */
  readonly trackFiles: ReadonlyMap<string, string>;
  readonly issues: readonly KeepalivedIssue[];
}

export const BASE_PRIORITY = 250;
export const PRIORITY_STEP = 10;
export const NOT_READY_PENALTY = -200;
/** 250 − 10 × 19 = 60 > 50 = 250 − 200: a ready host always outranks one that is not */
export const MAX_HOSTS = 20;
const MAX_VRIDS = 255;

/** The largest k with n!/(n−k)! ≤ `vrids` (255: the whole VRID space): how many leading
 * hosts of an order make an instance. */
export function prefixLength(n: number, vrids = MAX_VRIDS): number {
  let k = 0;
  let count = 1;
  while (k < n && count * (n - k) <= vrids) {
    count *= n - k;
    k++;
  }
  return Math.max(k, 1);
}

/** `first` + the lexicographic rank of `prefix` among all k-permutations of `hosts` (sorted). */
export function vridOf(hosts: readonly string[], prefix: readonly string[], first = 1): number {
  const remaining = [...hosts];
  let rank = 0;
  for (let i = 0; i < prefix.length; i++) {
    const at = remaining.indexOf(prefix[i]!);
    let below = 1; // permutations of the remaining positions
    for (let j = 0; j < prefix.length - i - 1; j++) below *= remaining.length - 1 - j;
    rank += at * below;
    remaining.splice(at, 1);
  }
  return rank + first;
}

export function keepalivedInstances(input: KeepalivedInput): {
  instances: KeepalivedInstance[];
  issues: KeepalivedIssue[];
} {
  const issues: KeepalivedIssue[] = [];
  if (!input.peers.has(input.self))
    return {
      instances: [],
      issues: [{ code: "self_not_a_peer", message: `this host (${input.self}) is not among the LB hosts` }],
    };
  const instances: KeepalivedInstance[] = [];
  for (const family of ["IPv4", "IPv6"] as const) {
    const vips = input.vips.filter((v) => v.vip.includes(":") === (family === "IPv6"));
    if (vips.length === 0) continue;
    if (input.peers.get(input.self)?.[family] === undefined) {
      issues.push({
        code: "no_address_for_family",
        message: `${family} VIPs ${vips.map((v) => v.vip).join(", ")}: this host (${input.self}) has no ${family} peer address; they are not announced`,
      });
      continue;
    }
    const hosts = [...input.peers]
      .filter(([, a]) => a[family] !== undefined)
      .map(([h]) => h)
      .sort();
    for (const [h] of input.peers)
      if (!hosts.includes(h))
        issues.push({
          code: "no_address_for_family",
          message: `${h} has no ${family} peer address: it takes no part in the ${family} instances`,
        });
    if (hosts.length > MAX_HOSTS) {
      issues.push({
        code: "too_many_hosts",
        message: `${hosts.length} LB hosts on one segment; at most ${MAX_HOSTS} (priorities 250 − 10 × place must stay above a not-ready host's)`,
      });
      continue;
    }
    const range = input.vridRange ?? { first: 1, last: MAX_VRIDS };
    const size = range.last - range.first + 1;
    if (size < hosts.length) {
      issues.push({
        code: "vrid_range_too_small",
        message: `--vrid-range ${range.first}-${range.last} has ${size} VRIDs; ${hosts.length} LB hosts need at least ${hosts.length} (one instance per first host); the ${family} VIPs are not announced`,
      });
      continue;
    }
    const k = prefixLength(hosts.length, size);
    const groups = new Map<string, { prefix: string[]; vips: { vip: string; ready: boolean }[] }>();
    for (const v of vips) {
      const prefix = vipRanking(hosts, v.vip).slice(0, k);
      const key = prefix.join("\u0000");
      const g = groups.get(key) ?? { prefix, vips: [] };
      g.vips.push(v);
      groups.set(key, g);
    }
    for (const g of groups.values()) {
      const vrid = vridOf(hosts, g.prefix, range.first);
      const name = `passlb_${family === "IPv4" ? "v4" : "v6"}_${vrid}`;
      const rest = hosts
        .filter((h) => !g.prefix.includes(h))
        .sort((a, b) => score(b, name) - score(a, name) || (a < b ? -1 : 1));
      const order = [...g.prefix, ...rest];
      const sorted = g.vips.sort((a, b) => (a.vip < b.vip ? -1 : a.vip > b.vip ? 1 : 0));
      instances.push({
        name,
        family,
        vrid,
        order,
        priority: BASE_PRIORITY - PRIORITY_STEP * order.indexOf(input.self),
        vips: sorted.map((v) => v.vip),
        trackFile: `${input.trackDir}/${name}`,
        trackValue: sorted.every((v) => v.ready) ? 0 : NOT_READY_PENALTY,
      });
    }
  }
  instances.sort((a, b) => (a.family === b.family ? a.vrid - b.vrid : a.family === "IPv4" ? -1 : 1));
  return { instances, issues };
}

const quote = (s: string) => `"${s.replace(/["\\]/g, "\\$&")}"`;

/** keepalived.conf for these instances. */
export function renderKeepalivedConf(
  input: Pick<KeepalivedInput, "self" | "interface" | "peers" | "advertMs" | "fifo" | "garpRefresh">,
  instances: readonly KeepalivedInstance[],
): string {
  const advert = (input.advertMs / 1000).toFixed(2).replace(/0+$/, "").replace(/\.$/, "");
  const lines = [
    "# Written by passlb lb --announce l2 (docs/vip-announce.md); rewritten on every change.",
    "global_defs {",
    `  router_id ${input.self}`,
    "  vrrp_version 3",
    `  vrrp_notify_fifo ${quote(input.fifo)}`,
    // one gratuitous ARP / unsolicited NA burst on becoming master, a second one after 1 s,
    // and again when a lower-priority master is heard (a healed partition)
    "  vrrp_garp_master_repeat 3",
    "  vrrp_garp_master_delay 1",
    "  vrrp_garp_lower_prio_repeat 3",
    "  vrrp_higher_prio_send_advert true",
    // a switch or router that aged the VIP out of its table relearns it from the holder
    ...(input.garpRefresh && input.garpRefresh.seconds > 0
      ? [
          `  vrrp_garp_master_refresh ${input.garpRefresh.seconds}`,
          `  vrrp_garp_master_refresh_repeat ${input.garpRefresh.repeat}`,
        ]
      : []),
    // unicast adverts from anyone but our peers are dropped. Multicast ones never reach an
    // instance in unicast mode anyway (it joins no VRRP group: test/announce/
    // vrrp-hygiene.test.ts measured 0 transitions with and without this line); together, a
    // foreign speaker on one of our VRIDs cannot take a VIP away (vrrp-watch.ts reports it)
    "  vrrp_check_unicast_src",
    "}",
  ];
  for (const i of instances)
    lines.push(`track_file ${i.name} {`, `  file ${quote(i.trackFile)}`, "  weight 1", "}");
  for (const i of instances) {
    const self = input.peers.get(input.self)?.[i.family] ?? "";
    const others = i.order
      .filter((h) => h !== input.self)
      .sort()
      .map((h) => input.peers.get(h)?.[i.family] ?? "");
    const prefix = i.family === "IPv4" ? "32" : "128";
    const [anchor, ...excluded] = i.vips;
    const v6 = i.family === "IPv6" ? " preferred_lft forever" : "";
    lines.push(
      `vrrp_instance ${i.name} {`,
      `  # order ${i.order.join(" > ")}`,
      "  state BACKUP",
      `  interface ${input.interface}`,
      `  virtual_router_id ${i.vrid}`,
      `  priority ${i.priority}`,
      `  advert_int ${advert}`,
      `  unicast_src_ip ${self}`,
      // a lone host has no peer to send to (keepalived would fall back to multicast)
      ...(others.length > 0 ? ["  unicast_peer {", ...others.map((a) => `    ${a}`), "  }"] : []),
      "  track_file {",
      `    ${i.name}`,
      "  }",
      "  virtual_ipaddress {",
      `    ${anchor}/${prefix} dev ${input.interface}${v6}`,
      "  }",
    );
    if (excluded.length > 0)
      lines.push(
        "  virtual_ipaddress_excluded {",
        ...excluded.map((v) => `    ${v}/${prefix} dev ${input.interface}`),
        "  }",
      );
    lines.push("}");
  }
  return `${lines.join("\n")}\n`;
}

export function renderKeepalived(input: KeepalivedInput): KeepalivedRender {
  const { instances, issues } = keepalivedInstances(input);
  return {
    instances,
    issues,
    config: renderKeepalivedConf(input, instances),
    trackFiles: new Map(instances.map((i) => [i.trackFile, `${i.trackValue}\n`])),
  };
}
