import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { NFT_FIXTURE_NODES, nftFixturePlans } from "../../../../test/support/nft-fixture-plans.ts";
import { FakeNft } from "../../../drivers/fake-nft.ts";
import {
  type HealthState,
  type ServiceForwarding,
  serviceForwarding,
} from "../../../forwarding/forwarding-state.ts";
import { createDesiredCache, desiredNftState, desiredNftUpdate } from "./desired-state.ts";
import { emptyNftState, type NftState, slotContentKey } from "./nft-state.ts";
import { renderElementUpdates, renderRuleset } from "./render-ruleset.ts";

/** The table with slot-map names replaced by their contents: equal meaning, any naming. */
function meaning(state: NftState) {
  const contentOf = new Map<string, string>();
  const sets: [string, string[]][] = [];
  const maps: string[] = [];
  for (const s of state.sets.values()) {
    const elements = [...s.elements].map(([k, v]) => `${k}=${v}`);
    if (/^m\d+$/.test(s.name)) {
      const marks = new Uint32Array(s.elements.size);
      for (const [k, v] of s.elements) marks[Number(k)] = Number(v);
      contentOf.set(s.name, slotContentKey(marks));
      maps.push(slotContentKey(marks));
    } else sets.push([s.name, elements.sort()]);
  }
  const chains = [...state.chains.values()].map((c) => [
    c.name,
    (c.rules ?? []).map((r) => r.replace(/@(m\d+)/g, (_, m: string) => `@<${contentOf.get(m)}>`)),
  ]);
  return { sets: sets.sort(), maps: maps.sort(), chains: chains.sort() };
}

test("property: the incremental pass (cache) means the same table as a pass from nothing, and its touched-only diff gets the kernel there", async () => {
  const { plans, zones } = await nftFixturePlans();
  const states = fc.constantFrom<HealthState>("healthy", "unhealthy", "unknown");
  const step = fc.record({
    health: fc.tuple(states, states, states),
    weight: fc.integer({ min: 0, max: 3 }),
    // per Service: 0 = absent, 1 = the step's health, 2 = keep last step's forwarding
    mode: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: plans.length, maxLength: plans.length }),
  });
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 2, maxLength: 7 }), async (steps) => {
      const cache = createDesiredCache();
      const nft = new FakeNft();
      let current = emptyNftState("passlb");
      let last = new Map<string, ServiceForwarding>();
      let first = true;
      for (const s of steps) {
        const forwardings: ServiceForwarding[] = [];
        plans.forEach((p, i) => {
          const mode = s.mode[i]!;
          if (mode === 0) return;
          const kept = last.get(p.service);
          forwardings.push(
            mode === 2 && kept
              ? kept
              : serviceForwarding(
                  p,
                  (_svc, _check, node) => ({
                    state: s.health[NFT_FIXTURE_NODES.indexOf(node)]!,
                    weight: s.weight,
                  }),
                  { seed: 9, sizeFor: () => 31 },
                ),
          );
        });
        last = new Map(forwardings.map((f) => [f.service, f]));
        const input = { table: "passlb", seed: 9, zones, previous: current, forwardings };
        const update = desiredNftUpdate({ ...input, cache });
        assert.deepEqual(meaning(update.state), meaning(desiredNftState(input)));
        if (first) assert.equal(update.touched, undefined, "the first pass has nothing to be incremental to");
        else assert.ok(update.touched, "a pass on top of the cache's last output reports what it touched");
        await nft.run(
          first ? renderRuleset(update.state) : renderElementUpdates(current, update.state, update.touched),
        );
        const observed = (await nft.dump("passlb"))!;
        assert.deepEqual([...observed.sets.keys()].sort(), [...update.state.sets.keys()].sort());
        for (const [name, set] of update.state.sets)
          assert.deepEqual(
            [...observed.sets.get(name)!.elements].sort(),
            [...set.elements].sort(),
            `elements of ${name}`,
          );
        assert.deepEqual(
          [...observed.chains.values()].map((c) => `${c.name} ${c.hash}`).sort(),
          [...update.state.chains.values()].map((c) => `${c.name} ${c.hash}`).sort(),
        );
        current = update.state;
        first = false;
      }
    }),
    { seed: 20261130, numRuns: 80 },
  );
});

test("a pass where nothing changed returns the previous state itself and touches nothing", async () => {
  const { plans, zones } = await nftFixturePlans();
  const cache = createDesiredCache();
  const forwardings = plans.map((p) => serviceForwarding(p, () => ({ state: "healthy" }), { seed: 9 }));
  const input = { table: "passlb", seed: 9, zones, forwardings, cache };
  const a = desiredNftUpdate({ ...input, previous: emptyNftState("passlb") });
  const b = desiredNftUpdate({ ...input, previous: a.state });
  assert.equal(b.state, a.state);
  assert.deepEqual([b.touched?.sets.size, b.touched?.chains.size], [0, 0]);
  // a previous state that is not the cache's last output: built from nothing again
  const c = desiredNftUpdate({ ...input, previous: { ...a.state } });
  assert.equal(c.touched, undefined);
  assert.deepEqual(meaning(c.state), meaning(a.state));
});

test("a health flip changes slot maps only: every chain, dispatch entry and counter stays the object it was", async () => {
  const { plans, zones } = await nftFixturePlans();
  const cache = createDesiredCache();
  const down = new Set<string>();
  const forwardingsNow = () =>
    plans.map((p) =>
      serviceForwarding(p, (_s, _c, node) => ({ state: down.has(node) ? "unhealthy" : "healthy" }), {
        seed: 9,
        sizeFor: () => 31,
      }),
    );
  const plain = { table: "passlb", seed: 9, zones };
  const base = { ...plain, cache };
  const a = desiredNftUpdate({ ...base, forwardings: forwardingsNow(), previous: emptyNftState("passlb") });
  down.add(NFT_FIXTURE_NODES[1]!);
  const b = desiredNftUpdate({ ...base, forwardings: forwardingsNow(), previous: a.state });
  assert.ok(b.touched && b.touched.sets.size > 0, "some slot map changed");
  for (const name of b.touched.sets) assert.match(name, /^m\d+$/, `only slot maps are touched, not ${name}`);
  for (const [name, chain] of a.state.chains)
    if (b.state.chains.get(name) !== chain)
      assert.ok(b.touched.chains.has(name), `${name} rebuilt untouched`);
  // a chain is visited by the diff only when its rules changed (a slot map got another name)
  for (const name of b.touched.chains)
    assert.notEqual(
      b.state.chains.get(name)?.hash,
      a.state.chains.get(name)?.hash,
      `${name} touched, unchanged`,
    );
  assert.equal(b.state.counters, a.state.counters);
  assert.equal(b.state.sets.get("dispatch4"), a.state.sets.get("dispatch4"));
  assert.equal(b.state.sets.get("dispatch6"), a.state.sets.get("dispatch6"));
  // and the same table as building it from nothing
  assert.deepEqual(
    meaning(b.state),
    meaning(desiredNftState({ ...plain, forwardings: forwardingsNow(), previous: a.state })),
  );
});
