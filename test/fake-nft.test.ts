/**
 * FakeNft against the real nft: the same transactions through both (the real one in a
 * throwaway namespace, root only), then the same listing and the same verdict — accepted,
 * or refused as `nft_failed` with nothing of the transaction left behind.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeNft } from "../src/drivers/fake-nft.ts";
import { createNftDriver, type NftDriver } from "../src/drivers/nft.ts";
import { type NftObject, type NftOp, nftScript, transaction } from "../src/drivers/nft-transaction.ts";
import { PasslbError } from "../src/errors.ts";
import type { NftState } from "../src/lb-host/nftables/render/nft-state.ts";
import { kernelSkipReason, withNetns } from "./netns.ts";

const TABLE = "plbfake";
const skip = kernelSkipReason();

const op = (verb: NftOp["verb"], object: NftObject): NftOp => ({ verb, object });
const table = op("add", { kind: "table" });
const input = op("add", {
  kind: "chain",
  name: "input",
  base: "type filter hook input priority filter; policy accept;",
});
const svc = op("add", { kind: "chain", name: "svc" });
const vips = op("add", { kind: "set", name: "vips", decl: "type ipv4_addr;" });
const dispatch = op("add", { kind: "map", name: "dispatch", decl: "type ipv4_addr : verdict;" });
const hits = op("add", { kind: "map", name: "hits", decl: "type ipv4_addr : counter;" });
const rule = (chain: string, text: string, comment?: string): NftOp =>
  op("add", { kind: "rule", chain, rule: text, ...(comment === undefined ? {} : { comment }) });
const elements = (verb: NftOp["verb"], set: string, ...es: [string, string?][]): NftOp =>
  op(verb, {
    kind: "element",
    set,
    elements: es.map(([key, value]) => (value === undefined ? { key } : { key, value })),
  });

interface Case {
  readonly name: string;
  /** transactions that must all succeed first */
  readonly setup: readonly (readonly NftOp[])[];
  readonly probe: readonly NftOp[];
  readonly refused: boolean;
}

const base = [table, input, svc, vips, dispatch];
const CASES: readonly Case[] = [
  { name: "add of an existing table is a no-op", setup: [base], probe: [table, vips], refused: false },
  {
    name: "create of an existing table",
    setup: [base],
    probe: [op("create", { kind: "table" })],
    refused: true,
  },
  {
    name: "create of an existing chain",
    setup: [base],
    probe: [op("create", { kind: "chain", name: "svc" })],
    refused: true,
  },
  {
    name: "create of an existing set",
    setup: [base],
    probe: [op("create", { kind: "set", name: "vips", decl: "type ipv4_addr;" })],
    refused: true,
  },
  { name: "a rule in a missing chain", setup: [base], probe: [rule("nosuch", "accept")], refused: true },
  {
    name: "a rule naming a missing set",
    setup: [base],
    probe: [rule("input", "ip daddr @nosuch drop")],
    refused: true,
  },
  {
    name: "a rule jumping to a missing chain",
    setup: [base],
    probe: [rule("input", "jump nosuch")],
    refused: true,
  },
  {
    name: "delete of a missing chain",
    setup: [base],
    probe: [op("delete", { kind: "chain", name: "nosuch" })],
    refused: true,
  },
  {
    name: "delete of a missing set",
    setup: [base],
    probe: [op("delete", { kind: "set", name: "nosuch" })],
    refused: true,
  },
  { name: "delete of a missing table", setup: [], probe: [op("delete", { kind: "table" })], refused: true },
  {
    name: "delete of a missing element",
    setup: [base, [elements("add", "vips", ["192.0.2.1"])]],
    probe: [elements("delete", "vips", ["192.0.2.9"])],
    refused: true,
  },
  {
    name: "create of an existing element",
    setup: [base, [elements("add", "vips", ["192.0.2.1"])]],
    probe: [elements("create", "vips", ["192.0.2.1"])],
    refused: true,
  },
  {
    name: "add of an existing element is a no-op",
    setup: [base, [elements("add", "vips", ["192.0.2.1"])]],
    probe: [elements("add", "vips", ["192.0.2.1"], ["192.0.2.2"])],
    refused: false,
  },
  {
    name: "a map key again with another verdict",
    setup: [
      base,
      [op("add", { kind: "chain", name: "other" }), elements("add", "dispatch", ["192.0.2.1", "goto svc"])],
    ],
    probe: [elements("add", "dispatch", ["192.0.2.1", "goto other"])],
    refused: true,
  },
  {
    name: "a verdict to a missing chain",
    setup: [base],
    probe: [elements("add", "dispatch", ["192.0.2.1", "goto nosuch"])],
    refused: true,
  },
  {
    name: "delete of a chain a verdict map points at",
    setup: [base, [elements("add", "dispatch", ["192.0.2.1", "goto svc"])]],
    probe: [op("delete", { kind: "chain", name: "svc" })],
    refused: true,
  },
  {
    name: "delete of a set a rule uses",
    setup: [base, [rule("input", "ip daddr @vips drop")]],
    probe: [op("delete", { kind: "set", name: "vips" })],
    refused: true,
  },
  {
    name: "flush chain then delete chain",
    setup: [base, [rule("svc", "accept", "passlb h1")]],
    probe: [op("flush", { kind: "chain", name: "svc" }), op("delete", { kind: "chain", name: "svc" })],
    refused: false,
  },
  {
    name: "a counter-map element naming a missing counter",
    setup: [base, [hits]],
    probe: [elements("add", "hits", ["192.0.2.1", "c1"])],
    refused: true,
  },
  {
    name: "delete of a counter a map element names",
    setup: [
      base,
      [hits, op("add", { kind: "counter", name: "c1" }), elements("add", "hits", ["192.0.2.1", "c1"])],
    ],
    probe: [op("delete", { kind: "counter", name: "c1" })],
    refused: true,
  },
  {
    name: "flush table empties chains, keeps sets and elements",
    setup: [
      base,
      [rule("input", "ip daddr @vips drop", "passlb h2"), elements("add", "vips", ["192.0.2.1"])],
    ],
    probe: [op("flush", { kind: "table" })],
    refused: false,
  },
  {
    name: "insert puts a rule first, add appends",
    setup: [base, [rule("input", "accept", "passlb last")]],
    probe: [
      op("insert", { kind: "rule", chain: "input", rule: "accept", comment: "passlb first" }),
      rule("input", "drop", "passlb new-last"),
    ],
    refused: false,
  },
  {
    name: "a refused transaction leaves nothing behind",
    setup: [base],
    probe: [
      op("add", { kind: "set", name: "fresh", decl: "type ipv4_addr;" }),
      elements("add", "vips", ["192.0.2.7"]),
      rule("nosuch", "accept"),
    ],
    refused: true,
  },
  {
    name: "delete table after building it",
    setup: [base, [hits, op("add", { kind: "counter", name: "c1" })]],
    probe: [op("delete", { kind: "table" })],
    refused: false,
  },
];

interface Outcome {
  readonly refused: boolean;
  readonly listing: unknown;
}

function listing(s: NftState | undefined): unknown {
  if (!s) return "no table";
  return {
    sets: [...s.sets.values()].map((x) => [x.name, x.isMap, [...x.elements].sort()]).sort(),
    chains: [...s.chains.values()].map((c) => [c.name, c.base, c.ruleCount, c.hash]).sort(),
    counters: [...(s.counters ?? [])].sort(),
  };
}

async function outcome(nft: NftDriver, c: Case): Promise<Outcome> {
  for (const ops of c.setup) await nft.run(transaction(TABLE, ops));
  let refused = false;
  try {
    await nft.run(transaction(TABLE, c.probe));
  } catch (e) {
    assert.ok(e instanceof PasslbError, String(e));
    assert.equal(e.code, "nft_failed", `${c.name}: ${e.message}`);
    refused = true;
  }
  return { refused, listing: listing(await nft.dump(TABLE)) };
}

test("fake nft: verdicts (the same cases run against the real nft below)", async () => {
  assert.ok(CASES.length >= 10);
  for (const c of CASES) {
    const r = await outcome(new FakeNft(), c);
    assert.equal(r.refused, c.refused, c.name);
  }
});

test("fake nft: check validates without committing", async () => {
  const nft = new FakeNft();
  await nft.check(transaction(TABLE, base));
  assert.equal(await nft.dump(TABLE), undefined);
  await assert.rejects(nft.check(transaction(TABLE, [table, rule("nosuch", "accept")])), PasslbError);
});

test("fake nft and real nft agree on listings and refusals", async (t) => {
  if (skip) return t.skip(skip);
  await withNetns("fake", async (ns) => {
    const real = createNftDriver({ netns: ns });
    for (const c of CASES) {
      if ((await real.dump(TABLE)) !== undefined)
        await real.run(transaction(TABLE, [op("delete", { kind: "table" })]));
      const want = await outcome(new FakeNft(), c);
      const got = await outcome(real, c);
      assert.deepEqual(got, want, `${c.name}\n${nftScript(transaction(TABLE, c.probe))}`);
    }
    // check (nft -c) commits nothing (the last case deleted the table)
    assert.equal(await real.dump(TABLE), undefined);
    await real.check(transaction(TABLE, base));
    assert.equal(await real.dump(TABLE), undefined);
  });
});

test("a missing nft binary is nft_unavailable", async () => {
  const nft = createNftDriver({ nft: "/nonexistent/plb-nft" });
  await assert.rejects(nft.run(transaction(TABLE, [table])), (e: unknown) => {
    assert.ok(e instanceof PasslbError);
    assert.equal(e.code, "nft_unavailable");
    return true;
  });
});
