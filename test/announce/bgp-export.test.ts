/**
 * The BGP export comparison against real BIRD peering with the FRR router
 * (docs/vip-announce.md "Checked from the wire", BGP). Topology `wirebgp`: a router
 * namespace running FRR (zebra, bfdd, bgpd with the lab's files: src/lab/lab-bgp.ts) and
 * an LB host namespace running BIRD through passlb's BGP engine (the same `bgpAnnouncer`
 * `passlb lb --announce bgp` builds), on one veth (198.51.100.0/24, fd00:198:51:100::/64).
 * Cases:
 *   - steady: every announced VIP is in BIRD's export table of the session of its family
 *     and in the router's FIB: no problem;
 *   - a route withheld by hand (`birdc disable vips4`: BIRD forgets the routes it learnt
 *     from kernel table 4242 while passlb's table still holds them, so passlb's status still
 *     says announced): `bgp_not_exported` for each IPv4 VIP within one check period (plus the
 *     confirming round 1 s later), and
 *     the router has indeed lost the route; the IPv6 VIP stays fine;
 *   - enabled again: agreement again (`wire_ok`).
 * Root, ip, BIRD, FRR needed; skipped with the reason otherwise. Namespaces, BIRD and FRR
 * are stopped and removed in t.after.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { birdAvailable, birdPaths, birdSpeaker } from "../../src/announce/bgp/bird-speaker.ts";
import { kernelVipRoutes } from "../../src/announce/bgp/kernel-vip-routes.ts";
import { vipReady } from "../../src/announce/fake-announcer.ts";
import { bgpAnnounceConfig, bgpAnnouncer } from "../../src/cli/lb-announce-bgp.ts";
import { bgpWireChecks, type WireFinding } from "../../src/cli/lb-wire.ts";
import { labRouterUnavailable, routerNextHops, startLabRouter } from "../../src/lab/lab-frr.ts";
import type { LabLayout } from "../../src/lab/lab-layout.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../netns.ts";

const why =
  kernelSkipReason() ??
  labRouterUnavailable() ??
  (birdAvailable() ? undefined : "bird (Debian package bird2) is not installed");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ip = (...args: string[]) => {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
};
const VIPS = ["203.0.113.10", "203.0.113.11", "fd00:10::10"];
const PERIOD_MS = 2000;

test("BGP export comparison: a route withheld by hand in BIRD is caught within one period (and its confirming round), and clears", {
  timeout: 120_000,
}, async (t) => {
  if (why) return t.skip(why);
  const ns = { router: createNetns("wirebgp"), lb: createNetns("wirebgp") };
  const dir = mkdtempSync(join(tmpdir(), "plbwire-bgp-"));
  chmodSync(dir, 0o755); // FRR runs as the frr user and writes under <dir>/router/frr
  const stateDir = join(dir, "bird");
  let stopChecks: (() => Promise<void>) | undefined;
  t.after(async () => {
    await stopChecks?.();
    for (const n of Object.values(ns)) {
      for (const pid of ip("netns", "pids", n).split("\n").filter(Boolean)) spawnSync("kill", ["-9", pid]);
      deleteNetns(n);
    }
    rmSync(dir, { recursive: true, force: true });
  });
  ip("link", "add", "eth0", "netns", ns.router, "type", "veth", "peer", "name", "eth0", "netns", ns.lb);
  for (const [n, a] of [
    [ns.router, 1],
    [ns.lb, 2],
  ] as const) {
    ip("-n", n, "link", "set", "lo", "up");
    ip("-n", n, "link", "set", "eth0", "up");
    ip("-n", n, "addr", "add", `198.51.100.${a}/24`, "dev", "eth0");
    ip("-n", n, "addr", "add", `fd00:198:51:100::${a}/64`, "dev", "eth0", "nodad");
  }
  // the lab's FRR router (lab-frr.ts) with one LB host as its neighbour
  const layout = {
    lb: { ns: ns.router },
    lbHosts: [{ nodeIpv4: "198.51.100.2", nodeIpv6: "fd00:198:51:100::2" }],
    bgp: { routerAsn: 64500, asn: 64512, bfdIntervalMs: 100, bfdMultiplier: 3, holdSeconds: 9 },
  } as unknown as LabLayout;
  await startLabRouter(join(dir, "router"), layout);

  const config = bgpAnnounceConfig({
    announce: "bgp",
    bgpAsn: "64512",
    bgpPeer: ["198.51.100.1:64500", "[fd00:198:51:100::1]:64500"],
    bgpRouterId: "198.51.100.2",
    bgpPollMs: "300",
    bgpConvergeMs: "0",
    stateDir,
  });
  assert.ok(config && typeof config !== "string", String(config));
  const engine = bgpAnnouncer(config, "lb-1", () => {}, undefined, {
    speaker: birdSpeaker({ stateDir, bfd: true, netns: ns.lb }),
    routes: kernelVipRoutes({ table: 4242, netns: ns.lb }),
  });
  stopChecks = () => engine.stop({ graceful: false });
  await engine.start({ vips: VIPS.map((v) => vipReady(v)), generation: 1 });
  const waitFor = async (what: string | (() => string), ok: () => boolean, ms: number) => {
    const deadline = Date.now() + ms;
    while (!ok()) {
      if (Date.now() > deadline)
        throw new Error(`${typeof what === "string" ? what : what()} not within ${ms} ms`);
      await sleep(50);
    }
  };
  await waitFor(
    () => `every VIP held and at the router (${JSON.stringify(engine.status().vips)})`,
    () =>
      engine.status().vips.every((v) => v.state === "held") &&
      VIPS.every((v) => routerNextHops(layout, v).length === 1),
    30_000,
  );

  const findings: { at: number; f: WireFinding }[] = [];
  const checks = bgpWireChecks({
    periodMs: PERIOD_MS,
    engine: () => engine.status(),
    report: (f) => findings.push({ at: Date.now(), f }),
    socket: birdPaths(stateDir).socket,
  });
  stopChecks = async () => {
    await checks.stop();
    await engine.stop({ graceful: false });
  };
  const wire = () => checks.status(engine.status()).wire!;
  await waitFor("a first comparison", () => wire().checkedAt !== null, PERIOD_MS + 3000);
  assert.deepEqual(
    wire().vips.map((c) => [c.vip, c.problem]),
    VIPS.map((v) => [v, null]),
  );
  assert.deepEqual(wire().errors, []);

  // withheld by hand: BIRD's kernel protocol for IPv4 disabled
  const birdc = (...args: string[]) =>
    spawnSync("birdc", ["-s", birdPaths(stateDir).socket, ...args], { encoding: "utf8" });
  const withheld = Date.now();
  assert.equal(birdc("disable", "vips4").status, 0);
  await waitFor(
    () => `bgp_not_exported for the IPv4 VIPs (${JSON.stringify(findings)})`,
    () => findings.filter((x) => x.f.reason === "bgp_not_exported").length === 2,
    PERIOD_MS + 3000,
  );
  const caught = findings.filter((x) => x.f.reason === "bgp_not_exported");
  for (const c of caught) t.diagnostic(`${c.at - withheld} ms after the hand edit: ${c.f.message}`);
  assert.deepEqual(caught.flatMap((c) => c.f.vips ?? []).sort(), ["203.0.113.10", "203.0.113.11"]);
  assert.match(caught[0]!.f.message, /announced but not exported to peer1 \(198\.51\.100\.1\)/);
  // the next round (at most one period), its confirming round 1 s later, birdc's time
  assert.ok(Math.max(...caught.map((c) => c.at - withheld)) <= PERIOD_MS + 1000 + 1500);
  // what passlb's own status says is unchanged (that is the point of asking BIRD), and the
  // router really lost the routes
  assert.ok(engine.status().vips.every((v) => v.state === "held"));
  await waitFor(
    "the router lost the IPv4 VIPs",
    () => routerNextHops(layout, "203.0.113.10").length === 0,
    5000,
  );
  assert.equal(routerNextHops(layout, "fd00:10::10").length, 1);
  assert.equal(wire().vips.find((c) => c.vip === "fd00:10::10")?.problem, null);

  assert.equal(birdc("enable", "vips4").status, 0);
  await waitFor(
    "agreement again",
    () =>
      wire().vips.every((c) => c.problem === null) &&
      findings.filter((x) => x.f.reason === "wire_ok").length === 2,
    PERIOD_MS + 5000,
  );
});
