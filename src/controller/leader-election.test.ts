import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  afterLeaseWrite,
  DEFAULT_ELECTION_TIMING,
  type ElectionConfig,
  type ElectorState,
  isLeading,
  type LeaseSpec,
  leaseStep,
  releasedLease,
} from "./leader-election.ts";

const T0 = Date.UTC(2026, 0, 1);
const cfg = (identity: string): ElectionConfig => ({ identity, ...DEFAULT_ELECTION_TIMING });

test("no Lease: create it and lead; renewals keep acquireTime and transitions", () => {
  const a = cfg("a");
  const first = leaseStep({}, undefined, T0, a);
  assert.equal(first.decision.action, "create");
  assert.ok(first.decision.action === "create");
  const spec = first.decision.spec;
  assert.equal(spec.holderIdentity, "a");
  assert.equal(spec.leaseDurationSeconds, 15);
  assert.equal(spec.renewTime, "2026-01-01T00:00:00.000000Z");
  let state = afterLeaseWrite(first.state, spec, T0, "ok");
  assert.ok(isLeading(state, T0, a));
  const renew = leaseStep(state, spec, T0 + 2000, a);
  assert.ok(renew.decision.action === "update" && !renew.decision.takeover);
  assert.equal(renew.decision.spec.acquireTime, spec.acquireTime);
  assert.equal(renew.decision.spec.leaseTransitions, 0);
  state = afterLeaseWrite(renew.state, renew.decision.spec, T0 + 2000, "ok");
  assert.ok(isLeading(state, T0 + 11_000, a));
  assert.ok(!isLeading(state, T0 + 12_000, a), "no renewal for the renew deadline: stop leading");
});

test("a follower waits while the record keeps changing, and takes over once it stops for the lease duration", () => {
  const b = cfg("b");
  let state: ElectorState = {};
  const held = (renewSec: number): LeaseSpec => ({
    holderIdentity: "a",
    leaseDurationSeconds: 15,
    acquireTime: "2026-01-01T00:00:00.000000Z",
    renewTime: `2026-01-01T00:00:${String(renewSec).padStart(2, "0")}.000000Z`,
    leaseTransitions: 3,
  });
  for (let t = 0; t <= 20; t += 2) {
    const step = leaseStep(state, held(t), T0 + t * 1000, b);
    assert.equal(step.decision.action, "wait");
    state = step.state;
  }
  // a dies after its renewal at 20 s: b saw that record at 20 s
  const early = leaseStep(state, held(20), T0 + 34_000, b);
  assert.ok(early.decision.action === "wait" && early.decision.expiresInMs === 1000);
  const late = leaseStep(early.state, held(20), T0 + 35_000, b);
  assert.ok(late.decision.action === "update" && late.decision.takeover);
  assert.equal(late.decision.spec.holderIdentity, "b");
  assert.equal(late.decision.spec.leaseTransitions, 4);
  assert.ok(!isLeading(late.state, T0 + 35_000, b), "not before the write succeeded");
  assert.ok(isLeading(afterLeaseWrite(late.state, late.decision.spec, T0 + 35_000, "ok"), T0 + 35_000, b));
  assert.ok(
    !isLeading(afterLeaseWrite(late.state, late.decision.spec, T0 + 35_000, "conflict"), T0 + 35_000, b),
  );
});

test("judged by the local clock: a holder's timestamps far in the past do not shorten the wait", () => {
  const b = cfg("b");
  const ancient: LeaseSpec = {
    holderIdentity: "a",
    leaseDurationSeconds: 15,
    renewTime: "1999-01-01T00:00:00.000000Z",
  };
  const step = leaseStep({}, ancient, T0, b);
  assert.ok(step.decision.action === "wait" && step.decision.expiresInMs === 15_000);
});

test("a released Lease is taken at once", () => {
  const b = cfg("b");
  const released = releasedLease({ holderIdentity: "a", leaseDurationSeconds: 15, leaseTransitions: 1 }, T0);
  const step = leaseStep({}, released, T0 + 10, b);
  assert.ok(step.decision.action === "update" && step.decision.takeover);
});

test("property: two electors sharing one Lease never both lead at the same instant", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({ who: fc.constantFrom(0, 1), gap: fc.integer({ min: 0, max: 6000 }), fail: fc.boolean() }),
        {
          maxLength: 60,
        },
      ),
      (steps) => {
        const configs = [cfg("a"), cfg("b")];
        const states: ElectorState[] = [{}, {}];
        let lease: LeaseSpec | undefined;
        let version = 0;
        let now = T0;
        for (const s of steps) {
          now += s.gap;
          const c = configs[s.who]!;
          const readVersion = version;
          const { state, decision } = leaseStep(states[s.who]!, lease, now, c);
          states[s.who] = state;
          if (decision.action !== "wait") {
            // a write may fail (API down): nothing changes
            if (s.fail) states[s.who] = afterLeaseWrite(state, decision.spec, now, "error");
            else if (readVersion === version) {
              lease = decision.spec;
              version++;
              states[s.who] = afterLeaseWrite(state, decision.spec, now, "ok");
            }
          }
          const leading = configs.filter((cc, i) => isLeading(states[i]!, now, cc));
          assert.ok(leading.length <= 1, `both lead at ${now - T0} ms`);
        }
      },
    ),
    { numRuns: 300 },
  );
});
