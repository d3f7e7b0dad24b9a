import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { NFT_FIXTURE_NODES, nftFixturePlans } from "../../../../test/support/nft-fixture-plans.ts";
import { FakeNft } from "../../../drivers/fake-nft.ts";
import { type HealthState, serviceForwarding } from "../../../forwarding/forwarding-state.ts";
import { desiredNftState, intervalElements } from "./desired-state.ts";
import { emptyNftState, type NftState } from "./nft-state.ts";
import { renderElementUpdates, renderRuleset } from "./render-ruleset.ts";

function sameTable(observed: NftState | undefined, desired: NftState): void {
  assert.ok(observed);
  assert.deepEqual([...observed.sets.keys()].sort(), [...desired.sets.keys()].sort());
  for (const [name, s] of desired.sets)
    assert.deepEqual(
      new Map([...observed.sets.get(name)!.elements].sort()),
      new Map([...s.elements].sort()),
      name,
    );
  assert.deepEqual(
    [...observed.chains.values()].map((c) => [c.name, c.ruleCount, c.hash]).sort(),
    [...desired.chains.values()].map((c) => [c.name, c.ruleCount, c.hash]).sort(),
  );
}

test("property: applying the incremental diff to the previous table yields exactly the next desired table", async () => {
  const { plans: ps, zones } = await nftFixturePlans();
  const states = fc.constantFrom<HealthState>("healthy", "unhealthy", "unknown");
  const step = fc.record({
    health: fc.tuple(states, states, states),
    weight: fc.integer({ min: 0, max: 4 }),
  });
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 6 }), async (steps) => {
      const nft = new FakeNft();
      const desiredFor = (s: (typeof steps)[number], previous: NftState) =>
        desiredNftState({
          table: "passlb",
          seed: 9,
          zones,
          previous,
          forwardings: ps.map((p) =>
            serviceForwarding(
              p,
              (_svc, _check, node) => ({
                state: s.health[NFT_FIXTURE_NODES.indexOf(node)]!,
                weight: s.weight,
              }),
              { seed: 9, sizeFor: () => 31 },
            ),
          ),
        });
      let current = desiredFor(steps[0]!, emptyNftState("passlb"));
      await nft.run(renderRuleset(current));
      sameTable(await nft.dump("passlb"), current);
      for (const s of steps.slice(1)) {
        const next = desiredFor(s, current);
        await nft.run(renderElementUpdates(current, next));
        sameTable(await nft.dump("passlb"), next);
        assert.deepEqual(renderElementUpdates(next, next).ops, []);
        current = next;
      }
    }),
    { seed: 20261130, numRuns: 60 },
  );
});

test("interval sets: covered prefixes collapse, host prefixes print as addresses, other families drop", () => {
  assert.deepEqual(
    [
      ...intervalElements(
        ["10.0.0.0/8", "10.1.0.0/16", "192.0.2.7/32", "192.0.2.7", "fd00::/8", "10.0.0.1/8"],
        4,
      ).keys(),
    ],
    ["10.0.0.0/8", "192.0.2.7"],
  );
  assert.deepEqual(
    [...intervalElements(["fd00::/8", "fd00:1::/64", "2001:db8::1/128"], 6).keys()],
    ["2001:db8::1", "fd00::/8"],
  );
});
