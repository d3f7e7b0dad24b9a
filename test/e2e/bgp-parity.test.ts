/**
 * BGP parity with MetalLB on the wire (issue 28; docs/vip-announce.md "Field reference"):
 * one topology of its own, `bgppar`: an LB host namespace running passlb's BIRD driver
 * (configuration rendered from LoadBalancerBGPPeer / LoadBalancerBGPAdvertisement objects by
 * bgp-peer-config.ts, VIP routes through the BGP announcer into the kernel table) and a router
 * namespace running FRR 8.4 (zebra, bgpd, bfdd; a different speaker, as a real ToR). Four
 * sessions, stepped through in sequence:
 * - `md5`: TCP MD5 from a Secret, BFD 300/300/3, graceful restart: up; a wrong key keeps it
 *   down and passlb says why it may be; the restart the key change causes is reported first;
 * - `multihop`: to the router's loopback with a source address (ebgpMultiHop);
 * - `dynamic`: dynamicASN external (the router's AS learned from its OPEN);
 * - `ibgp`: localASN equal to the router's AS: LOCAL_PREF reaches it, not the eBGP peers.
 * Then: communities and localPref per VIP in FRR's `show bgp ipv4 unicast X/32 json`;
 * per-pool and per-peer selection; a /24 aggregate present while a member VIP is and
 * withdrawn after the last; VIP and advertisement changes that do not reset a session
 * (FRR's connectionsEstablished counters stay); graceful restart keeping FRR's routes stale
 * across a BIRD restart (`birdc graceful restart`, `bird -R`) and refreshed after; VRF
 * skipped with the reason where the kernel has none.
 * Root, FRR and BIRD needed; skipped with the reason otherwise. Namespaces and daemons are
 * removed when the test ends, pass or fail; every wait is bounded.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parseAllDocuments } from "yaml";
import type { VipReadiness } from "../../src/announce/announcer.ts";
import { routesFor } from "../../src/announce/bgp/bgp-advertisements.ts";
import { BgpAnnouncer } from "../../src/announce/bgp/bgp-announcer.ts";
import { bgpSettingsFor, type SecretRead } from "../../src/announce/bgp/bgp-peer-config.ts";
import { sessionResets } from "../../src/announce/bgp/bgp-session-resets.ts";
import { renderBirdConfig } from "../../src/announce/bgp/bird-config.ts";
import { type BgpSpeaker, birdAvailable, birdSpeaker } from "../../src/announce/bgp/bird-speaker.ts";
import { kernelVipRoutes } from "../../src/announce/bgp/kernel-vip-routes.ts";
import { decodeBgpAdvertisement } from "../../src/k8s/load-balancer-bgp-advertisement.ts";
import { decodeBgpPeer } from "../../src/k8s/load-balancer-bgp-peer.ts";
import { labRouterUnavailable, startDaemon } from "../../src/lab/lab-frr.ts";

const TOPOLOGY = "bgppar";
const LB = `${TOPOLOGY}-lb`;
const RTR = `${TOPOLOGY}-rtr`;
const OBJECTS = "test/fixtures/lab/bgp-parity/objects.yaml";
const why =
  process.getuid?.() !== 0 ? "needs root: network namespaces, BIRD and FRR" : labRouterUnavailable();

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function sh(cmd: string, ...args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 15_000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}
const ipn = (ns: string, ...args: string[]) => sh("ip", "-n", ns, ...args);

/** FRR 8.4 configuration of the router (FRRouting/frr@frr-8.4.4 doc/user/bgp.rst, bfd.rst). */
function frrFiles(): Record<string, string> {
  const n = (addr: string, ...lines: string[]) => lines.map((l) => ` neighbor ${addr} ${l}`);
  const bgpd = [
    "router bgp 64500",
    " bgp router-id 192.0.2.1",
    " no bgp ebgp-requires-policy",
    " no bgp default ipv4-unicast",
    " bgp graceful-restart",
    ...n(
      "192.0.2.10",
      "remote-as 64512",
      "update-source 192.0.2.1",
      "password right-key",
      "bfd",
      "bfd profile lab",
      "timers connect 1",
    ),
    ...n(
      "203.0.113.10",
      "remote-as 64512",
      "ebgp-multihop 255",
      "update-source 203.0.113.1",
      "timers connect 1",
    ),
    ...n("192.0.2.11", "remote-as 64512", "update-source 192.0.2.2", "timers connect 1"),
    ...n("192.0.2.12", "remote-as 64500", "update-source 192.0.2.3", "timers connect 1"),
    " address-family ipv4 unicast",
    ...["192.0.2.10", "203.0.113.10", "192.0.2.11", "192.0.2.12"].map((a) => `  neighbor ${a} activate`),
    " exit-address-family",
    "exit",
    "",
  ];
  const bfdd = [
    "bfd",
    " profile lab",
    "  receive-interval 300",
    "  transmit-interval 300",
    "  detect-multiplier 3",
    " exit",
    "exit",
    "",
  ];
  return { "zebra.conf": "!\n", "bfdd.conf": bfdd.join("\n"), "bgpd.conf": bgpd.join("\n") };
}

function startFrr(dir: string): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(frrFiles())) writeFileSync(join(dir, name), text);
  sh("chown", "-R", "frr:frr", dir);
  for (const daemon of ["zebra", "bfdd", "bgpd"] as const) {
    startDaemon(dir, RTR, daemon);
    if (daemon === "zebra")
      for (let i = 0; i < 100 && !existsSync(join(dir, "zserv.api")); i++) spawnSync("sleep", ["0.05"]);
  }
}

function stopPidFiles(dir: string): void {
  for (const f of ["bgpd.pid", "bfdd.pid", "zebra.pid", "bird.pid"]) {
    const p = join(dir, f);
    if (existsSync(p)) spawnSync("kill", ["-9", readFileSync(p, "utf8").trim()]);
  }
}

function topologyDown(): void {
  for (const ns of [LB, RTR]) spawnSync("ip", ["netns", "del", ns], { stdio: "ignore" });
}

function topologyUp(): void {
  topologyDown();
  for (const ns of [LB, RTR]) sh("ip", "netns", "add", ns);
  sh(
    "ip",
    "link",
    "add",
    `${TOPOLOGY}-a`,
    "netns",
    LB,
    "type",
    "veth",
    "peer",
    "name",
    `${TOPOLOGY}-b`,
    "netns",
    RTR,
  );
  ipn(LB, "link", "set", `${TOPOLOGY}-a`, "name", "eth0");
  ipn(RTR, "link", "set", `${TOPOLOGY}-b`, "name", "eth0");
  for (const [ns, addrs, loop] of [
    [LB, ["192.0.2.10", "192.0.2.11", "192.0.2.12"], "203.0.113.10"],
    [RTR, ["192.0.2.1", "192.0.2.2", "192.0.2.3"], "203.0.113.1"],
  ] as const) {
    for (const a of addrs) ipn(ns, "addr", "add", `${a}/24`, "dev", "eth0");
    ipn(ns, "addr", "add", `${loop}/32`, "dev", "lo");
    ipn(ns, "link", "set", "lo", "up");
    ipn(ns, "link", "set", "eth0", "up");
  }
  // the loopbacks one hop apart: only a multihop session reaches them
  ipn(LB, "route", "add", "203.0.113.1/32", "via", "192.0.2.1", "src", "203.0.113.10");
  ipn(RTR, "route", "add", "203.0.113.10/32", "via", "192.0.2.10");
}

// biome-ignore lint/suspicious/noExplicitAny: FRR's JSON, read only in assertions
type Json = any;
const vtysh = (dir: string, command: string): Json =>
  JSON.parse(sh("vtysh", "--vty_socket", dir, "-c", command) || "{}");

/** FRR's paths for a prefix: the neighbour each came from, and its attributes. */
function frrPaths(dir: string, prefix: string) {
  const r = vtysh(dir, `show bgp ipv4 unicast ${prefix} json`);
  return ((r.paths ?? []) as Json[]).map((p) => ({
    from: p.peer?.peerId as string,
    community: (p.community?.string ?? "") as string,
    large: (p.largeCommunity?.string ?? "") as string,
    localPref: p.locPrf as number | undefined,
    stale: p.stale === true,
  }));
}

function neighbours(dir: string): Record<string, { state: string; established: number }> {
  const r = vtysh(dir, "show bgp neighbors json");
  return Object.fromEntries(
    Object.entries(r as Record<string, Json>).map(([a, n]) => [
      a,
      { state: n.bgpState, established: n.connectionsEstablished },
    ]),
  );
}

async function until<T>(what: string, ms: number, probe: () => T | undefined | false): Promise<T> {
  const t0 = Date.now();
  let last: unknown;
  while (Date.now() - t0 < ms) {
    try {
      const v = probe();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    await sleep(200);
  }
  throw new Error(`${what}: not within ${ms} ms${last ? ` (${String(last)})` : ""}`);
}

const ready = (vip: string): VipReadiness => ({
  vip,
  family: "IPv4",
  services: ["lab/web"],
  ready: true,
  reason: "ok",
  detail: "lab/web: 1 healthy node(s)",
});

test("BGP parity against FRR: MD5, multihop, dynamic ASN, iBGP localPref, communities, selection, aggregation, no resets, graceful restart", {
  timeout: 240_000,
}, async (t) => {
  if (why) return t.skip(why);
  if (!birdAvailable()) return t.skip("bird (Debian package bird2) is not installed");
  const state = mkdtempSync(join(tmpdir(), `${TOPOLOGY}-`));
  chmodSync(state, 0o755); // FRR's daemons run as the frr user and must reach frr/
  const frr = join(state, "frr");
  const birdDir = join(state, "bird");
  t.after(() => {
    stopPidFiles(frr);
    stopPidFiles(birdDir);
    topologyDown();
    rmSync(state, { recursive: true, force: true });
  });
  topologyUp();
  startFrr(frr);

  const docs = parseAllDocuments(readFileSync(OBJECTS, "utf8")).map((d) => d.toJS());
  const peers = docs.filter((d) => d.kind === "LoadBalancerBGPPeer").map((d) => decodeBgpPeer(d).peer!);
  let advertisements = docs
    .filter((d) => d.kind === "LoadBalancerBGPAdvertisement")
    .map((d) => decodeBgpAdvertisement(d).advertisement!);
  const pools = docs
    .filter((d) => d.kind === "LoadBalancerIPPool")
    .map((d) => ({ name: d.metadata.name, labels: d.metadata.labels ?? {}, addresses: d.spec.addresses }));
  let key = "right-key";
  const settingsNow = () =>
    bgpSettingsFor({
      host: "lb-1",
      labels: {},
      peers,
      advertisements,
      pools,
      namespace: "passlb-system",
      secrets: new Map<string, SecretRead>([
        ["passlb-system/tor-md5", { type: "kubernetes.io/basic-auth", password: key }],
      ]),
      hostAddresses: ["192.0.2.10", "192.0.2.11", "192.0.2.12", "203.0.113.10"],
      kernelTable: 4242,
    });
  let current = settingsNow();
  assert.deepEqual(
    current.findings.filter((f) => f.severity === "warning"),
    [],
    "every object applies on this host (info: localPref not sent to the eBGP peers)",
  );
  const md5 = () => new Set(current.settings.peers.filter((p) => p.password).map((p) => p.address));
  const speakerOf = (recover: boolean): BgpSpeaker =>
    birdSpeaker({ stateDir: birdDir, bfd: () => new Set(["192.0.2.1"]), md5, netns: LB, recover });
  let speaker = speakerOf(false);
  const announcerOf = (s: BgpSpeaker) =>
    new BgpAnnouncer({
      speaker: s,
      routes: kernelVipRoutes({ table: 4242, netns: LB }),
      config: renderBirdConfig(current.settings),
      pollMs: 60_000,
      convergeMs: 0,
      sleep,
      routesFor: (vip) => routesFor(vip, current.aggregates),
    });
  let announcer = announcerOf(speaker);
  announcer.setReadiness([ready("198.51.100.10"), ready("198.51.100.11"), ready("203.0.113.130")]);
  await announcer.start();
  await announcer.reconcile();

  const sessions = ["192.0.2.10", "203.0.113.10", "192.0.2.11", "192.0.2.12"];
  await until("all four sessions Established on FRR", 60_000, () =>
    sessions.every((a) => neighbours(frr)[a]?.state === "Established"),
  );
  const birdc = (...cmd: string[]) => sh("birdc", "-s", join(birdDir, "bird.ctl"), ...cmd);

  await t.test(
    "dynamic ASN: BIRD learned the router's AS from its OPEN; MD5 session's BFD is Up",
    async () => {
      assert.match(birdc("show", "protocols", "all", "p_dynamic"), /Neighbor AS:\s+64500/);
      await until("BFD Up toward 192.0.2.1", 20_000, () =>
        /192\.0\.2\.1\s+eth0\s+Up/.test(birdc("show", "bfd", "sessions")),
      );
    },
  );

  await t.test("multihop: the session runs between the loopbacks, from the source address", () => {
    const n = vtysh(frr, "show bgp neighbors 203.0.113.10 json")["203.0.113.10"];
    assert.equal(n.hostLocal, "203.0.113.1");
    assert.equal(n.hostForeign, "203.0.113.10");
    assert.equal(n.externalBgpNbrMaxHopsAway, 255, "FRR: up to 255 hops away");
  });

  await t.test("communities and localPref per VIP, per-pool and per-peer selection", async () => {
    const web = await until("198.51.100.10/32 from 4 neighbours", 20_000, () => {
      const p = frrPaths(frr, "198.51.100.10/32");
      return p.length === 4 && p;
    });
    for (const p of web) {
      assert.match(p.community, /noAdvertise|no-advertise/, `${p.from}: ${JSON.stringify(p)}`);
      assert.equal(p.large, "64512:1:1", p.from);
    }
    assert.equal(
      web.find((p) => p.from === "192.0.2.12")?.localPref,
      300,
      "iBGP: LOCAL_PREF 300 from a-hosts",
    );
    for (const p of web.filter((x) => x.from !== "192.0.2.12"))
      assert.notEqual(p.localPref, 300, `eBGP ${p.from}: LOCAL_PREF is not sent (RFC 4271 §5.1.5)`);
    // the internal pool goes to the md5 peer only (c-internal: peers [md5])
    const internal = await until(
      "203.0.113.130/32",
      10_000,
      () => frrPaths(frr, "203.0.113.130/32").length > 0 && frrPaths(frr, "203.0.113.130/32"),
    );
    assert.deepEqual(
      internal.map((p) => p.from),
      ["192.0.2.10"],
    );
  });

  const before = neighbours(frr);
  await t.test(
    "aggregate: present while a member VIP is, withdrawn after the last; no session reset",
    async () => {
      const agg = await until(
        "198.51.100.0/24 from the dynamic peer",
        10_000,
        () => frrPaths(frr, "198.51.100.0/24").length > 0 && frrPaths(frr, "198.51.100.0/24"),
      );
      assert.deepEqual(
        agg.map((p) => p.from),
        ["192.0.2.11"],
        "b-aggregate: peers [dynamic]",
      );
      announcer.setReadiness([ready("198.51.100.11"), ready("203.0.113.130")]);
      await announcer.reconcile();
      await until("198.51.100.10/32 withdrawn", 10_000, () => frrPaths(frr, "198.51.100.10/32").length === 0);
      assert.equal(frrPaths(frr, "198.51.100.0/24").length, 1, "one member left: the aggregate stays");
      announcer.setReadiness([ready("203.0.113.130")]);
      await announcer.reconcile();
      await until(
        "198.51.100.0/24 withdrawn with its last member",
        10_000,
        () => frrPaths(frr, "198.51.100.0/24").length === 0,
      );
      announcer.setReadiness([ready("198.51.100.10"), ready("203.0.113.130")]);
      await announcer.reconcile();
      await until(
        "198.51.100.0/24 back with a member",
        10_000,
        () => frrPaths(frr, "198.51.100.0/24").length === 1,
      );
    },
  );

  await t.test("an advertisement change reloads the export filter only: the sessions stay", async () => {
    advertisements = advertisements.map((a) =>
      a.metadata.name === "a-hosts" ? { ...a, spec: { ...a.spec, communities: ["64512:99"] } } : a,
    );
    const next = settingsNow();
    assert.deepEqual(sessionResets(current.settings, next.settings), [], "nothing to restart");
    current = next;
    assert.equal(await announcer.configure(renderBirdConfig(current.settings)), true);
    await until(
      "the new community on 198.51.100.10/32",
      10_000,
      () =>
        frrPaths(frr, "198.51.100.10/32").every((p) => p.community === "64512:99") &&
        frrPaths(frr, "198.51.100.10/32").length === 4,
    );
    const after = neighbours(frr);
    for (const a of sessions)
      assert.equal(after[a]?.established, before[a]?.established, `${a}: connectionsEstablished unchanged`);
    assert.equal(after["192.0.2.10"]?.state, "Established");
  });

  await t.test(
    "MD5: a wrong key keeps the session down and passlb says why; the restart is reported first",
    async () => {
      key = "wrong-key";
      const next = settingsNow();
      assert.deepEqual(sessionResets(current.settings, next.settings), [
        { protocol: "p_md5", source: "md5", changed: ["password"] },
      ]);
      assert.doesNotMatch(JSON.stringify(sessionResets(current.settings, next.settings)), /wrong-key/);
      current = next;
      await announcer.configure(renderBirdConfig(current.settings));
      await until(
        "FRR drops the MD5 session",
        15_000,
        () => neighbours(frr)["192.0.2.10"]?.state !== "Established",
      );
      await sleep(5000); // several connect retries (1 s) with the wrong key
      assert.notEqual(neighbours(frr)["192.0.2.10"]?.state, "Established", "still down with the wrong key");
      await announcer.reconcile();
      const finding = announcer.speaker.findings.find((f) => f.includes("192.0.2.1)"));
      assert.match(
        finding ?? "",
        /TCP MD5 is set on this session: a key that differs from the router's keeps it down/,
      );
      assert.doesNotMatch(announcer.speaker.findings.join("\n"), /wrong-key|right-key/);
      key = "right-key";
      current = settingsNow();
      await announcer.configure(renderBirdConfig(current.settings));
      await until(
        "MD5 session back with the right key",
        30_000,
        () => neighbours(frr)["192.0.2.10"]?.state === "Established",
      );
    },
  );

  await t.test(
    "graceful restart: FRR keeps the md5 peer's routes stale across a BIRD restart, refreshed after",
    async () => {
      await until("203.0.113.130/32 learned", 10_000, () => frrPaths(frr, "203.0.113.130/32").length === 1);
      await speaker.stop({ gracefulRestart: true });
      // what FRR showed last, for the failure message: the paths, and why the session reset
      // (a BFD down or a NOTIFICATION flushes the routes instead of keeping them stale)
      let seen = "";
      const stale = await until("stale route on FRR", 10_000, () => {
        const p = frrPaths(frr, "203.0.113.130/32");
        const n = (vtysh(frr, "show bgp neighbors 192.0.2.10 json") as Record<string, Json>)["192.0.2.10"];
        seen = JSON.stringify({ paths: p, state: n?.bgpState, lastReset: n?.lastResetDueTo });
        return p.length === 1 && p[0]!.stale && p;
      }).catch((e: Error) => {
        throw new Error(`${e.message}; FRR last showed ${seen}`);
      });
      assert.equal(stale[0]!.from, "192.0.2.10");
      // the kernel table still holds the routes: the next BIRD starts in recovery and re-announces them
      speaker = speakerOf(true);
      announcer = announcerOf(speaker);
      announcer.setReadiness([ready("198.51.100.10"), ready("203.0.113.130")]);
      await announcer.start();
      await until("route refreshed (not stale)", 30_000, () => {
        const p = frrPaths(frr, "203.0.113.130/32");
        return p.length === 1 && !p[0]!.stale;
      });
    },
  );

  await t.test("VRF", (tt) => {
    const probe = spawnSync("ip", ["-n", LB, "link", "add", "plbvrfprobe", "type", "vrf", "table", "4243"], {
      encoding: "utf8",
    });
    if (probe.status !== 0)
      return tt.skip(
        `this kernel has no VRF devices (CONFIG_NET_VRF): ${probe.stderr.trim()}; the rendered vrf config is golden-tested and parsed by bird -p (src/announce/bgp/bgp-peer-config.test.ts)`,
      );
    spawnSync("ip", ["-n", LB, "link", "del", "plbvrfprobe"]);
    tt.diagnostic("VRF devices exist here; a VRF session lab is not part of this test yet");
  });

  await announcer.stop();
});
