/**
 * How the LB host reaches each node address, for the XDP program's `nodes` entries: the
 * egress device, its MAC and MTU, and the node's MAC — what the kernel forwarder would use
 * for a packet policy-routed `via` the node (docs/dataplane-nftables.md step 5). When the
 * route's device is a bridge, the frame goes straight to the bridge port that learned the
 * node's MAC (`bridge fdb`), since a bridge cannot take redirected frames (it has no
 * ndo_xdp_xmit: Documentation/bpf/redirect.rst).
 *
 * XDP forwards a node only when it is on-link (no gateway), not routed by `--forward encap`,
 * and its neighbour entry is usable (REACHABLE, STALE, DELAY, PROBE, PERMANENT, NOARP);
 * otherwise the packet goes to the stack, which resolves ARP/NDP or encapsulates — as
 * samples/bpf/xdp_fwd_kern.c passes on BPF_FIB_LKUP_RET_NO_NEIGH. The drift check resolves
 * again every interval, so a node whose neighbour appears moves to XDP within one.
 *
 * `nextHopsFrom` is pure (parses `ip -j` / `bridge -j` output); `createNextHopResolver` runs
 * the four commands (one `ip -batch` for all routes).
 */
import { spawn } from "node:child_process";
import { canonicalIp } from "../../net/ip.ts";
import type { NextHop } from "./xdp-maps.ts";

interface RouteJson {
  dst?: string;
  dev?: string;
  gateway?: string;
}
interface NeighJson {
  dst?: string;
  dev?: string;
  lladdr?: string;
  state?: string[];
}
interface LinkJson {
  ifindex: number;
  ifname: string;
  mtu: number;
  address?: string;
  master?: string;
  linkinfo?: { info_kind?: string };
}
interface FdbJson {
  mac: string;
  ifname?: string;
  master?: string;
  flags?: string[];
}

export interface NextHopFacts {
  readonly routes: readonly RouteJson[];
  readonly neighbours: readonly NeighJson[];
  readonly links: readonly LinkJson[];
  readonly fdb: readonly FdbJson[];
}

const USABLE = new Set(["REACHABLE", "STALE", "DELAY", "PROBE", "PERMANENT", "NOARP"]);

export function nextHopsFrom(
  addresses: readonly string[],
  facts: NextHopFacts,
  routed: (address: string) => boolean,
): Map<string, NextHop> {
  const out = new Map<string, NextHop>();
  const link = new Map(facts.links.map((l) => [l.ifname, l]));
  for (const text of addresses) {
    const address = canonicalIp(text) ?? text;
    const none = { xdp: false, ifindex: 0, mtu: 0, dmac: "00:00:00:00:00:00", smac: "00:00:00:00:00:00" };
    const route = facts.routes.find((r) => r.dst !== undefined && canonicalIp(r.dst) === address);
    const dev = route?.dev === undefined ? undefined : link.get(route.dev);
    const neigh = facts.neighbours.find(
      (n) => n.dst !== undefined && canonicalIp(n.dst) === address && n.dev === route?.dev,
    );
    if (routed(address) || !route || route.gateway || !dev?.address || !neigh?.lladdr) {
      out.set(address, none);
      continue;
    }
    if (!(neigh.state ?? []).some((s) => USABLE.has(s))) {
      out.set(address, none);
      continue;
    }
    let egress = dev;
    if (dev.linkinfo?.info_kind === "bridge") {
      const port = facts.fdb.find(
        (f) => f.mac === neigh.lladdr && f.master === dev.ifname && !(f.flags ?? []).includes("self"),
      );
      const l = port?.ifname === undefined ? undefined : link.get(port.ifname);
      if (!l) {
        out.set(address, none);
        continue;
      }
      egress = l;
    }
    out.set(address, {
      xdp: true,
      ifindex: egress.ifindex,
      mtu: Math.min(dev.mtu, egress.mtu),
      dmac: neigh.lladdr,
      smac: dev.address,
    });
  }
  return out;
}

export interface NextHopResolver {
  resolve(addresses: readonly string[]): Promise<Map<string, NextHop>>;
}

function run(cmd: string, args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    child.stdout?.on("data", (b: Buffer) => out.push(b));
    child.stderr?.resume();
    child.on("error", reject);
    child.on("close", () => resolve(Buffer.concat(out).toString("utf8")));
    // a command that exits before reading everything must not take the process down (EPIPE)
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input);
  });
}

const lines = <T>(text: string): T[] =>
  text
    .split("\n")
    .filter((l) => l.trim().startsWith("["))
    .flatMap((l) => JSON.parse(l) as T[]);

export function createNextHopResolver(options: { routed: (address: string) => boolean }): NextHopResolver {
  return {
    async resolve(addresses) {
      if (addresses.length === 0) return new Map();
      const script = addresses.map((a) => `route get ${a}`).join("\n");
      const [routes, neighbours, links, fdb] = await Promise.all([
        run("ip", ["-j", "-force", "-batch", "-"], script).then((t) => lines<RouteJson>(t)),
        run("ip", ["-j", "neigh", "show"]).then((t) => lines<NeighJson>(t)),
        run("ip", ["-j", "-d", "link", "show"]).then((t) => lines<LinkJson>(t)),
        run("bridge", ["-j", "fdb", "show"]).then((t) => lines<FdbJson>(t)),
      ]);
      return nextHopsFrom(addresses, { routes, neighbours, links, fdb }, options.routed);
    },
  };
}
