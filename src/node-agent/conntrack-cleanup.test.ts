/**
 * What the agent deletes from conntrack after a sync (kube-proxy's CleanStaleEntries,
 * narrowed to endpoints that went away): pod replaced on another node or the same node,
 * a gap with no endpoint, TCP never, failures asked for again, and the bound.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import type { AgentRule } from "./agent-rules.ts";
import { EMPTY_CONNTRACK_MEMORY, rememberFailed, staleConntrackEntries } from "./conntrack-cleanup.ts";

function rule(serving: string[], change: Partial<AgentRule> = {}): AgentRule {
  return {
    service: "demo/dns",
    listener: "UDP/53",
    family: "IPv4",
    vip: "203.0.113.5",
    protocol: "udp",
    port: 53,
    policy: "Cluster",
    sourceRanges: null,
    pick: "random",
    targets: serving.map((address) => ({ address, port: 5353, remote: false, target: undefined })),
    noEndpoints: serving.length === 0,
    serving,
    terminatingFallback: false,
    ...change,
  };
}

const replySources = (rules: AgentRule[][]) => {
  let memory = EMPTY_CONNTRACK_MEMORY;
  return rules.map((r) => {
    const out = staleConntrackEntries(memory, r);
    memory = out.next;
    return out.deletions.map((d) => `${d.origDst}:${d.origPortDst}<-${d.replySrc}`);
  });
};

test("a replaced pod's entries are deleted once, with the VIP, port and old address", () => {
  assert.deepEqual(
    replySources([[rule(["198.51.100.200"])], [rule(["198.51.100.201"])], [rule(["198.51.100.201"])]]),
    [[], ["203.0.113.5:53<-198.51.100.200"], []],
  );
  const { deletions } = staleConntrackEntries(
    staleConntrackEntries(EMPTY_CONNTRACK_MEMORY, [rule(["fd00::1"], { family: "IPv6", vip: "fd00:10::5" })])
      .next,
    [rule(["fd00::2"], { family: "IPv6", vip: "fd00:10::5", protocol: "sctp" })],
  );
  assert.deepEqual(deletions, [], "another protocol is another listener");
});

test("a gap without endpoints: nothing deleted then, the old pod's entries once a new one serves", () => {
  assert.deepEqual(
    replySources([[rule(["198.51.100.200"])], [rule([])], [rule([])], [rule(["198.51.100.201"])]]),
    [[], [], [], ["203.0.113.5:53<-198.51.100.200"]],
  );
});

test("serving counts, not the policy's choice: a terminating serving pod keeps its flows", () => {
  const before = rule(["198.51.100.200", "198.51.100.201"]);
  const after = rule(["198.51.100.200", "198.51.100.201"], {
    targets: [],
    noEndpoints: false,
    policy: "Local",
  });
  assert.deepEqual(replySources([[before], [after]]), [[], []]);
});

test("TCP listeners are never cleaned", () => {
  assert.deepEqual(
    replySources([
      [rule(["198.51.100.200"], { protocol: "tcp" })],
      [rule(["198.51.100.201"], { protocol: "tcp" })],
    ]),
    [[], []],
  );
});

test("failed deletions are asked for again on the next sync", () => {
  const first = staleConntrackEntries(EMPTY_CONNTRACK_MEMORY, [rule(["198.51.100.200"])]);
  const second = staleConntrackEntries(first.next, [rule(["198.51.100.201"])]);
  assert.equal(second.deletions.length, 1);
  const kept = rememberFailed(second.next, second.deletions);
  const third = staleConntrackEntries(kept, [rule(["198.51.100.201"])]);
  assert.deepEqual(
    third.deletions.map((d) => d.replySrc),
    ["198.51.100.200"],
  );
  assert.deepEqual(staleConntrackEntries(third.next, [rule(["198.51.100.201"])]).deletions, []);
});

test("bound: deletions are exactly the serving addresses that went away, per UDP listener", () => {
  const addr = fc.integer({ min: 1, max: 30 }).map((n) => `198.51.100.${n}`);
  fc.assert(
    fc.property(fc.uniqueArray(addr), fc.uniqueArray(addr), (a, b) => {
      const first = staleConntrackEntries(EMPTY_CONNTRACK_MEMORY, [rule(a)]);
      const { deletions } = staleConntrackEntries(first.next, [rule(b)]);
      const gone = b.length === 0 ? [] : a.filter((x) => !b.includes(x));
      assert.deepEqual(deletions.map((d) => d.replySrc).sort(), [...gone].sort());
    }),
  );
});
