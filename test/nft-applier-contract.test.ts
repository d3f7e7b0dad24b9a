/**
 * The NftDriver contract at the controller level, run against the fake and — as root — against the real nft in a
 * throwaway namespace: full apply, incremental apply, drift → reconverge, adoption by a new
 * controller without a flush, missing table, refused transactions classified as
 * `nft_failed`. Plus the policy-routes adapter against the real `ip` (root only).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { readManifests } from "../src/cluster/manifest-files.ts";
import { FakeNft } from "../src/drivers/fake-nft.ts";
import { createPolicyRoutes } from "../src/drivers/ip-routes.ts";
import { createNftDriver, type NftDriver } from "../src/drivers/nft.ts";
import { type NftOp, nftScript, type Transaction, transaction } from "../src/drivers/nft-transaction.ts";
import { PasslbError } from "../src/errors.ts";
import type { HealthState } from "../src/forwarding/forwarding-state.ts";
import { realClock } from "../src/health/clock.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { LbController } from "../src/lb-host/nftables/lb-controller.ts";
import { createNftGenerationWatch } from "../src/lb-host/nftables/nft-generation.ts";
import { encapRouteSpec, forwardFromFlags } from "../src/lb-host/routing/encap.ts";
import { RULE_PREF } from "../src/lb-host/routing/policy-routes.ts";
import { expectedRouting, routingDrift } from "../src/lb-host/routing/route-drift.ts";
import { kernelSkipReason, withNetns } from "./netns.ts";
import { assertSameTable } from "./nft-table-assert.ts";

const skip = kernelSkipReason();
const SET_FLUSH: NftOp = { verb: "flush", object: { kind: "set", name: "s" } };

class Recording implements NftDriver {
  readonly scripts: string[] = [];
  constructor(readonly inner: NftDriver) {}
  run(tx: Transaction) {
    this.scripts.push(nftScript(tx));
    return this.inner.run(tx);
  }
  check(tx: Transaction) {
    return this.inner.check(tx);
  }
  dump(table: string, options?: { terse?: boolean }) {
    return this.inner.dump(table, options);
  }
  counters(table: string) {
    return this.inner.counters(table);
  }
}

async function snapshot() {
  const read = await readManifests(
    [
      "test/fixtures/nft/_base",
      "test/fixtures/nft/cluster-ranges/input.yaml",
      "test/fixtures/nft/local-zonal-affinity/input.yaml",
    ],
    async () => "",
  );
  return decodeDocuments(read.documents).snapshot;
}

function controllerFor(nft: NftDriver, states: Map<string, HealthState>) {
  return new LbController({
    table: "passlb",
    seed: 3,
    nft,
    health: {
      lookup: (_s, _c, node) => ({ state: states.get(node) ?? "unknown" }),
      subscribe: () => () => {},
    },
    clock: realClock(),
    driftCheckMs: 0,
  });
}

async function contract(make: () => NftDriver) {
  const nft = new Recording(make());
  assert.equal(await nft.dump("passlb"), undefined, "no table yet");
  const states = new Map<string, HealthState>();
  const c = controllerFor(nft, states);
  await c.start();
  c.setSnapshot(await snapshot(), false, false);
  // full
  assert.equal((await c.syncOnce()).kind, "ok");
  assertSameTable(await nft.dump("passlb"), c.current!);
  // one named counter per node mark, read back with packets and bytes
  const counters = await nft.counters("passlb");
  assert.ok(counters.size > 0);
  assert.deepEqual([...counters.keys()].sort(), [...(c.current!.counters ?? [])].sort());
  for (const [name, v] of counters) assert.ok(v.packets >= 0 && v.bytes >= 0, name);
  // incremental: only elements
  states.set("node-a1", "unhealthy");
  const inc = await c.syncOnce();
  assert.equal(inc.kind === "ok" && inc.mode, "incremental");
  assert.doesNotMatch(nft.scripts.at(-1)!, /table/);
  assertSameTable(await nft.dump("passlb"), c.current!);
  // drift: someone flushes the table → detected → full sync converges
  await nft.inner.run(transaction("passlb", [{ verb: "flush", object: { kind: "table" } }]));
  assert.match((await c.checkDrift()) ?? "", /rules changed/);
  const healed = await c.syncOnce();
  assert.equal(healed.kind === "ok" && healed.mode, "full");
  assertSameTable(await nft.dump("passlb"), c.current!);
  assert.equal(await c.checkDrift(), undefined);
  // drift: someone flushes one map (every new connection to a VIP fails) → the next check
  await nft.inner.run(transaction("passlb", [{ verb: "flush", object: { kind: "map", name: "dispatch4" } }]));
  assert.match((await c.checkDrift()) ?? "", /^set dispatch4 has 0 elements, not \d+$/);
  assert.equal((await c.syncOnce()).kind, "ok");
  assertSameTable(await nft.dump("passlb"), c.current!);
  assert.equal(await c.checkDrift(), undefined);
  await c.stop();
  // adoption: a new controller sends nothing for the same input, then only updates
  const before = nft.scripts.length;
  const next = controllerFor(nft, states);
  await next.start();
  next.setSnapshot(await snapshot(), false, false);
  assert.deepEqual(await next.syncOnce(), { kind: "ok", mode: "noop", bytes: 0 });
  assert.equal(nft.scripts.length, before);
  states.delete("node-a1");
  const after = await next.syncOnce();
  assert.equal(after.kind === "ok" && after.mode, "incremental");
  assertSameTable(await nft.dump("passlb"), next.current!);
  await next.stop();
  // refused transactions are nft_failed and change nothing
  await assert.rejects(
    nft.run(
      transaction("passlb", [
        { verb: "add", object: { kind: "element", set: "nosuch", elements: [{ key: "1" }] } },
      ]),
    ),
    (e: unknown) => {
      assert.ok(e instanceof PasslbError);
      assert.equal(e.code, "nft_failed");
      return true;
    },
  );
  assertSameTable(await nft.dump("passlb"), next.current!);
}

test("applier contract: fake", async () => {
  await contract(() => new FakeNft());
});

test("applier contract: real nft in a namespace", async (t) => {
  if (skip) return t.skip(skip);
  await withNetns("ctr", (ns) => contract(() => createNftDriver({ netns: ns })));
});

test("a missing nft binary is nft_unavailable", async () => {
  const nft = createNftDriver({ nft: "/nonexistent/plb-nft" });
  await assert.rejects(
    nft.run(transaction("passlb", [{ verb: "add", object: { kind: "table" } }])),
    (e: unknown) => {
      assert.ok(e instanceof PasslbError);
      assert.equal(e.code, "nft_unavailable");
      return true;
    },
  );
});

test("policy routes: rules and routes per node mark; stale ones removed", async (t) => {
  if (skip) return t.skip(skip);
  await withNetns("rt", async (ns) => {
    const ip = (...args: string[]) => execFileSync("ip", ["-n", ns, ...args], { encoding: "utf8" });
    ip("link", "add", "plbv0", "type", "veth", "peer", "name", "plbv1");
    ip("link", "set", "plbv0", "up");
    ip("link", "set", "plbv1", "up");
    ip("addr", "add", "198.51.100.1/24", "dev", "plbv0");
    ip("addr", "add", "fd00:198:51:100::1/64", "dev", "plbv0", "nodad");
    const routes = createPolicyRoutes({ netns: ns });
    const a = { family: 4 as const, mark: 0x5a000001, via: "198.51.100.11" };
    const b = { family: 4 as const, mark: 0x5a000002, via: "198.51.100.12" };
    const c = { family: 6 as const, mark: 0x5a800001, via: "fd00:198:51:100::11" };
    await routes.sync([a, b, c]);
    await routes.sync([a, b, c]); // idempotent
    // node rules: `fwmark M lookup M`, inside passlb's preferences (the rule tree's leaves)
    const nodeRules = (fam: "-4" | "-6") =>
      ip(fam, "rule", "show")
        .split("\n")
        .filter((l) => /^31\d\d:\s+from all fwmark 0x5a[0-9a-f]{6} lookup \d+/.test(l));
    assert.equal(nodeRules("-4").length, 2);
    assert.match(ip("-4", "route", "show", "table", String(b.mark)), /default via 198\.51\.100\.12/);
    assert.match(ip("-6", "route", "show", "table", String(c.mark)), /default via fd00:198:51:100::11/);
    // the kernel's own rule walk: a marked packet reaches its node's table, an unmarked one main
    assert.match(
      ip("-4", "route", "get", "203.0.113.9", "mark", `0x${b.mark.toString(16)}`),
      /via 198\.51\.100\.12/,
    );
    assert.match(
      ip("-6", "route", "get", "fd00:10::9", "mark", `0x${c.mark.toString(16)}`),
      /via fd00:198:51:100::11/,
    );
    assert.doesNotMatch(ip("-4", "route", "get", "198.51.100.99"), /via/);
    await routes.sync([a]);
    assert.equal(nodeRules("-4").length, 1);
    assert.equal(
      ip("-6", "rule", "show")
        .split("\n")
        .filter((l) => /^31\d\d:/.test(l)).length,
      0,
    );
    assert.equal(ip("-4", "route", "show", "table", String(b.mark)).trim(), "");
    // read back for the drift check: as installed, then someone deletes a rule and a table
    await routes.sync([a, b, c]);
    const want = expectedRouting([a, b, c]);
    assert.equal(routingDrift(want, await routes.read(want.tables)), undefined);
    ip("-4", "rule", "del", "pref", String(RULE_PREF + 3), "fwmark", `0x${b.mark.toString(16)}`);
    assert.equal(
      routingDrift(want, await routes.read(want.tables)),
      `policy rule missing (ipv4 rule pref ${RULE_PREF + 3} fwmark 0x${b.mark.toString(16)} table ${b.mark})`,
    );
    await routes.sync([a, b, c]);
    ip("-6", "route", "flush", "table", String(c.mark));
    assert.match(routingDrift(want, await routes.read(want.tables)) ?? "", /^route missing \(ipv6 table/);
    await routes.sync([a, b, c]);
    assert.equal(routingDrift(want, await routes.read(want.tables)), undefined);
  });
});

test("policy routes: the rule tree over many marks, the overflow past its groups, and an upgrade from flat rules", async (t) => {
  if (skip) return t.skip(skip);
  await withNetns("rtt", async (ns) => {
    const ip = (...args: string[]) => execFileSync("ip", ["-n", ns, ...args], { encoding: "utf8" });
    ip("link", "add", "plbv0", "type", "veth", "peer", "name", "plbv1");
    ip("link", "set", "plbv0", "up");
    ip("link", "set", "plbv1", "up");
    ip("addr", "add", "198.51.100.1/24", "dev", "plbv0");
    // marks in groups 0, 1 and the last (94), and past the groups' room (overflow)
    const indexes = [1, 2, 63, 64, 65, 130, 6079, 6080, 9000];
    const route = (i: number) => ({
      family: 4 as const,
      mark: (0x5a000000 | i) >>> 0,
      via: `198.51.100.${10 + (i % 200)}`,
    });
    const all = indexes.map(route);
    // what an earlier passlb left: one flat rule per mark at RULE_PREF, tables filled
    for (const r of all) {
      ip("-4", "route", "replace", "default", "via", r.via, "table", String(r.mark));
      ip(
        "-4",
        "rule",
        "add",
        "pref",
        String(RULE_PREF),
        "fwmark",
        `0x${r.mark.toString(16)}`,
        "table",
        String(r.mark),
      );
    }
    const routes = createPolicyRoutes({ netns: ns });
    await routes.sync(all);
    const ours = () =>
      ip("-4", "rule", "show")
        .split("\n")
        .filter((l) => /^3[01]\d\d:/.test(l) && Number(l.split(":")[0]) < RULE_PREF + 100);
    assert.ok(!ours().some((l) => l.startsWith(`${RULE_PREF}:\tfrom all fwmark`)), "the flat rules are gone");
    assert.ok(
      ours().some((l) => l.startsWith(`${RULE_PREF + 98}:`)),
      "marks past the groups sit in the overflow",
    );
    // the kernel's rule walk sends every mark to its own table, and an unmarked lookup to main
    for (const r of all)
      assert.match(
        ip("-4", "route", "get", "203.0.113.9", "mark", `0x${r.mark.toString(16)}`),
        new RegExp(`via ${r.via.replaceAll(".", "\\.")} `),
        `mark 0x${r.mark.toString(16)}`,
      );
    assert.doesNotMatch(ip("-4", "route", "get", "198.51.100.250"), /via/);
    const want = expectedRouting(all);
    assert.equal(routingDrift(want, await routes.read(want.tables)), undefined);
    // dropping the overflow marks turns the miss jump back to the end
    const fewer = all.filter((r) => (r.mark & 0xffff) < 6080);
    await routes.sync(fewer);
    assert.ok(!ours().some((l) => l.startsWith(`${RULE_PREF + 98}:`)));
    assert.equal(ip("-4", "route", "show", "table", String(route(9000).mark)).trim(), "");
    for (const r of fewer)
      assert.match(
        ip("-4", "route", "get", "203.0.113.9", "mark", `0x${r.mark.toString(16)}`),
        new RegExp(`via ${r.via.replaceAll(".", "\\.")} `),
      );
    const wantFewer = expectedRouting(fewer);
    assert.equal(routingDrift(wantFewer, await routes.read(wantFewer.tables)), undefined);
    await routes.sync([]);
    assert.deepEqual(ours(), []);
  });
});

test("nft generation watch: unknown until the monitor has seen a commit, then moves with each", async (t) => {
  if (skip) return t.skip(skip);
  await withNetns("gen", async (ns) => {
    const watch = createNftGenerationWatch({ netns: ns, restartMs: 50 });
    t.after(() => watch.close());
    const nft = createNftDriver({ netns: ns });
    assert.equal(watch.token(), undefined);
    const until = async (ok: () => boolean) => {
      for (let i = 0; i < 200 && !ok(); i++) {
        await nft.run(
          transaction("plbgen", [
            { verb: "add", object: { kind: "table" } },
            { verb: "add", object: { kind: "set", name: "s", decl: "type mark;" } },
            SET_FLUSH,
            { verb: "add", object: { kind: "element", set: "s", elements: [{ key: String(i + 1) }] } },
          ]),
        );
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await until(() => watch.token() !== undefined); // the monitor subscribes a moment after its start
    const first = watch.token()!;
    await nft.run(transaction("plbgen", [SET_FLUSH]));
    for (let i = 0; i < 200 && watch.token() === first; i++) await new Promise((r) => setTimeout(r, 10));
    assert.notEqual(watch.token(), first, "a flush by hand moves the generation");
    const second = watch.token();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(watch.token(), second, "no commit, no change");
  });
});

test("policy routes, encap: the tunnel device, VIP routes per node table, a path change cleans up", async (t) => {
  if (skip) return t.skip(skip);
  await withNetns("rte", async (ns) => {
    const ip = (...args: string[]) => execFileSync("ip", ["-n", ns, ...args], { encoding: "utf8" });
    ip("link", "add", "plbv0", "type", "veth", "peer", "name", "plbv1");
    ip("link", "set", "plbv0", "up");
    ip("link", "set", "plbv1", "up");
    ip("addr", "add", "198.51.100.1/24", "dev", "plbv0");
    ip("addr", "add", "fd00:198:51:100::1/64", "dev", "plbv0", "nodad");
    const forward = forwardFromFlags({ forward: "encap", direct: ["198.51.100.0/26"] });
    assert.ok(typeof forward !== "string");
    const routes = createPolicyRoutes({ netns: ns, forward });
    const spec4 = (node: string) => encapRouteSpec({ kind: "vxlan-gpe", port: 4790, mtu: 1500 }, 4, node);
    const routed = {
      family: 4 as const,
      mark: 0x5a000001,
      via: "198.51.100.65",
      encap: { vips: ["203.0.113.1", "203.0.113.2"], spec: spec4("198.51.100.65") },
    };
    const direct = { family: 4 as const, mark: 0x5a000002, via: "198.51.100.11" };
    const routed6 = {
      family: 6 as const,
      mark: 0x5a800001,
      via: "fd00:198:51:101::1",
      encap: {
        vips: ["fd00:10::1"],
        spec: encapRouteSpec({ kind: "vxlan-gpe", port: 4790, mtu: 1500 }, 6, "fd00:198:51:101::1"),
      },
    };
    await routes.sync([routed, direct, routed6]);
    await routes.sync([routed, direct, routed6]); // idempotent
    assert.match(ip("-d", "link", "show", "plbvg0"), /vxlan external .*dstport 4790 .*gpe/);
    const t1 = ip("-4", "route", "show", "table", String(routed.mark));
    assert.match(t1, /^203\.0\.113\.1 +encap ip id 0 .*dst 198\.51\.100\.65 .*dev plbvg0 .*mtu 1464/m);
    assert.match(t1, /^203\.0\.113\.2 /m);
    assert.doesNotMatch(t1, /^default/m);
    assert.match(ip("-4", "route", "show", "table", String(direct.mark)), /^default via 198\.51\.100\.11/m);
    assert.match(
      ip("-6", "route", "show", "table", String(routed6.mark)),
      /^fd00:10::1 +encap ip6 id 0 .*dst fd00:198:51:101::1 .*dev plbvg0 .*mtu 1444/m,
    );
    // a VIP leaves, the routed node becomes a neighbour, the direct one is encapsulated
    await routes.sync([
      { family: 4, mark: routed.mark, via: "198.51.100.65" },
      { ...direct, encap: { vips: ["203.0.113.2"], spec: spec4("198.51.100.11") } },
    ]);
    assert.equal(
      ip("-4", "route", "show", "table", String(routed.mark)).trim(),
      "default via 198.51.100.65 dev plbv0",
    );
    assert.match(
      ip("-4", "route", "show", "table", String(direct.mark)),
      /^203\.0\.113\.2 +encap ip .*dst 198\.51\.100\.11/m,
    );
    assert.doesNotMatch(ip("-4", "route", "show", "table", String(direct.mark)), /default/);
    assert.equal(ip("-6", "route", "show", "table", String(routed6.mark)).trim(), "");
    // a deleted device comes back on the next sync
    ip("link", "del", "plbvg0");
    await routes.sync([{ ...direct, encap: { vips: ["203.0.113.2"], spec: spec4("198.51.100.11") } }]);
    assert.match(ip("link", "show", "plbvg0"), /UP/);
  });
});
