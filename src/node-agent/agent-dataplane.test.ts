/**
 * AgentDataplane against the fake nft driver (drivers/fake-nft.ts), which applies each
 * transaction to an in-memory table: runs when the ruleset changes, not when it does not,
 * keeps the previous table when nft refuses, and retries on the next snapshot.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { readManifests } from "../cluster/manifest-files.ts";
import type { ConntrackDriver, ConntrackFilter } from "../drivers/conntrack-tool.ts";
import { FakeNft } from "../drivers/fake-nft.ts";
import { PasslbError } from "../errors.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { AgentDataplane } from "./agent-dataplane.ts";
import { AGENT_TABLE } from "./agent-ruleset.ts";

async function quickstart(): Promise<Snapshot> {
  const read = await readManifests(["test/fixtures/lab/agent/quickstart.yaml"], async () => "");
  return decodeDocuments(read.documents).snapshot;
}

/** the fake nft, failing its next run once when asked */
function fakeNft() {
  const nft = new FakeNft();
  const refuse = () => {
    nft.failNext = new PasslbError("nft_failed", "nft apply failed (exit 1): Error: simulated");
  };
  return { nft, refuse };
}

/** the keys of one of the agent table's sets, as the fake holds them */
async function setKeys(nft: FakeNft, name: string): Promise<string[]> {
  const table = await nft.dump(AGENT_TABLE);
  return [...(table?.sets.get(name)?.elements.keys() ?? [])];
}

test("applies on change only; a refused apply is reported and retried", async () => {
  const snap = await quickstart();
  const { nft, refuse } = fakeNft();
  const logs: string[] = [];
  const dp = new AgentDataplane({ node: "node-a1", nft, log: (l) => logs.push(l) });
  assert.equal(await dp.update(snap), "applied");
  assert.equal(await dp.update({ ...snap }), "unchanged", "same rules, no transaction");
  assert.equal(nft.transactions.length, 1);
  assert.match(
    nft.scripts[0]!,
    /^add table inet passlb-agent\ndelete table inet passlb-agent\nadd table inet passlb-agent\n/,
  );
  assert.ok(
    (await setKeys(nft, "served4")).some((k) => k.endsWith(" . udp . 53")),
    "demo/dns is served",
  );

  // a Service disappears: a new transaction, but nft refuses it
  const fewer = { ...snap, services: snap.services.filter((s) => s.metadata.name !== "dns") };
  refuse();
  assert.equal(await dp.update(fewer), "failed");
  assert.ok(
    logs.some((l) => l.startsWith("error nft_failed:")),
    logs.join("\n"),
  );
  assert.ok(
    (await setKeys(nft, "served4")).some((k) => k.endsWith(" . udp . 53")),
    "the previous table stays",
  );
  assert.equal(await dp.update(fewer), "applied", "the next snapshot tries again");
  assert.equal(nft.transactions.length, 3, "the first, the refused one, the retry");
  assert.ok(!(await setKeys(nft, "served4")).some((k) => k.endsWith(" . udp . 53")), "demo/dns is gone");

  await dp.close();
  assert.equal(nft.scripts.at(-1), "add table inet passlb-agent\ndelete table inet passlb-agent\n");
  assert.equal(await nft.dump(AGENT_TABLE), undefined, "the table is removed");
});

/** The dns Service with its endpoint 203.0.113.75 replaced by `address` (or removed). */
function replaceDnsEndpoint(snap: Snapshot, address: string | undefined): Snapshot {
  return {
    ...snap,
    endpointSlices: snap.endpointSlices.map((s) =>
      s.metadata.name !== "dns-abc12"
        ? s
        : {
            ...s,
            endpoints: (s.endpoints ?? []).flatMap((e) =>
              e.addresses[0] !== "203.0.113.75" ? [e] : address ? [{ ...e, addresses: [address] }] : [],
            ),
          },
    ),
  };
}

test("after a sync, UDP flows to an endpoint that stopped serving are deleted, once", async () => {
  const snap = await quickstart();
  const { nft, refuse } = fakeNft();
  const asked: ConntrackFilter[] = [];
  const listed: ConntrackFilter[] = [];
  let fail = false;
  const conntrack: ConntrackDriver = {
    deleteFlows: async (d) => {
      asked.push(d);
      if (fail) throw new PasslbError("conntrack_failed", "conntrack -D failed (exit 2): simulated");
      return 1;
    },
    // the kernel's table before the agent started: the serving pods, nothing stale
    listReplySources: async (f) => {
      listed.push(f);
      return ["203.0.113.75", "203.0.113.76"];
    },
  };
  const logs: string[] = [];
  const dp = new AgentDataplane({ node: "node-b1", nft, conntrack, log: (l) => logs.push(l) });
  assert.equal(await dp.update(snap), "applied");
  assert.equal(asked.length, 0, "nothing stale in the first sync's listing");
  assert.deepEqual(
    listed.map((f) => `${f.protocol} ${f.origPortDst} ${f.replySrc ?? "-"}`),
    ["udp 53 -"],
    "the first sync lists each UDP listener once",
  );

  const replaced = replaceDnsEndpoint(snap, "203.0.113.90");
  fail = true;
  assert.equal(await dp.update(replaced), "applied");
  assert.equal(asked.length, 1);
  assert.ok(
    logs.some((l) => l.startsWith("error conntrack_failed:")),
    logs.join("\n"),
  );
  fail = false;
  assert.equal(await dp.update(replaced), "unchanged", "same rules; the failed deletion is asked for again");
  assert.equal(asked.length, 2);
  const d = asked[1]!;
  assert.deepEqual(
    [d.family, d.protocol, d.origPortDst, d.replySrc, d.mark],
    ["IPv4", "udp", 53, "203.0.113.75", undefined],
  );
  assert.ok(logs.some((l) => /deleted 1 UDP flow\(s\) of demo\/dns UDP\/53 to 203\.0\.113\.75/.test(l)));
  assert.equal(await dp.update(replaced), "unchanged");
  assert.equal(asked.length, 2, "nothing more once it worked");
  assert.equal(listed.length, 1, "listed at the first sync only");

  // nft refuses: the old rules stay, so nothing is deleted
  refuse();
  assert.equal(await dp.update(replaceDnsEndpoint(snap, "203.0.113.91")), "failed");
  assert.equal(asked.length, 2);
});

test("a listener without any endpoint is rejected, not dropped (the Local drop: test/lab/agent-ruleset.test.ts)", async () => {
  const snap = await quickstart();
  const { nft } = fakeNft();
  const dp = new AgentDataplane({ node: "node-a1", nft, log: () => {} });
  const none = {
    ...snap,
    endpointSlices: snap.endpointSlices.filter((s) => s.metadata.name !== "dns-abc12"),
  };
  assert.equal(await dp.update(none), "applied");
  const [dns, ...others] = await setKeys(nft, "no-endpoints4");
  assert.match(dns ?? "", /^[0-9.]+ \. udp \. 53$/);
  assert.deepEqual(others, []);
  const table = await nft.dump(AGENT_TABLE);
  assert.equal(
    table?.chains.get("reject-forward")?.base,
    "type filter hook forward priority -10; policy accept;",
  );
  assert.deepEqual(nft.rules(AGENT_TABLE, "reject-forward"), [
    "ct state new ip daddr . meta l4proto . th dport @no-endpoints4 reject",
    "ct state new ip6 daddr . meta l4proto . th dport @no-endpoints6 reject",
  ]);
  const listener = table?.sets
    .get("listeners4")
    ?.elements.get(dns ?? "")
    ?.replace(/^goto /, "");
  assert.deepEqual(
    nft.rules(AGENT_TABLE, listener ?? ""),
    ["ip saddr != { 192.0.2.0/24 } drop"],
    "only the source-range drop in the listener chain: the filter chain rejects the rest",
  );
});

test("the first sync deletes entries older than the agent: not serving, not the VIP's own", async () => {
  const snap = await quickstart();
  const { nft } = fakeNft();
  const asked: ConntrackFilter[] = [];
  let vip = "";
  const conntrack: ConntrackDriver = {
    deleteFlows: async (d) => {
      asked.push(d);
      return 1;
    },
    listReplySources: async (f) => {
      vip = f.origDst;
      // a pod deleted while the agent was down, a serving one, and an entry not DNATed
      return ["203.0.113.99", "203.0.113.75", f.origDst, "203.0.113.99"];
    },
  };
  const dp = new AgentDataplane({ node: "node-b1", nft, conntrack, log: () => {} });
  assert.equal(await dp.update(snap), "applied");
  assert.deepEqual(
    asked.map((d) => `${d.origDst}:${d.origPortDst}<-${d.replySrc}`),
    [`${vip}:53<-203.0.113.99`],
  );
});
