/**
 * The L2 announcement checked from the wire, against the real kernel and real keepalived
 * (docs/vip-announce.md "Checked from the wire", "Gratuitous ARP refresh"). Topology
 * `wirel2`: a bridge namespace (the segment), two LB hosts (lb-a 192.0.2.2, lb-b
 * 192.0.2.3, fd00:192::2/3) running keepalived through the driver with `--garp-refresh-s
 * 2`, a second device (`rogue`, 192.0.2.9) and a switch-like neighbour (`nbr`, 192.0.2.50:
 * it learns from gratuitous ARP / unsolicited NA, as a router's ARP table or a switch's
 * does). Cases:
 *   - steady: both hosts' checkers (arping / ndisc6 from their own segment address) see one
 *     answer per VIP, the holder's MAC, named by host — the holder counting its own kernel;
 *   - a second device answers for a held VIP → `duplicate_answer` on both hosts within one
 *     check period; an address only a foreign device answers → `foreign_mac`; nobody →
 *     `no_answer`; the device gone → agreement again;
 *   - a failover: the checker runs right after the state change and names the new holder;
 *   - the neighbour's table flushed → it relearns the VIPs (IPv4 and IPv6) from the
 *     holder's periodic gratuitous ARP / NA within the refresh period, nothing sent by it;
 *   - NDP unreachability detection (metallb#2920): the neighbour's entry for the IPv6 VIP
 *     goes STALE → DELAY → PROBE again and again (base_reachable_time 1 s) and every probe
 *     is answered (REACHABLE again, never FAILED), with every connection attempt answered throughout.
 * Root, ip, keepalived, arping, ndisc6, curl needed; skipped with the reason otherwise. Every
 * namespace and process is removed in t.after; every loop is bounded.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { AnnounceInput } from "../../src/announce/announcer.ts";
import { vipReady } from "../../src/announce/fake-announcer.ts";
import { kernelVipAddresses } from "../../src/announce/vip-addresses.ts";
import { vipOwners } from "../../src/announce/vip-owners.ts";
import { WireChecker, type WireTarget } from "../../src/announce/wire-checker.ts";
import type { WireVipCheck } from "../../src/announce/wire-verdict.ts";
import { KeepalivedDriver } from "../../src/drivers/keepalived-driver.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../netns.ts";

const tool = (cmd: string, flag: string) =>
  spawnSync(cmd, [flag]).error ? `${cmd} is not installed` : undefined;
const why =
  kernelSkipReason() ??
  tool("keepalived", "--version") ??
  tool("arping", "-V") ??
  tool("tcpdump", "--version") ??
  (spawnSync("ndisc6", ["-V"]).error ? "ndisc6 is not installed (Debian package ndisc6)" : undefined);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ip = (...args: string[]) => {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
};
const HOSTS = ["lb-a", "lb-b"] as const;
type Host = (typeof HOSTS)[number];
const PEERS = new Map([
  ["lb-a", { IPv4: "192.0.2.2", IPv6: "fd00:192::2" }],
  ["lb-b", { IPv4: "192.0.2.3", IPv6: "fd00:192::3" }],
]);
const VIPS = ["203.0.113.1", "203.0.113.2", "fd00:10::1"];
const PERIOD_MS = 3000;
const REFRESH_S = 2;
const input = (notReady: readonly string[] = []): AnnounceInput => ({
  vips: VIPS.map((vip) => vipReady(vip, notReady.includes(vip) ? "no_healthy_backend" : "ok")),
  generation: 1,
});

test("L2 from the wire: duplicate, foreign and missing answers detected; GARP/NA refresh relearnt; NDP probes answered", {
  timeout: 180_000,
}, async (t) => {
  if (why) return t.skip(why);
  const ns = {
    br: createNetns("wirel2"),
    "lb-a": createNetns("wirel2"),
    "lb-b": createNetns("wirel2"),
    rogue: createNetns("wirel2"),
    nbr: createNetns("wirel2"),
  };
  const dir = mkdtempSync(join(tmpdir(), "plbwire-l2-"));
  const drivers = new Map<Host, KeepalivedDriver>();
  const checkers = new Map<Host, WireChecker>();
  t.after(async () => {
    for (const c of checkers.values()) await c.stop();
    for (const d of drivers.values()) await d.stop({ graceful: false }).catch(() => {});
    for (const n of Object.values(ns)) {
      for (const pid of ip("netns", "pids", n).split("\n").filter(Boolean)) spawnSync("kill", ["-9", pid]);
      deleteNetns(n);
    }
    rmSync(dir, { recursive: true, force: true });
  });
  ip("-n", ns.br, "link", "add", "br0", "type", "bridge");
  ip("-n", ns.br, "link", "set", "br0", "up");
  const attach = (name: keyof typeof ns, v4: string, v6: string) => {
    ip("link", "add", "eth0", "netns", ns[name], "type", "veth", "peer", "name", `p-${name}`, "netns", ns.br);
    ip("-n", ns.br, "link", "set", `p-${name}`, "master", "br0", "up");
    ip("-n", ns[name], "link", "set", "lo", "up");
    ip("-n", ns[name], "link", "set", "eth0", "up");
    ip("-n", ns[name], "addr", "add", `${v4}/24`, "dev", "eth0");
    ip("-n", ns[name], "addr", "add", `${v6}/64`, "dev", "eth0", "nodad");
  };
  for (const h of HOSTS) attach(h, PEERS.get(h)!.IPv4, PEERS.get(h)!.IPv6);
  attach("rogue", "192.0.2.9", "fd00:192::9");
  attach("nbr", "192.0.2.50", "fd00:192::50");
  // the neighbour reaches the VIPs through the segment (as a client's router would)
  ip("-n", ns.nbr, "route", "add", "203.0.113.0/24", "dev", "eth0");
  ip("-n", ns.nbr, "-6", "route", "add", "fd00:10::/64", "dev", "eth0");
  const sysctl = (n: string, kv: string) => {
    const r = spawnSync("ip", ["netns", "exec", n, "sysctl", "-qw", kv], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`sysctl ${kv}: ${r.stderr}`);
  };
  // a router on the segment that learns from gratuitous ARP (Documentation/networking/
  // ip-sysctl.rst `arp_accept`) and from unsolicited NA (`accept_untracked_na`, Linux 5.19+,
  // which creates entries on routers only: RFC 9131), as a switch-facing router's table does
  sysctl(ns.nbr, "net.ipv4.conf.eth0.arp_accept=1");
  sysctl(ns.nbr, "net.ipv6.conf.all.forwarding=1");
  sysctl(ns.nbr, "net.ipv6.conf.eth0.accept_untracked_na=1");
  const mac = (n: string) =>
    (JSON.parse(ip("-n", n, "-j", "link", "show", "dev", "eth0")) as { address: string }[])[0]!.address;
  const macs = { "lb-a": mac(ns["lb-a"]), "lb-b": mac(ns["lb-b"]), rogue: mac(ns.rogue) };

  const extra: WireTarget[] = [
    { vip: "203.0.113.9", family: "IPv4" }, // only the rogue device will answer
    { vip: "203.0.113.8", family: "IPv4" }, // nobody answers
  ];
  const changes: { host: Host; at: number; check: WireVipCheck }[] = [];
  for (const h of HOSTS) {
    const d = new KeepalivedDriver({
      self: h,
      interface: "eth0",
      peers: PEERS,
      stateDir: join(dir, h),
      advertMs: 100,
      handoverMs: 1500,
      command: ["ip", "netns", "exec", ns[h], "keepalived"],
      addresses: kernelVipAddresses({ interface: "eth0", netns: ns[h] }),
      garpRefresh: { seconds: REFRESH_S, repeat: 1 },
      // after every failover: check again soon (as passlb lb does, lb-wire.ts)
      onEvent: (e) => {
        if (e.kind === "state") checkers.get(h)?.checkSoon(300);
      },
    });
    drivers.set(h, d);
    const addresses = kernelVipAddresses({ interface: "eth0", netns: ns[h] });
    checkers.set(
      h,
      new WireChecker({
        self: h,
        interface: "eth0",
        peers: () => PEERS,
        targets: () => [
          ...d.status().vips.map((v) => ({
            vip: v.vip,
            family: v.vip.includes(":") ? ("IPv6" as const) : ("IPv4" as const),
            ...(v.preferredHolder !== undefined && { preferred: v.preferredHolder }),
          })),
          ...extra,
        ],
        onInterface: () => addresses.onInterface(),
        periodMs: PERIOD_MS,
        prefix: ["ip", "netns", "exec", ns[h]],
        onChange: (check) => changes.push({ host: h, at: Date.now(), check }),
      }),
    );
  }
  await Promise.all([...drivers.values()].map((d) => d.start(input())));
  const owners = vipOwners(HOSTS, VIPS);
  const holders = (vip: string) =>
    HOSTS.filter((h) =>
      (
        JSON.parse(ip("-n", ns[h], "-j", "addr", "show", "dev", "eth0")) as {
          addr_info: { local: string }[];
        }[]
      )
        .flatMap((r) => r.addr_info)
        .some((a) => a.local === vip),
    );
  const waitFor = async (what: string | (() => string), ok: () => boolean, ms: number) => {
    const deadline = Date.now() + ms;
    while (!ok()) {
      if (Date.now() > deadline)
        throw new Error(`${typeof what === "string" ? what : what()} not within ${ms} ms`);
      await sleep(50);
    }
  };
  await waitFor(
    "VIPs held as elected",
    () => VIPS.every((v) => JSON.stringify(holders(v)) === JSON.stringify([owners.get(v)])),
    10_000,
  );
  for (const c of checkers.values()) c.start();
  const report = (h: Host, vip: string) =>
    checkers
      .get(h)!
      .report()
      .vips.find((c) => c.vip === vip);
  const agreed = () =>
    HOSTS.every((h) =>
      VIPS.every((v) => report(h, v)?.problem === null && report(h, v)?.heldBy === owners.get(v)),
    );
  await waitFor("every VIP answered by its holder alone, seen from both hosts", agreed, PERIOD_MS + 5000);
  for (const h of HOSTS) {
    const v = report(h, VIPS[0]!)!;
    assert.deepEqual(v.answers, [{ mac: macs[owners.get(VIPS[0]!)! as Host], host: owners.get(VIPS[0]!) }]);
    await waitFor("no_answer for 203.0.113.8", () => report(h, "203.0.113.8")?.problem === "no_answer", 3000);
    assert.deepEqual(checkers.get(h)!.report().errors, []);
  }
  t.diagnostic(`steady: ${report("lb-a", VIPS[0]!)?.message}`);

  // a second device takes a held VIP and another address: detected within one period
  const vip = VIPS[0]!;
  const added = Date.now();
  ip("-n", ns.rogue, "addr", "add", `${vip}/32`, "dev", "eth0");
  ip("-n", ns.rogue, "addr", "add", "203.0.113.9/32", "dev", "eth0");
  const seen = (h: Host, v: string, problem: string | null) =>
    changes.find((c) => c.host === h && c.check.vip === v && c.check.problem === problem && c.at >= added);
  await waitFor(
    "duplicate_answer on both hosts",
    () => HOSTS.every((h) => seen(h, vip, "duplicate_answer")),
    PERIOD_MS + 5000,
  );
  for (const h of HOSTS) {
    const c = seen(h, vip, "duplicate_answer")!;
    const ms = c.at - added;
    t.diagnostic(`${h}: duplicate_answer after ${ms} ms (period ${PERIOD_MS} ms): ${c.check.message}`);
    // the next round (at most one period), its confirming round 1 s later, each listening
    // about 1 s (wire-checker.ts `#confirm`), and a margin for the loaded machine
    assert.ok(ms <= PERIOD_MS + 1000 + 2 * 1000 + 1000, `${h} took ${ms} ms`);
    assert.ok(c.check.answers.some((a) => a.mac === macs.rogue && a.host === undefined));
    assert.ok(c.check.answers.some((a) => a.host === owners.get(vip)));
  }
  await waitFor(
    "foreign_mac for 203.0.113.9",
    () => HOSTS.every((h) => report(h, "203.0.113.9")?.problem === "foreign_mac"),
    PERIOD_MS + 5000,
  );
  assert.match(
    report("lb-a", "203.0.113.9")!.message,
    new RegExp(`answered by ${macs.rogue}, which is no LB host's`),
  );
  // gone: agreement again
  ip("-n", ns.rogue, "addr", "del", `${vip}/32`, "dev", "eth0");
  await waitFor(
    "agreement after the device left",
    () => HOSTS.every((h) => report(h, vip)?.problem === null),
    PERIOD_MS + 5000,
  );

  // failover: the holder of VIPS[0] cannot serve it; the check right after the transition names the peer
  const from = owners.get(vip)! as Host;
  const to = HOSTS.find((h) => h !== from)!;
  const moved = Date.now();
  await drivers.get(from)!.update(input([vip]));
  await waitFor(`${vip} moved to ${to}`, () => JSON.stringify(holders(vip)) === JSON.stringify([to]), 5000);
  await waitFor(
    "the checkers name the new holder",
    () =>
      HOSTS.every((h) => report(h, vip)?.heldBy === to && (checkers.get(h)!.report().checkedAt ?? 0) > moved),
    PERIOD_MS + 5000,
  );
  t.diagnostic(`failover: ${report(from, vip)?.message}; seen ${Date.now() - moved} ms after the move`);
  await drivers.get(from)!.update(input());
  await waitFor(
    `${vip} back on ${from}`,
    () => JSON.stringify(holders(vip)) === JSON.stringify([from]),
    5000,
  );

  // the neighbour forgets the VIPs; the holders' periodic GARP / NA teach it again
  const neighbour = (v: string) =>
    (
      JSON.parse(
        ip("-n", ns.nbr, "-j", v.includes(":") ? "-6" : "-4", "neigh", "show", "dev", "eth0", v),
      ) as {
        lladdr?: string;
        state?: string[];
      }[]
    )[0];
  for (let round = 1; round <= 2; round++) {
    ip("-n", ns.nbr, "neigh", "flush", "dev", "eth0");
    ip("-n", ns.nbr, "-6", "neigh", "flush", "dev", "eth0");
    const flushed = Date.now();
    assert.equal(neighbour(vip), undefined);
    const learnt = new Map<string, number>();
    await waitFor(
      () =>
        `the neighbour relearnt every VIP (learnt ${JSON.stringify([...learnt])}; table ${ip("-n", ns.nbr, "neigh", "show", "dev", "eth0").replace(/\n/g, "; ")})`,
      () => {
        for (const v of VIPS)
          if (!learnt.has(v) && neighbour(v)?.lladdr === macs[owners.get(v)! as Host])
            learnt.set(v, Date.now() - flushed);
        return learnt.size === VIPS.length;
      },
      REFRESH_S * 1000 + 1500,
    );
    t.diagnostic(
      `relearnt after flush ${round}: ${[...learnt].map(([v, ms]) => `${v} ${ms} ms`).join(", ")} (refresh ${REFRESH_S} s)`,
    );
  }

  // NDP: the neighbour's entry for the IPv6 VIP ages to STALE, traffic makes it DELAY then
  // PROBE (unicast NS), and each probe must be answered
  sysctl(ns.nbr, "net.ipv6.neigh.eth0.base_reachable_time_ms=1000");
  sysctl(ns.nbr, "net.ipv6.neigh.eth0.delay_first_probe_time=1");
  const v6 = "fd00:10::1";
  // traffic to the VIP: a TCP connection attempt (curl; no listener, so the holder's kernel
  // answers with a reset: "Connection refused", exit 7; a timeout, exit 28, is no answer)
  const pings: string[] = [];
  const ping = () => {
    const r = spawnSync("ip", ["netns", "exec", ns.nbr, "curl", "-sS", "-m", "1", `http://[${v6}]:81/`], {
      encoding: "utf8",
    });
    if (r.status !== 7) pings.push(`exit ${r.status}: ${r.stderr.trim()}`);
    return r.status === 7 ? 0 : 1;
  };
  assert.equal(ping(), 0, `connect to ${v6} from the neighbour: ${pings.join("; ")}`);
  let captured = "";
  const capture = spawn(
    "ip",
    [
      "netns",
      "exec",
      ns.nbr,
      "tcpdump",
      "-l",
      "-n",
      "-i",
      "eth0",
      "icmp6 and (ip6[40] == 135 or ip6[40] == 136)",
    ],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  capture.stdout.on("data", (b: Buffer) => {
    captured += b.toString();
  });
  await sleep(500);
  const states: string[] = [];
  let failedPings = 0;
  const until = Date.now() + 12_000;
  let nextPing = 0;
  while (Date.now() < until) {
    if (Date.now() >= nextPing) {
      if (ping() !== 0) failedPings++;
      nextPing = Date.now() + 1500;
    }
    const s = neighbour(v6)?.state?.[0] ?? "NONE";
    if (states[states.length - 1] !== s) states.push(s);
    await sleep(20);
  }
  capture.kill("SIGTERM");
  await new Promise((r) => capture.once("close", r));
  // the kernel's probe of a DELAY entry is a unicast NS to the VIP; its answer a solicited NA
  // (PROBE lasts well under the 20 ms sampling on a veth, so the states show DELAY → REACHABLE)
  const probes = captured.split("\n").filter((l) => l.includes(`> ${v6}: ICMP6, neighbor solicitation`));
  const answers = captured
    .split("\n")
    .filter((l) => new RegExp(`IP6 ${v6} > (?!ff02:)\\S+: ICMP6, neighbor advertisement`).test(l));
  const cycles = states.filter(
    (s, i) => s === "DELAY" && ["PROBE", "REACHABLE"].includes(states[i + 1] ?? ""),
  ).length;
  t.diagnostic(
    `NDP: ${probes.length} unicast probes of ${v6}, ${answers.length} solicited answers, ${cycles} DELAY → REACHABLE cycles`,
  );
  assert.ok(
    cycles >= 2,
    `the entry went back to REACHABLE after DELAY at least twice: ${states.join(" → ")}`,
  );
  assert.ok(probes.length >= 2, `unicast probes sent:\n${captured}`);
  assert.ok(answers.length >= probes.length, `every probe answered:\n${captured}`);
  assert.ok(!states.includes("FAILED") && !states.includes("INCOMPLETE"), states.join(" → "));
  assert.equal(failedPings, 0, pings.join("; "));
});
