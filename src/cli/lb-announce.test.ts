import assert from "node:assert/strict";
import { test } from "node:test";
import { lbPeersFromNodes, parsePeerLabel } from "../announce/lb-peers.ts";
import type { Node } from "../k8s/objects.ts";
import { type AnnounceFlags, announceConfig, parsePeers } from "./lb-announce.ts";

const flags = (over: Partial<AnnounceFlags>): AnnounceFlags => ({
  announce: "l2",
  interface: "eth0",
  hostName: "lb-1",
  peers: ["lb-1=192.0.2.2,lb-2=192.0.2.3"],
  advertMs: "100",
  handoverMs: "1000",
  ...over,
});

test("--peers: name=address pairs, comma-separated or repeated, a name once per family", () => {
  const p = parsePeers(["lb-1=192.0.2.2,lb-1=fd00:192:0:1::2", "lb-2=fd00:192:0:1::3,lb-3=192.0.2.4"]);
  assert.deepEqual(
    [...(p as Map<string, unknown>)],
    [
      ["lb-1", { IPv4: "192.0.2.2", IPv6: "fd00:192:0:1::2" }],
      ["lb-2", { IPv6: "fd00:192:0:1::3" }],
      ["lb-3", { IPv4: "192.0.2.4" }],
    ],
  );
  assert.match(parsePeers(["lb-1"]) as string, /not name=address/);
  assert.match(parsePeers(["lb-1=not-an-ip"]) as string, /not name=address/);
  assert.match(parsePeers(["a=192.0.2.2,a=192.0.2.3"]) as string, /twice for IPv4/);
});

test("announce flags are validated before anything starts", () => {
  assert.equal(announceConfig(flags({ announce: "none" })), undefined);
  const ok = announceConfig(flags({}));
  assert.ok(ok && typeof ok === "object");
  assert.equal(ok.self, "lb-1");
  assert.equal(ok.advertMs, 100);
  assert.equal(ok.stateDir, "/run/passlb/l2");
  assert.equal(announceConfig(flags({ announce: "bgp" })), undefined, "lb-announce-bgp.ts validates bgp");
  assert.match(announceConfig(flags({ announce: "vrrp" })) as string, /none, l2 or bgp/);
  assert.match(
    announceConfig(flags({ announce: "bgp", heartbeatMs: "100" })) as string,
    /--heartbeat-ms is gone/,
    "refused in every mode",
  );
  assert.match(announceConfig(flags({ hostName: "lb-9" })) as string, /must list this host/);
  assert.match(announceConfig(flags({ advertMs: "5" })) as string, /10\.\.40950/);
  assert.match(announceConfig(flags({ advertMs: "105" })) as string, /steps of 10/);
  // the heartbeat protocol's flags are refused with what replaced them, even with --announce none
  assert.match(announceConfig(flags({ heartbeatMs: "200" })) as string, /use --advert-ms/);
  assert.match(announceConfig(flags({ deadAfterMs: "1000" })) as string, /3 × --advert-ms/);
  assert.match(announceConfig(flags({ heartbeatPort: "7480" })) as string, /IP protocol 112/);
  assert.match(announceConfig(flags({ announce: "none", quorum: "2" })) as string, /no quorum/);
  const { interface: _, ...noIf } = flags({});
  assert.match(announceConfig(noIf) as string, /needs --interface/);
});

test("--peer-label: the labelled Nodes are the LB hosts, at their InternalIP of the family", () => {
  const node = (name: string, labels: Record<string, string>, ...addresses: string[]): Node => ({
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels },
    spec: {},
    status: { addresses: addresses.map((address) => ({ type: "InternalIP", address })) },
  });
  const nodes = [
    node("lb-2", { "passlb.io/lb-host": "true" }, "192.0.2.3", "fd00:192:0:1::3"),
    node("lb-1", { "passlb.io/lb-host": "true" }, "192.0.2.2"),
    node("worker", {}, "198.51.100.11"),
    node("lb-x", { "passlb.io/lb-host": "false" }, "192.0.2.9"),
  ];
  const label = parsePeerLabel("passlb.io/lb-host")!;
  assert.deepEqual(
    [...lbPeersFromNodes(nodes, label)],
    [
      ["lb-1", "192.0.2.2"],
      ["lb-2", "192.0.2.3"],
      ["lb-x", "192.0.2.9"],
    ],
  );
  assert.deepEqual([...lbPeersFromNodes(nodes, parsePeerLabel("passlb.io/lb-host=true")!)].length, 2);
  assert.deepEqual([...lbPeersFromNodes(nodes, label, "IPv6")], [["lb-2", "fd00:192:0:1::3"]]);
  assert.equal(parsePeerLabel("a=b=c"), undefined);
  const cfg = announceConfig(flags({ peers: [], peerLabel: "passlb.io/lb-host" }));
  assert.ok(cfg && typeof cfg === "object" && cfg.peerLabel?.key === "passlb.io/lb-host");
  assert.match(announceConfig(flags({ peerLabel: "passlb.io/lb-host" })) as string, /not both/);
});

test("wire flags: --vrid-range, --garp-refresh-s/--garp-refresh-repeat, --wire-check-ms, --no-vrrp-watch", () => {
  const ok = announceConfig(flags({}));
  assert.ok(ok && typeof ok === "object");
  assert.deepEqual(ok.vridRange, { first: 1, last: 255 });
  assert.deepEqual(ok.garpRefresh, { seconds: 60, repeat: 1 });
  assert.equal(ok.wireCheckMs, 10_000);
  assert.equal(ok.vrrpWatch, true);
  const set = announceConfig(
    flags({
      vridRange: "40-50",
      garpRefreshS: "0",
      garpRefreshRepeat: "3",
      wireCheckMs: "0",
      vrrpWatch: false,
    }),
  );
  assert.ok(set && typeof set === "object");
  assert.deepEqual(set.vridRange, { first: 40, last: 50 });
  assert.deepEqual(set.garpRefresh, { seconds: 0, repeat: 3 });
  assert.equal(set.wireCheckMs, 0);
  assert.equal(set.vrrpWatch, false);
  assert.match(announceConfig(flags({ vridRange: "0-9" })) as string, /^--vrid-range: "0-9" is not A-B/);
  assert.match(
    announceConfig(flags({ vridRange: "7" })) as string,
    /^--vrid-range 7-7: 2 LB hosts in --peers/,
  );
  assert.match(
    announceConfig(flags({ garpRefreshS: "1.5" })) as string,
    /^--garp-refresh-s must be 0\.\.86400/,
  );
  assert.match(
    announceConfig(flags({ garpRefreshRepeat: "0" })) as string,
    /^--garp-refresh-repeat must be 1\.\.10/,
  );
  assert.match(
    announceConfig(flags({ wireCheckMs: "500" })) as string,
    /^--wire-check-ms must be 0 \(off\) or 1000/,
  );
});
