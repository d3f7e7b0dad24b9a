/**
 * `vipReadiness`, the one readiness rule both engines take (announcer.ts): programmed with
 * the current generation (the last pass succeeded, the Service programmed with the VIP),
 * a listener with a healthy backend (fail-open counts as none), not kept at its last good
 * state, not stopping; a VIP several Services share is ready when any of them is.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ServiceForwarding } from "../forwarding/forwarding-state.ts";
import { type PlannedVips, type ReadinessInput, vipReadiness } from "./announcer.ts";

/** A programmed Service: only the fields readiness reads. */
function programmed(service: string, vips: string[], listeners: { nodes: string[]; failOpen?: boolean }[]) {
  return {
    service,
    plan: { vips: vips.map((address) => ({ address, family: address.includes(":") ? "IPv6" : "IPv4" })) },
    listeners: listeners.map((l) => ({
      failOpen: l.failOpen ?? false,
      backends: l.nodes.map((node) => ({ node })),
    })),
  } as unknown as ServiceForwarding;
}

const planned: PlannedVips[] = [
  {
    service: "a/web",
    vips: [
      { address: "203.0.113.10", family: "IPv4" },
      { address: "fd00:10::10", family: "IPv6" },
    ],
  },
  { service: "a/dns", vips: [{ address: "203.0.113.10", family: "IPv4" }] },
  { service: "a/new", vips: [{ address: "203.0.113.11", family: "IPv4" }] },
];

const input = (over: Partial<ReadinessInput>): ReadinessInput => ({
  planned,
  programmed: [],
  lastPassOk: true,
  kept: new Set(),
  stopping: false,
  ...over,
});

test("ready: programmed with the VIP and a listener with a healthy backend; one Service of a shared VIP is enough", () => {
  const r = vipReadiness(
    input({
      programmed: [
        programmed("a/web", ["203.0.113.10", "fd00:10::10"], [{ nodes: ["n1", "n2"] }]),
        programmed("a/dns", ["203.0.113.10"], [{ nodes: ["n1"], failOpen: true }]),
      ],
    }),
  );
  assert.deepEqual(
    r.map((x) => [x.vip, x.family, x.services, x.ready, x.reason, x.detail]),
    [
      ["203.0.113.10", "IPv4", ["a/web", "a/dns"], true, "ok", "a/web: 2 healthy node(s)"],
      [
        "203.0.113.11",
        "IPv4",
        ["a/new"],
        false,
        "not_programmed",
        "a/new is not programmed with this VIP yet",
      ],
      ["fd00:10::10", "IPv6", ["a/web"], true, "ok", "a/web: 2 healthy node(s)"],
    ],
  );
});

test("not ready: fail-open or no backend, a kept Service, a failed pass, stopping", () => {
  const one = planned.slice(0, 1);
  const failOpen = [
    programmed("a/web", ["203.0.113.10", "fd00:10::10"], [{ nodes: ["n1"], failOpen: true }]),
  ];
  const first = (over: Partial<ReadinessInput>) => vipReadiness(input({ planned: one, ...over }))[0]!;
  assert.deepEqual(
    [first({ programmed: failOpen }).reason, first({ programmed: failOpen }).detail],
    ["no_healthy_backend", "a/web: no healthy backend on any listener"],
  );
  const empty = [programmed("a/web", ["203.0.113.10"], [{ nodes: [] }])];
  assert.equal(first({ programmed: empty }).reason, "no_healthy_backend");
  const ok = [programmed("a/web", ["203.0.113.10"], [{ nodes: ["n1"] }])];
  assert.equal(first({ programmed: ok }).ready, true);
  assert.equal(first({ programmed: ok, kept: new Set(["a/web"]) }).reason, "kept_last_good");
  assert.deepEqual(
    [
      first({ programmed: ok, lastPassOk: false }).reason,
      first({ programmed: ok, lastPassOk: false }).detail,
    ],
    ["sync_failed", "the last data-plane sync failed"],
  );
  assert.ok(
    vipReadiness(input({ programmed: ok, stopping: true })).every((x) => !x.ready && x.reason === "stopping"),
  );
  // a Service programmed without this VIP (the plan moved it) does not make it ready
  const moved = [programmed("a/web", ["203.0.113.99"], [{ nodes: ["n1"] }])];
  assert.equal(first({ programmed: moved }).reason, "not_programmed");
});

test("nothing planned: nothing to announce; a VIP twice in the plans is listed once", () => {
  assert.deepEqual(vipReadiness(input({ planned: [] })), []);
  const twice: PlannedVips[] = [
    {
      service: "a/web",
      vips: [
        { address: "203.0.113.10", family: "IPv4" },
        { address: "203.0.113.10", family: "IPv4" },
      ],
    },
  ];
  assert.deepEqual(
    vipReadiness(input({ planned: twice })).map((x) => [x.vip, x.services]),
    [["203.0.113.10", ["a/web"]]],
  );
});
