/**
 * The node agent's DNAT rules and their nft transaction (printed by nftScript), from a copy of examples/quickstart (quickstart.yaml, frozen here so the example can evolve) plus a few
 * extra objects (test/fixtures/lab/agent/extra.yaml): goldens per node, the eTP rules
 * spelled out, and — when root with nft — every golden accepted by `nft --check` in a
 * throwaway network namespace, and the fake nft's table equal to the kernel's.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { test } from "node:test";
import { readManifests } from "../../src/cluster/manifest-files.ts";
import { FakeNft } from "../../src/drivers/fake-nft.ts";
import { createNftDriver } from "../../src/drivers/nft.ts";
import { nftScript } from "../../src/drivers/nft-transaction.ts";
import { decodeDocuments } from "../../src/k8s/decode.ts";
import type { Snapshot } from "../../src/k8s/snapshot.ts";
import type { AgentRule } from "../../src/node-agent/agent-rules.ts";
import { agentRulesFromSnapshot } from "../../src/node-agent/agent-rules-snapshot.ts";
import { AGENT_TABLE, type AgentRulesetOptions, agentRuleset } from "../../src/node-agent/agent-ruleset.ts";
import { assertGolden } from "../golden.ts";

const FIXTURES = "test/fixtures/lab/agent";
const NODES = ["node-a1", "node-b2", "node-c1"];

/** the `nft -f` script of a ruleset (what the goldens hold) */
const script = (rules: readonly AgentRule[], options?: AgentRulesetOptions) =>
  nftScript(agentRuleset(rules, options));

async function snapshot(): Promise<Snapshot> {
  const read = await readManifests([`${FIXTURES}/quickstart.yaml`, `${FIXTURES}/extra.yaml`], async () => "");
  const decoded = decodeDocuments(read.documents);
  assert.deepEqual(decoded.problems, []);
  return decoded.snapshot;
}

test("agent rulesets per node match their goldens", async () => {
  const snap = await snapshot();
  for (const node of NODES) {
    const rules = agentRulesFromSnapshot(snap, node);
    assertGolden(`${FIXTURES}/${node}.rules.golden.json`, rules);
    assertGolden(`${FIXTURES}/${node}.golden.nft`, script(rules));
  }
});

test("Local uses only this node's endpoints and keeps the client address", async () => {
  const snap = await snapshot();
  const a1 = agentRulesFromSnapshot(snap, "node-a1").find((r) => r.service === "demo/web")!;
  assert.equal(a1.policy, "Local");
  assert.deepEqual(
    a1.targets.map((t) => t.address),
    ["203.0.113.65", "203.0.113.66", "203.0.113.67"],
  );
  assert.ok(
    a1.targets.every((t) => !t.remote),
    "Local never masquerades",
  );
  // node-c1's only web pod is not ready and not terminating: nothing to send to, so drop
  const c1 = agentRulesFromSnapshot(snap, "node-c1").find((r) => r.service === "demo/web")!;
  assert.deepEqual(c1.targets, []);
  assert.match(
    script([c1]),
    /^add chain inet passlb-agent listener-0\nadd rule inet passlb-agent listener-0 drop\n/m,
  );
});

test("Cluster spreads over every ready endpoint and masquerades the remote ones", async () => {
  const snap = await snapshot();
  const rules = agentRulesFromSnapshot(snap, "node-a2").filter((r) => r.service === "demo/tcp-echo");
  const v4 = rules.find((r) => r.family === "IPv4")!;
  assert.deepEqual(
    v4.targets.map((t) => [t.address, t.remote]),
    [
      ["203.0.113.72", false],
      ["203.0.113.73", true],
      ["203.0.113.74", true],
    ],
  );
  assert.equal(v4.pick, "client-ip", "ClientIP affinity hashes the client address");
  const v6 = rules.find((r) => r.family === "IPv6")!;
  assert.deepEqual(
    v6.targets.map((t) => t.address),
    ["fd00:203::48", "fd00:203::49"],
    "an IPv6 VIP uses IPv6 endpoints only",
  );
  const text = script(rules);
  assert.match(
    text,
    /^add element inet passlb-agent remote-endpoints4 \{ 203\.0\.113\.73, 203\.0\.113\.74 \}$/m,
  );
  assert.match(text, /jhash ip6 saddr mod 2 seed 0x706c62 map \{ 0 : \[fd00:203::48\] \. 9000/);
});

test("terminating endpoints are used when nothing else is left; source ranges drop others", async () => {
  const snap = await snapshot();
  const b2 = agentRulesFromSnapshot(snap, "node-b2");
  const drain = b2.find((r) => r.service === "demo/drain")!;
  assert.equal(drain.terminatingFallback, true);
  assert.deepEqual(
    drain.targets.map((t) => t.address),
    ["203.0.113.77"],
    "serving and terminating only; the non-serving one is never used",
  );
  const dns = b2.find((r) => r.service === "demo/dns")!;
  assert.deepEqual(dns.sourceRanges, ["192.0.2.0/24"]);
  assert.match(script([dns]), /ip saddr != \{ 192\.0\.2\.0\/24 \} drop/);
});

test("a large table: elements in chunks of 1024 per operation, each goto after its chain", async () => {
  const snap = await snapshot();
  const dns = agentRulesFromSnapshot(snap, "node-b2").find((r) => r.service === "demo/dns")!;
  // 1500 listeners on one VIP, ports 1..1500
  const many = Array.from({ length: 1500 }, (_, i) => ({ ...dns, port: i + 1 }));
  const ops = agentRuleset(many).ops;
  const sizes = (set: string) =>
    ops.flatMap((o) =>
      o.object.kind === "element" && o.object.set === set ? [o.object.elements.length] : [],
    );
  assert.deepEqual(sizes("served4"), [1024, 476]);
  assert.deepEqual(sizes("listeners4"), [1024, 476]);
  const lastChain = ops.findLastIndex((o) => o.object.kind === "chain");
  const firstGoto = ops.findIndex((o) => o.object.kind === "element" && o.object.set === "listeners4");
  assert.ok(lastChain < firstGoto, "the verdict elements come after every chain");
  const fake = new FakeNft();
  await fake.run(agentRuleset(many)); // refuses a goto to a missing chain or a rule's missing @set
  assert.equal((await fake.dump(AGENT_TABLE))?.sets.get("listeners4")?.elements.size, 1500);
});

test("nft --check accepts every golden ruleset (root with nft only)", async (t) => {
  const why = rootWithNft();
  if (why) return t.skip(why);
  const snap = await snapshot();
  const ns = `plbchk${process.pid}`;
  execFileSync("ip", ["netns", "add", ns]);
  t.after(() => spawnSync("ip", ["netns", "del", ns]));
  for (const node of NODES) {
    const text = script(agentRulesFromSnapshot(snap, node));
    const r = spawnSync("ip", ["netns", "exec", ns, "nft", "--check", "-f", "-"], { input: text });
    assert.equal(r.status, 0, `${node}: ${r.stderr}`);
  }
  // applying twice is the same as once (the table is replaced whole)
  const tx = agentRuleset(agentRulesFromSnapshot(snap, "node-a1"), { mss: { 4: 1424, 6: 1384 } });
  const real = createNftDriver({ netns: ns });
  for (let i = 0; i < 2; i++) await real.run(tx);
  const listed = execFileSync("ip", ["netns", "exec", ns, "nft", "list", "tables"], { encoding: "utf8" });
  assert.equal(listed.trim(), "table inet passlb-agent");
  // the fake applies the same operations to the same table: sets, elements, chains, rule counts
  const fake = new FakeNft();
  await fake.run(tx);
  assert.deepEqual(tableShape(await real.dump(AGENT_TABLE)), tableShape(await fake.dump(AGENT_TABLE)));
});

/** a dumped table less what the fake does not model (declarations, hook priorities by name) */
function tableShape(s: Awaited<ReturnType<FakeNft["dump"]>>): unknown {
  assert.ok(s, "the table exists");
  return {
    sets: [...s.sets.values()].map((x) => [x.name, x.isMap, [...x.elements].sort()]),
    chains: [...s.chains.values()].map((c) => [c.name, c.base === null, c.ruleCount]),
  };
}

test("behind encapsulation: VIP SYN-ACKs get the clamped MSS, and nft --check accepts it", async (t) => {
  const snap = await snapshot();
  const text = script(agentRulesFromSnapshot(snap, "node-a1"), { mss: { 4: 1424, 6: 1384 } });
  assertGolden(`${FIXTURES}/node-a1.mss.golden.nft`, text);
  assert.match(
    text,
    /ct direction reply ct original ip daddr @vips4 tcp flags & \(syn \| ack\) == syn \| ack tcp option maxseg size > 1424 tcp option maxseg size set 1424/,
  );
  const why = rootWithNft();
  if (why) return t.skip(why);
  const ns = `plbchkm${process.pid}`;
  execFileSync("ip", ["netns", "add", ns]);
  t.after(() => spawnSync("ip", ["netns", "del", ns]));
  const r = spawnSync("ip", ["netns", "exec", ns, "nft", "--check", "-f", "-"], { input: text });
  assert.equal(r.status, 0, String(r.stderr));
});

function rootWithNft(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root and nft: not running as root";
  for (const cmd of ["nft", "ip"])
    if (spawnSync(cmd, ["--version"]).error) return `needs root and nft: ${cmd} is not installed`;
  return undefined;
}
