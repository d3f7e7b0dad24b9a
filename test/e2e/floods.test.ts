/**
 * Floods and exhaustion in the lab (issue 16 §2), as root with real packets and the real
 * kernel's conntrack:
 *
 *   - a spoofed SYN flood to a VIP, long enough to fill a conntrack table: while it runs,
 *     12 long-lived connections keep flowing and ≥ 99 % of a legitimate client's new
 *     connections (one every 20 ms, 1 s timeout) succeed — overall, and among those made
 *     while the table was full. Where the flood's entries land (LB host, nodes, the host
 *     the test runs in) is measured with `conntrack -C` in each namespace and printed;
 *   - many short UDP flows (DNS-like: one request, one answer, from a new source port
 *     each) through a VIP: every one is answered, each flow has its conntrack entry on the
 *     LB host and on the node, no entry is given more than the configured UDP timeout
 *     (`net.netfilter.nf_conntrack_udp_timeout`, set to 5 s inside the lab namespaces), and
 *     all of them are gone 2 s after it ran out;
 *   - what a per-source meter adds: the same flood for 10 s against a table of the test's
 *     own on the LB host that drops a source's SYNs past 200/s: node-a1 gets at most what
 *     the meter lets through (8 sources × 200/s), the legitimate client (one source, 50/s)
 *     still ≥ 99 %.
 *
 * Why a lab can hold a flood without hurting the machine it runs on: the conntrack count
 * is per network namespace and `nf_conntrack_max` is compared with each namespace's own
 * count (`__nf_conntrack_alloc`: `ct_count = atomic_inc_return(&cnet->count)` with `cnet =
 * nf_ct_pernet(net)`, then `ct_count > nf_conntrack_max`, net/netfilter/nf_conntrack_core.c,
 * Linux v6.18), and early drop evicts only entries of the same namespace (`early_drop_list`:
 * `!net_eq(nf_ct_net(tmp), net)` skips the others). So a full table in a lab node drops
 * nothing of the host's or another lab's. The test never writes `nf_conntrack_max` (global;
 * read-only outside the initial namespace).
 *
 * The flood: hping3 (Debian package `hping3`) in client-a, `--flood`, one process per
 * spoofed source, each source a fixed address inside client-a's own zone, 192.0.2.40–47
 * (unused by any lab host; zone-a's documentation prefix, RFC 5737), each packet from the
 * next source port (hping3 increments it), so nearly every SYN is a new flow. No
 * `--rand-source`. Bounded in count by an nft quota in client-a's namespace (past 400,000
 * SYNs every spoofed packet is dropped before it leaves) and in time (stopped when
 * node-a1's table has been full for 5 s, at 60 s at the latest; SIGKILL, also when the
 * test fails). Aimed only at the zonal VIP's port. The SYN-ACKs go back towards addresses
 * nobody holds and die on the LB host's neighbour resolution, as a spoofed flood's do.
 * Without hping3 the flood case is skipped with the reason; the UDP case needs only the lab.
 *
 * The UDP case runs first: a table the flood left full (its entries wait 60 s in SYN_RECV)
 * would make the kernel early-drop the short UDP flows' entries as soon as they are made.
 *
 * The zonal Service (trafficDistribution PreferClose) sends zone-a's clients to node-a1
 * only, so the flood and the legitimate client share one node's table. The lab (unique
 * name `fld<pid>`) is removed when the test ends, pass or fail; it takes the flood's
 * processes and entries with it.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { type Lab, labUnavailable, sleep, startLab } from "./lab-harness.ts";

const TOPOLOGY = "test/fixtures/lab/e2e/topology.yaml";
const why = labUnavailable();
const noHping = spawnSync("hping3", ["--version"]).error
  ? "needs hping3 (Debian package hping3) for the spoofed SYN flood: not installed"
  : undefined;

const SPOOFED = Array.from({ length: 8 }, (_, i) => `192.0.2.${40 + i}`);
/** at most this many spoofed SYNs leave client-a (an nft quota there), each 40 bytes of IP */
const MAX_SYNS = 400_000;
const SYN_BYTES = 40;
/** the flood stops at this age, or when node-a1's table has been full for FULL_MS */
const FLOOD_MS = 60_000;
const FULL_MS = 5_000;
/** the per-source meter case: its flood's length and the meter's rate per source */
const METER_FLOOD_MS = 10_000;
const METER_RATE = 200;
const UDP_TIMEOUT_S = 5;
const UDP_FLOWS = 2000;

const LAB_HOSTS = ["lb", "node-a1", "node-a2", "node-b1"] as const;

/** the conntrack count of a lab host's namespace (`conntrack -C`: that namespace's own) */
const count = (lab: Lab, host: string) => Number(lab.exec(host, ["conntrack", "-C"]).trim());
const hostCount = () =>
  Number(readFileSync("/proc/sys/net/netfilter/nf_conntrack_count", "utf8").trim() || "0");

/** the sum of one field of `conntrack -S` (per CPU lines) in a lab host */
function stat(lab: Lab, host: string, field: string): number {
  let n = 0;
  for (const m of lab.exec(host, ["conntrack", "-S"]).matchAll(new RegExp(`\\b${field}=(\\d+)`, "g")))
    n += Number(m[1]);
  return n;
}

interface StreamEvent {
  readonly t: number;
  readonly ok: boolean;
  readonly node?: string;
  readonly error?: string;
}
interface Stream {
  readonly started: number;
  readonly events: readonly StreamEvent[];
}
interface Held {
  readonly connections: readonly { ok: boolean; error?: string; node?: string; pings: number }[];
}

/**
 * Runs the spoofed flood at `vip`:85 from client-a until `maxMs`, or until node-a1's table
 * has been full for `fullMs`; samples node-a1's count every 250 ms. The quota table in
 * client-a is made afresh each time (the count bound holds per flood).
 */
async function flood(
  lab: Lab,
  vip: string,
  st: { after: (fn: () => void) => void },
  max: number,
  maxMs: number,
  fullMs = Number.POSITIVE_INFINITY,
) {
  try {
    lab.exec("client-a", ["nft", "delete", "table", "ip", "plbflood"]);
  } catch {
    // not there yet
  }
  // the count bound, enforced by the kernel in the flooder's own namespace: past the
  // quota every spoofed packet is dropped before it leaves client-a
  lab.exec("client-a", [
    "nft",
    `add table ip plbflood { chain out { type filter hook output priority 0; ip saddr ${SPOOFED[0]}-${SPOOFED.at(-1)} counter quota over ${MAX_SYNS * SYN_BYTES} bytes drop; }; }`,
  ]);
  const floodAt = Date.now();
  const flooders: ChildProcess[] = SPOOFED.map((source) =>
    spawn(
      "ip",
      [
        "netns",
        "exec",
        lab.host("client-a").ns,
        "hping3",
        "-q",
        "--flood",
        "-S",
        "-p",
        "85",
        "-a",
        source,
        vip,
      ],
      { stdio: "ignore" },
    ),
  );
  const stop = () => {
    for (const f of flooders) if (f.exitCode === null && f.signalCode === null) f.kill("SIGKILL");
  };
  st.after(stop);
  const samples: { at: number; n: number }[] = [];
  let fullSince: number | undefined;
  while (Date.now() - floodAt < maxMs) {
    const n = count(lab, "node-a1");
    samples.push({ at: Date.now(), n });
    if (n >= max * 0.99) fullSince ??= Date.now();
    if (fullSince !== undefined && Date.now() - fullSince >= fullMs) break;
    await sleep(250);
  }
  stop();
  const floodEnd = Date.now();
  const sent = Number(
    /counter packets (\d+)/.exec(lab.exec("client-a", ["nft", "list", "table", "ip", "plbflood"]))?.[1] ?? 0,
  );
  return { floodAt, floodEnd, sent, samples };
}

test("floods: a spoofed SYN flood and many short UDP flows do not exhaust the data path", {
  timeout: 300_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "fld", lb: true });
  const max = Number(readFileSync("/proc/sys/net/netfilter/nf_conntrack_max", "utf8").trim());

  await t.test(
    `many short UDP flows: all answered, entries gone at the ${UDP_TIMEOUT_S} s UDP timeout`,
    async (st) => {
      const vip = await lab.vip("e2e/dns");
      for (const host of LAB_HOSTS)
        lab.exec(host, ["sysctl", "-q", "-w", `net.netfilter.nf_conntrack_udp_timeout=${UDP_TIMEOUT_S}`]);
      /** live UDP entries to the VIP (a dump skips, and evicts, expired ones) with their remaining timeouts */
      const entries = (host: string) =>
        lab
          .exec(host, ["conntrack", "-L", "-p", "udp", "--orig-dst", vip])
          .split("\n")
          .filter((l) => l.startsWith("udp"))
          .map((l) => Number(l.split(/\s+/)[2]));
      const burstStart = Date.now();
      const r = await lab.client("client-a", [
        "--proto",
        "udp",
        "--target",
        `${vip}:53`,
        "--count",
        String(UDP_FLOWS),
        "--concurrency",
        "16",
        "--timeout",
        "2000",
      ]);
      const burstEnd = Date.now();
      const right = Object.fromEntries(LAB_HOSTS.map((x) => [x, entries(x)]));
      const nodeEntries = ["node-a1", "node-a2", "node-b1"].reduce((n, x) => n + right[x]!.length, 0);
      const longest = Math.max(...Object.values(right).flat(), 0);
      const wait = burstEnd + (UDP_TIMEOUT_S + 2) * 1000 - Date.now();
      await sleep(Math.max(0, wait));
      const later = Object.fromEntries(LAB_HOSTS.map((x) => [x, entries(x).length]));
      st.diagnostic(
        `${r.ok} of ${UDP_FLOWS} UDP requests answered in ${burstEnd - burstStart} ms (${JSON.stringify(r.errors)}; by node ${JSON.stringify(r.byNode)}); live entries right after: ${LAB_HOSTS.map((x) => `${x} ${right[x]!.length}`).join(", ")}, longest remaining timeout ${longest} s; ${UDP_TIMEOUT_S + 2} s after the burst: ${JSON.stringify(later)}`,
      );
      assert.equal(r.ok, UDP_FLOWS, `UDP requests failed: ${JSON.stringify(r.errors)}`);
      assert.ok(
        right.lb!.length >= UDP_FLOWS * 0.9,
        `the LB host tracked ${right.lb!.length} of ${UDP_FLOWS} flows (each must have its entry)`,
      );
      assert.ok(nodeEntries >= UDP_FLOWS * 0.9, `the nodes tracked ${nodeEntries} of ${UDP_FLOWS} flows`);
      assert.ok(
        longest <= UDP_TIMEOUT_S,
        `an entry had ${longest} s left: more than the ${UDP_TIMEOUT_S} s timeout`,
      );
      assert.deepEqual(
        later,
        Object.fromEntries(LAB_HOSTS.map((x) => [x, 0])),
        `entries outlived the ${UDP_TIMEOUT_S} s UDP timeout by 2 s`,
      );
    },
  );

  await t.test(
    "spoofed SYN flood filling a node's table: established flow, ≥ 99 % of new ones succeed",
    {
      skip: noHping,
    },
    async (st) => {
      const vip = await lab.vip("e2e/zonal");
      const target = `${vip}:85`;
      // the VIP serves before the flood, and only through node-a1 from zone-a
      const pre = await lab.client("client-a", ["--target", target, "--count", "40", "--timeout", "1000"]);
      assert.equal(pre.failed, 0, `the VIP does not serve before the flood: ${JSON.stringify(pre.errors)}`);
      assert.deepEqual(Object.keys(pre.byNode), ["node-a1"], "zone-a's clients reach node-a1 only");
      const before = Object.fromEntries(LAB_HOSTS.map((h) => [h, count(lab, h)]));
      const hostBefore = hostCount();
      const lbLogFrom = readFileSync(lab.state.processes.find((p) => p.role === "lb")!.log, "utf8").length;

      const streamMs = FLOOD_MS + 6_000;
      const stream = lab.client("client-a", [
        "--mode",
        "stream",
        "--target",
        target,
        "--duration",
        String(streamMs),
        "--interval",
        "20",
        "--timeout",
        "1000",
      ]) as unknown as Promise<Stream>;
      const held = lab.client("client-a", [
        "--mode",
        "hold",
        "--target",
        target,
        "--connections",
        "12",
        "--duration",
        String(streamMs),
        "--interval",
        "100",
      ]) as unknown as Promise<Held>;
      await sleep(1500); // both clients connected (tsx start included)

      const { floodAt, floodEnd, sent, samples } = await flood(lab, vip, st, max, FLOOD_MS, FULL_MS);
      const during = Object.fromEntries(LAB_HOSTS.map((h) => [h, count(lab, h)]));
      const hostDuring = hostCount();
      const earlyDrops = stat(lab, "node-a1", "early_drop");
      const drops = stat(lab, "node-a1", "drop");
      // the zonal pod on node-a1: how its listener coped (SYN cookies once its queue was full)
      const podTcp = lab
        .exec("a1-3", ["nstat", "-az", "TcpExtSyncookiesSent", "TcpExtSyncookiesRecv", "TcpExtListenDrops"])
        .split("\n")
        .filter((l) => l.startsWith("TcpExt"))
        .map((l) => l.split(/\s+/).slice(0, 2).join(" "))
        .join(", ");
      const s = await stream;
      const h = await held;
      const lbLog = readFileSync(lab.state.processes.find((p) => p.role === "lb")!.log, "utf8");
      const healthLines = lbLog
        .slice(lbLogFrom)
        .split("\n")
        .filter(
          (l) =>
            /healthy → unhealthy/.test(l) && Date.parse(/"time":"([^"]+)"/.exec(l)?.[1] ?? "") >= floodAt,
        )
        .map((l) => /"msg":"([^"]*)"/.exec(l)?.[1] ?? l)
        .slice(0, 8);

      const full = samples.filter((x) => x.n >= max * 0.99);
      const fullFrom = full[0]?.at;
      const at = (e: StreamEvent) => s.started + e.t;
      const inFlood = s.events.filter((e) => at(e) >= floodAt && at(e) <= floodEnd);
      // while the table is full: from the first full sample on (it stays full after the flood:
      // the spoofed entries wait in SYN_RECV for nf_conntrack_tcp_timeout_syn_recv, 60 s)
      const inFull = fullFrom === undefined ? [] : s.events.filter((e) => at(e) >= fullFrom);
      const rate = (list: readonly StreamEvent[]) =>
        list.length === 0 ? 0 : list.filter((e) => e.ok).length / list.length;
      const errors: Record<string, number> = {};
      for (const e of s.events.filter((x) => !x.ok))
        errors[e.error ?? "?"] = (errors[e.error ?? "?"] ?? 0) + 1;
      const seconds = (floodEnd - floodAt) / 1000;
      st.diagnostic(
        `flood: ${sent} spoofed SYNs left client-a (quota ${MAX_SYNS}) from ${SPOOFED[0]}–${SPOOFED.at(-1)} in ${seconds.toFixed(1)} s (${Math.round(sent / seconds)} SYN/s); nf_conntrack_max ${max}`,
      );
      st.diagnostic(
        `conntrack -C before → at the end of the flood: ${LAB_HOSTS.map((x) => `${x} ${before[x]} → ${during[x]}`).join(", ")}; the test's own (initial) namespace ${hostBefore} → ${hostDuring}`,
      );
      st.diagnostic(
        `node-a1: table full (≥ 99 % of max) ${fullFrom === undefined ? "never" : `${((fullFrom - floodAt) / 1000).toFixed(1)} s after the flood started`}; early_drop ${earlyDrops}, drop ${drops}; pod a1-3: ${podTcp}; samples ${samples
          .filter((_, i) => i % 4 === 0)
          .map((x) => x.n)
          .join(" ")}`,
      );
      st.diagnostic(
        `legitimate new connections: ${inFlood.filter((e) => e.ok).length} of ${inFlood.length} during the flood (${(rate(inFlood) * 100).toFixed(2)} %), ${inFull.filter((e) => e.ok).length} of ${inFull.length} while node-a1's table was full (${(rate(inFull) * 100).toFixed(2)} %); all ${s.events.length}: errors ${JSON.stringify(errors)}; long-lived: ${h.connections.filter((c) => !c.ok).length} of ${h.connections.length} broke or stalled > 2 s (${JSON.stringify(h.connections.map((c) => c.error ?? c.pings))})`,
      );

      st.diagnostic(
        `the LB's health transitions to unhealthy during the flood: ${healthLines.join(" | ") || "none"}`,
      );
      assert.ok(
        fullFrom !== undefined,
        "the flood never filled node-a1's table: the test would prove nothing",
      );
      assert.ok(inFull.length >= 100, `only ${inFull.length} legitimate connections met the full table`);
      assert.ok(
        rate(inFlood) >= 0.99,
        `only ${(rate(inFlood) * 100).toFixed(2)} % succeeded during the flood`,
      );
      assert.ok(
        rate(inFull) >= 0.99,
        `only ${(rate(inFull) * 100).toFixed(2)} % succeeded against a full table`,
      );
      assert.deepEqual(
        h.connections.filter((c) => !c.ok),
        [],
        "no long-lived connection broke or stalled",
      );
      assert.ok(
        during.lb! < max / 10,
        `the LB host made ${during.lb} entries: its untrack chain should leave a VIP's SYNs untracked`,
      );
      assert.ok(
        hostDuring < max / 2,
        `the flood's entries reached the test's own namespace (${hostDuring}): they must stay in the lab's`,
      );
    },
  );

  await t.test(
    `a per-source meter on the LB host (${METER_RATE} SYN/s per source): the same flood makes few entries`,
    { skip: noHping },
    async (st) => {
      const vip = await lab.vip("e2e/zonal");
      const target = `${vip}:85`;
      // start from an empty table: the first flood's entries would wait 60 s in SYN_RECV
      lab.exec("node-a1", ["conntrack", "-F"]);
      // a table of the test's own on the LB host, before passlb's (priority −250 < −200)
      lab.exec("lb", [
        "nft",
        `add table inet plbmeter { set persrc4 { type ipv4_addr; size 65535; flags dynamic; timeout 60s; }; chain pre { type filter hook prerouting priority -250; ip daddr ${vip} tcp dport 85 tcp flags & (syn | ack) == syn add @persrc4 { ip saddr limit rate over ${METER_RATE}/second burst ${METER_RATE} packets } counter drop; }; }`,
      ]);
      st.after(() => {
        try {
          lab.exec("lb", ["nft", "delete", "table", "inet", "plbmeter"]);
        } catch {
          // the lab is going anyway
        }
      });
      const before = count(lab, "node-a1");
      const stream = lab.client("client-a", [
        "--mode",
        "stream",
        "--target",
        target,
        "--duration",
        String(METER_FLOOD_MS + 3000),
        "--interval",
        "20",
        "--timeout",
        "1000",
      ]) as unknown as Promise<Stream>;
      await sleep(1500);
      const f = await flood(lab, vip, st, max, METER_FLOOD_MS);
      const after = count(lab, "node-a1");
      const afterAt = Date.now();
      const metered = Number(
        /counter packets (\d+)/.exec(lab.exec("lb", ["nft", "list", "table", "inet", "plbmeter"]))?.[1] ?? 0,
      );
      const s = await stream;
      const at = (e: StreamEvent) => s.started + e.t;
      const inFlood = s.events.filter((e) => at(e) >= f.floodAt && at(e) <= f.floodEnd);
      const ok = inFlood.filter((e) => e.ok).length;
      const seconds = (f.floodEnd - f.floodAt) / 1000;
      // what the meter lets through: each source's rate for the flood's length plus its burst
      // once (a source's limiter lives 60 s in the set, longer than the flood); and the
      // legitimate client's own connections made before the count was read
      const allowed = Math.round(SPOOFED.length * METER_RATE * (seconds + 1));
      const legit = s.events.filter((e) => at(e) <= afterAt).length;
      st.diagnostic(
        `meter: ${f.sent} spoofed SYNs in ${seconds.toFixed(1)} s (${Math.round(f.sent / seconds)} SYN/s), ${metered} dropped by the meter; node-a1's count ${before} → ${after} (allowed ≤ ${allowed} by the meter, plus the legitimate client's ${legit}); legitimate: ${ok} of ${inFlood.length} during the flood`,
      );
      assert.ok(f.sent > allowed * 2, `the flood was too weak to show the meter: ${f.sent} SYNs`);
      assert.ok(after - before <= allowed + legit, `the meter let ${after - before} entries in`);
      assert.ok(
        ok >= inFlood.length * 0.99,
        `only ${ok} of ${inFlood.length} legitimate connections succeeded`,
      );
    },
  );
});
