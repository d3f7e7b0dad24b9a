import assert from "node:assert/strict";
import { test } from "node:test";
import { type AnnounceFlags, announceConfig, parsePeers } from "./lb-announce.ts";

const flags = (over: Partial<AnnounceFlags>): AnnounceFlags => ({
  announce: "l2",
  interface: "eth0",
  hostName: "lb-1",
  peers: ["lb-1=192.0.2.2,lb-2=192.0.2.3"],
  heartbeatPort: "7480",
  heartbeatMs: "200",
  deadAfterMs: "1000",
  handoverMs: "300",
  ...over,
});

test("--peers: name=address pairs, comma-separated or repeated", () => {
  const p = parsePeers(["lb-1=192.0.2.2", "lb-2=fd00:192:0:1::3,lb-3=192.0.2.4"]);
  assert.deepEqual(
    [...(p as Map<string, string>)],
    [
      ["lb-1", "192.0.2.2"],
      ["lb-2", "fd00:192:0:1::3"],
      ["lb-3", "192.0.2.4"],
    ],
  );
  assert.match(parsePeers(["lb-1"]) as string, /not name=address/);
  assert.match(parsePeers(["lb-1=not-an-ip"]) as string, /not name=address/);
  assert.match(parsePeers(["a=192.0.2.2,a=192.0.2.3"]) as string, /twice/);
});

test("announce flags are validated before anything starts", () => {
  assert.equal(announceConfig(flags({ announce: "none" })), undefined);
  const ok = announceConfig(flags({}));
  assert.ok(ok && typeof ok === "object");
  assert.equal(ok.self, "lb-1");
  assert.equal(ok.deadAfterMs, 1000);
  assert.match(announceConfig(flags({ announce: "bgp" })) as string, /none or l2/);
  assert.match(announceConfig(flags({ hostName: "lb-9" })) as string, /must list this host/);
  assert.match(announceConfig(flags({ deadAfterMs: "300" })) as string, /2 × --heartbeat-ms/);
  assert.match(announceConfig(flags({ quorum: "3" })) as string, /--quorum must be 1\.\.2/);
  const { interface: _, ...noIf } = flags({});
  assert.match(announceConfig(noIf) as string, /needs --interface/);
});
