import assert from "node:assert/strict";
import { test } from "node:test";
import { fastPathView } from "./fast-path-view.ts";

const t = (packets: number) => ({ packets, bytes: packets * 100 });

test("fastPathView groups the program's reasons: forwarded, handed to the stack, dropped", () => {
  const v = fastPathView(
    "xdp",
    {
      services: new Map(),
      nodes: new Map([
        ["node-b", t(5)],
        ["node-a", t(9)],
      ]),
      reasons: new Map([
        ["fwd_tx", t(4)],
        ["fwd_redirect", t(10)],
        ["pass_not_vip", t(6)],
        ["pass_node", t(2)],
        ["drop_source", t(1)],
        ["drop_no_nodes", t(0)],
        ["flow_new", t(3)],
        ["syn_rate", t(0)],
      ]),
      flows: { entries: new Map([["IPv6", 50] as const]), capacity: 1000, evictions: 7 },
    },
    Date.UTC(2026, 11, 2, 22, 0, 0),
  );
  assert.deepEqual(v.forwarded, t(14));
  assert.deepEqual(v.handedToStack, t(8));
  assert.deepEqual(v.dropped, t(1));
  assert.deepEqual(
    v.reasons.map((r) => r.reason),
    ["fwd_redirect", "pass_not_vip", "fwd_tx", "flow_new", "pass_node", "drop_source"],
    "only reasons with packets, most first",
  );
  assert.deepEqual(v.flows, {
    entries: { IPv4: 0, IPv6: 50 },
    capacity: 1000,
    occupancy: 0.05,
    evictions: 7,
  });
  assert.deepEqual(
    v.nodes.map((n) => n.node),
    ["node-a", "node-b"],
  );
  assert.equal(v.readAt, "2026-12-02T22:00:00.000Z");
});

test("fastPathView without a flow-table read has no flows", () => {
  const v = fastPathView("xdp", { services: new Map(), nodes: new Map(), reasons: new Map() }, 0);
  assert.equal(v.flows, null);
  assert.deepEqual(v.forwarded, { packets: 0, bytes: 0 });
});
