/**
 * The tunnel check of routed nodes (`passlb lb --forward encap --encap-check`, issue 21):
 * the LB host's health prober opens one TCP connection per routed node address through
 * the same tunnel VIP traffic takes, so a node whose decapsulation does not work is taken
 * out like an unhealthy one instead of timing out clients. Pure: which rule and routes the
 * kernel must hold, the `ip -batch` lines that get it there from what it holds, and the
 * flag's port range. Nothing here runs a command (encap-check-routes.ts does).
 *
 * How a probe finds the tunnel, with the kernel's routing only (no mark, no userspace per
 * packet; Node has no SO_MARK):
 *   - the prober binds its tunnel probes to a local TCP port in a range of their own
 *     (`--encap-check-ports`, default 61000-61255: above Linux's default ephemeral range
 *     32768–60999, ip-sysctl.rst `ip_local_port_range`, so the kernel never hands these
 *     ports to another socket), and closes them with a reset (no TIME_WAIT, so a port is
 *     free again at once);
 *   - one rule per family, `pref 3090 iif lo ipproto tcp sport A-B lookup T`, matches only
 *     those probes: `iif lo` only locally generated packets (ip-rule(8): "iif lo" matches
 *     packets from this host; forwarded client traffic never matches), `ipproto tcp` and
 *     `sport` the probe itself (selectors of Linux ≥ 4.17, ip-rule(8) "ipproto", "sport");
 *   - table T (the unused index 0 of each family's mark range: 0x5a000000 / 0x5a800000,
 *     never a node's mark, node-marks.ts starts at 1) holds one host route per routed node
 *     address with the very route text its VIP routes use (encapRouteSpec: `encap ip id 0
 *     dst NODE dev plbvg0 mtu …`, or GUE's `via NODE dev plbgue4 onlink`) plus `src` — the
 *     address the host's main table picks toward the node, the one plain probes come from —
 *     and `unreachable default`, so a probe whose route is missing fails instead of passing
 *     outside the tunnel;
 *   - the outer packet is UDP (VXLAN-GPE, GUE) or IPIP/GRE, so it does not match `ipproto
 *     tcp` and is routed by `main` like any tunnel packet. This is the LB host's own pitfall
 *     (docs/dataplane-nftables.md "Routed networks": the outer packet keeps the inner's mark and is looked up
 *     again) turned around: the rule's selectors, not a mark, decide, and the outer packet
 *     fails them.
 * The node decapsulates; the inner destination is its own address, so its health server
 * (kube-proxy's, the agent's) answers the SYN directly, outside the tunnel. A completed
 * connect proves LB host → tunnel → decap → node. Which port is probed: health-side
 * (state-tunnel-targets.ts).
 *
 * Does not: choose the routed nodes (encap.ts nodePath), probe (probe-once.ts), decide
 * health (state-tunnel-targets.ts).
 */

import { type Fam, markFor } from "../nftables/render/nft-state.ts";
import { encapRouteSpec, type Forward, nodePath } from "./encap.ts";

/** Rule preference of the tunnel check: before passlb's fwmark rules (3100), after `local`. */
export const ENCAP_CHECK_PREF = 3090;

/** The check's routing table per family: index 0 of the family's mark range. */
export const ENCAP_CHECK_TABLE: Readonly<Record<Fam, number>> = { 4: markFor(4, 0), 6: markFor(6, 0) };

export interface PortRange {
  readonly first: number;
  readonly last: number;
}

export const DEFAULT_ENCAP_CHECK_PORTS: PortRange = { first: 61000, last: 61255 };

/** `--encap-check-ports A-B` → the range, or the problem. */
export function encapCheckPortsFromFlag(text: string | undefined): PortRange | string {
  if (text === undefined) return DEFAULT_ENCAP_CHECK_PORTS;
  const m = /^(\d{1,5})-(\d{1,5})$/.exec(text);
  const first = Number(m?.[1]);
  const last = Number(m?.[2]);
  if (!m || first < 1024 || last > 65535 || last < first)
    return `--encap-check-ports ${text}: expected FIRST-LAST within 1024-65535, such as 61000-61255`;
  if (last - first + 1 < 16) return `--encap-check-ports ${text}: give at least 16 ports`;
  return { first, last };
}

/** The rule of a family, as `ip rule add` arguments after `add` (also the batch line). */
export function encapCheckRule(family: Fam, ports: PortRange): string {
  return `pref ${ENCAP_CHECK_PREF} iif lo ipproto tcp sport ${ports.first}-${ports.last} lookup ${ENCAP_CHECK_TABLE[family]}`;
}

/** One routed node address the check goes to, and the source the main table picks for it. */
export interface CheckedAddress {
  readonly address: string;
  /** `ip route get ADDRESS`'s `prefsrc`; absent: the kernel picks */
  readonly src?: string;
}

export interface CheckRoute {
  readonly family: Fam;
  readonly dst: string;
  /** after the destination, as passed to `ip route replace DST …` (without `table`) */
  readonly spec: string;
}

/** The check table's routes: one per address that `forward` encapsulates, sorted. */
export function encapCheckRoutes(forward: Forward, addresses: readonly CheckedAddress[]): CheckRoute[] {
  if (forward.mode !== "encap") return [];
  const out: CheckRoute[] = [];
  for (const a of addresses) {
    if (nodePath(forward, a.address) !== "encap") continue;
    const family: Fam = a.address.includes(":") ? 6 : 4;
    const spec = encapRouteSpec(forward.encap, family, a.address);
    out.push({ family, dst: a.address, spec: a.src === undefined ? spec : `${spec} src ${a.src}` });
  }
  return out.sort((a, b) => a.family - b.family || (a.dst < b.dst ? -1 : a.dst > b.dst ? 1 : 0));
}

/** What the kernel holds of the check for one family (parseCheckRules / parseCheckRoutes). */
export interface CheckObserved {
  /** the rules at ENCAP_CHECK_PREF, each as `iif lo ipproto tcp sport A-B lookup T` */
  readonly rules: readonly string[];
  /** the check table's routes as `ip route show table T` prints them, one line each */
  readonly routes: readonly string[];
}

/**
 * The `ip -batch` lines (one family) from what the kernel holds to what is wanted: a rule
 * that differs is deleted and added again; a route is replaced when its printed line does
 * not carry the wanted destination, device and source, and deleted when no longer wanted.
 * Empty when nothing differs (the periodic re-check is then one read).
 */
export function encapCheckCommands(
  family: Fam,
  observed: CheckObserved,
  wanted: readonly CheckRoute[],
  ports: PortRange,
  enabled = true,
): string[] {
  const table = ENCAP_CHECK_TABLE[family];
  const rule = encapCheckRule(family, ports);
  const want = enabled ? wanted.filter((r) => r.family === family) : [];
  const out: string[] = [];
  const ruleWanted = enabled && want.length > 0;
  const ruleKey = `iif lo ipproto tcp sport ${ports.first}-${ports.last} lookup ${table}`;
  const keepRule = ruleWanted && observed.rules.length === 1 && observed.rules[0] === ruleKey;
  if (!keepRule) for (const _ of observed.rules) out.push(`rule del pref ${ENCAP_CHECK_PREF}`);
  const have = new Map<string, string>();
  for (const line of observed.routes) {
    const words = line.trim().split(/\s+/);
    const dst = words[0] === "unreachable" ? words[1] : words[0];
    if (dst) have.set(dst, line);
  }
  const wantDst = new Set(want.map((r) => r.dst));
  if (ruleWanted) wantDst.add("default");
  for (const [dst, line] of have)
    if (!wantDst.has(dst))
      out.push(
        `route del ${line.trim().startsWith("unreachable") ? "unreachable " : ""}${dst} table ${table}`,
      );
  for (const r of want) {
    const line = have.get(r.dst);
    if (line === undefined || !routeLineMatches(line, r.spec))
      out.push(`route replace ${r.dst} ${r.spec} table ${table}`);
  }
  // fail closed: a check probe to an address without its route (deleted, not yet added)
  // is refused here instead of falling through to `main` and passing outside the tunnel
  if (ruleWanted && !have.get("default")?.trim().startsWith("unreachable default"))
    out.push(`route replace unreachable default table ${table}`);
  if (ruleWanted && !keepRule) out.push(`rule add ${rule}`);
  return out;
}

/** A printed route carries the wanted device, next hop (GUE) or encap destination, and source. */
function routeLineMatches(line: string, spec: string): boolean {
  const words = line.trim().split(/\s+/);
  const wants = spec.split(/\s+/);
  for (const key of ["dev", "via", "src"]) {
    const i = wants.indexOf(key);
    if (i < 0) continue;
    const value = wants[i + 1];
    // `src` appears twice on an lwt route (the encap's own `src 0.0.0.0` first): any match
    const found = words.some((w, j) => w === key && words[j + 1] === value);
    if (!found) return false;
  }
  const d = wants.indexOf("dst");
  return d < 0 || words.some((w, j) => w === "dst" && words[j + 1] === wants[d + 1]);
}

/** `ip -j rule show` → the rules at ENCAP_CHECK_PREF as CheckObserved keys. */
export function parseCheckRules(json: string): string[] {
  const rows = JSON.parse(json === "" ? "[]" : json) as {
    priority?: number;
    iif?: string;
    ipproto?: string;
    sport?: string | number;
    sport_start?: number;
    sport_end?: number;
    table?: string;
  }[];
  return rows
    .filter((r) => r.priority === ENCAP_CHECK_PREF)
    .map((r) => {
      const sport =
        r.sport_start !== undefined
          ? `${r.sport_start}-${r.sport_end ?? r.sport_start}`
          : r.sport === undefined
            ? "?"
            : String(r.sport);
      return `iif ${r.iif ?? "any"} ipproto ${r.ipproto ?? "any"} sport ${sport} lookup ${Number(r.table) >>> 0}`;
    });
}
