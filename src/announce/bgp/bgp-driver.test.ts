/**
 * The BIRD driver's pure halves: the rendered configuration (golden, and parsed by the real
 * `bird -p -c` when BIRD is installed) and the parser of birdc's output (fixtures captured
 * from BIRD 2.0.12 peering with FRR 8.4 bgpd/bfdd in network namespaces).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { assertGolden } from "../../../test/golden.ts";
import type { BgpSettings } from "./bgp-types.ts";
import { renderBirdConfig } from "./bird-config.ts";
import { birdAvailable } from "./bird-speaker.ts";
import { birdSpeakerState, parseBirdBfdSessions, parseBirdRouteExport } from "./bird-status.ts";

const FIX = "test/fixtures/bgp";
const fixture = (name: string) => readFileSync(join(FIX, name), "utf8");

const dualStack: BgpSettings = {
  asn: 64512,
  peers: [
    { address: "198.51.100.1", asn: 64500, family: "IPv4" },
    { address: "fd00:198:51:100::1", asn: 64500, family: "IPv6" },
  ],
  routerId: "198.51.100.2",
  kernelTable: 4242,
  bfd: { intervalMs: 100, multiplier: 3 },
  holdSeconds: 9,
  connectRetrySeconds: 1,
  communities: ["64512:100"],
};
const v4NoBfd: BgpSettings = {
  ...dualStack,
  peers: [
    { address: "192.0.2.254", asn: 64500, family: "IPv4" },
    { address: "192.0.2.253", asn: 64501, family: "IPv4" },
  ],
  bfd: undefined,
  communities: [],
  holdSeconds: 3,
  routerId: undefined as never,
};
delete (v4NoBfd as { routerId?: string }).routerId;
/** per-session settings as LoadBalancerBGPPeers give them (bgp-peer-config.ts): own ASN, port,
 * timers, BFD off on one session, rx ≠ tx, own communities (a large one) and LOCAL_PREF */
const fromObjects: BgpSettings = {
  ...dualStack,
  bfd: { intervalMs: 300, multiplier: 4, receiveMs: 300, transmitMs: 200 },
  communities: [],
  peers: [
    {
      address: "198.51.100.1",
      asn: 64512,
      family: "IPv4",
      source: "tor-a",
      localAsn: 64512,
      holdSeconds: 3,
      connectRetrySeconds: 5,
      communities: ["64512:100", "large:64512:1:2"],
      localPref: 200,
    },
    {
      address: "198.51.100.2",
      asn: 64501,
      family: "IPv4",
      source: "tor-b",
      localAsn: 64513,
      port: 1179,
      keepaliveSeconds: 2,
      bfd: false,
    },
    { address: "fd00:198:51:100::1", asn: 64500, family: "IPv6", source: "tor-a-v6", localAsn: 64512 },
  ],
};

test("the BIRD configuration: golden text, and BIRD itself parses it", (t) => {
  for (const [name, settings] of [
    ["bird-dual-stack.conf", dualStack],
    ["bird-v4-no-bfd.conf", v4NoBfd],
    ["bird-peers-from-crd.conf", fromObjects],
  ] as const) {
    const text = renderBirdConfig(settings);
    assertGolden(join(FIX, name), text);
    if (!birdAvailable()) {
      t.diagnostic(`bird is not installed: ${name} checked against its golden file only`);
      continue;
    }
    const dir = mkdtempSync(join(tmpdir(), "plb-bird-"));
    try {
      writeFileSync(join(dir, "bird.conf"), text);
      const r = spawnSync("bird", ["-p", "-c", join(dir, "bird.conf")], { encoding: "utf8" });
      assert.equal(r.status, 0, `bird -p refused ${name}: ${r.stderr}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

test("identical attributes on every LB host: only the router id differs between hosts", () => {
  const a = renderBirdConfig(dualStack).split("\n");
  const b = renderBirdConfig({ ...dualStack, routerId: "198.51.100.3" }).split("\n");
  const differing = a.filter((line, i) => line !== b[i]);
  assert.deepEqual(differing, ["router id 198.51.100.2;"]);
  const text = a.join("\n");
  assert.match(text, /bgp_origin = ORIGIN_IGP;/);
  assert.doesNotMatch(text, /bgp_med|bgp_path\.prepend/);
  assert.match(text, /graceful restart off;/);
  assert.match(text, /kernel table 4242;\n {2}learn;/);
});

test("no peer (no LoadBalancerBGPPeer selects the host yet): BIRD runs its kernel protocols and announces nothing", () => {
  const text = renderBirdConfig({ ...dualStack, peers: [] });
  assert.doesNotMatch(text, /protocol bgp|protocol bfd|filter /);
  assert.match(text, /protocol kernel vips4/);
});

test("bad settings are bugs in the caller: the renderer throws", () => {
  assert.throws(() => renderBirdConfig({ ...dualStack, asn: 0 }), /ASN/);
  assert.throws(() => renderBirdConfig({ ...dualStack, communities: ["x"] }), /community/);
});

test("birdc output: both sessions and BFD up is healthy", () => {
  const s = birdSpeakerState(fixture("protocols-established.txt"), fixture("bfd-up.txt"), true);
  assert.equal(s.health, "healthy");
  assert.deepEqual(
    s.sessions.map((x) => [x.name, x.peer, x.state, x.exported]),
    [
      ["peer1", "198.51.100.1", "Established", 1],
      ["peer2", "fd00:198:51:100::1", "Established", 1],
    ],
  );
  assert.deepEqual(s.findings, []);
});

test("birdc output: BGP up with BFD down is degraded, and says which peer", () => {
  const s = birdSpeakerState(fixture("protocols-bfd-down.txt"), fixture("bfd-down.txt"), true);
  assert.equal(s.health, "degraded");
  assert.deepEqual(s.findings, [
    "BGP peer1 (198.51.100.1) is up, BFD Down",
    "BGP peer2 (fd00:198:51:100::1) is up, BFD Down",
  ]);
  assert.deepEqual(
    parseBirdBfdSessions(fixture("bfd-down.txt")).map((b) => b.state),
    ["Down", "Down"],
  );
  // without BFD configured the same sessions are healthy
  assert.equal(birdSpeakerState(fixture("protocols-bfd-down.txt"), undefined, false).health, "healthy");
});

test("birdc output: sessions still connecting are down; no answer is down", () => {
  const s = birdSpeakerState(fixture("protocols-active.txt"), fixture("bfd-down.txt"), true);
  assert.equal(s.health, "down");
  assert.deepEqual(s.findings, [
    "BGP peer1 (198.51.100.1) is Active",
    "BGP peer2 (fd00:198:51:100::1) is Active",
  ]);
  const none = birdSpeakerState(undefined, undefined, true);
  assert.equal(none.running, false);
  assert.equal(none.health, "down");
});

test("birdc output: the routes exported to a peer", () => {
  assert.deepEqual(parseBirdRouteExport(fixture("export-peer1.txt")), ["203.0.113.10/32"]);
  assert.deepEqual(parseBirdRouteExport(fixture("export-peer2.txt")), ["fd00:10::10/128"]);
});
