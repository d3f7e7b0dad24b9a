/**
 * A fake NftDriver (sigs.k8s.io/knftables fake.go): it applies the same typed operations
 * the real driver renders for `nft -f` to an in-memory model of inet tables, all or nothing
 * per transaction like the kernel, and refuses what nft refuses (test/fake-nft.test.ts runs
 * the same transactions through both and compares):
 *   - an object in a missing table, a rule or flush on a missing chain, an element of a
 *     missing set, deleting any missing object or element (ENOENT);
 *   - `create` of an existing table, chain, set, counter or element, `add` of a map key
 *     that exists with another value (EEXIST);
 *   - deleting a chain, set or counter something still points at: a rule's `goto`/`jump`
 *     or `@set`, a verdict-map element, a counter-map element (EBUSY).
 * Every transaction is recorded (`transactions`, and its script in `scripts`).
 * `flushTable()`, `flushSet()` and `deleteTable()` simulate someone else editing the kernel (drift).
 *
 * Does not: validate rule or declaration syntax — golden rulesets are checked by the real `nft`.
 */

import { PasslbError } from "../errors.ts";
import type { NftChain, NftSet, NftState } from "../lb-host/nftables/render/nft-state.ts";
import { HASH_COMMENT_PREFIX } from "../lb-host/nftables/render/nft-state.ts";
import type { NftCounters, NftDriver } from "./nft.ts";
import { type NftObject, type NftOp, nftScript, type Transaction } from "./nft-transaction.ts";

interface FakeRule {
  readonly handle: number;
  readonly rule: string;
  readonly comment: string | undefined;
}
interface FakeSet {
  readonly name: string;
  readonly decl: string;
  readonly isMap: boolean;
  readonly elements: Map<string, string>;
}
interface FakeChain {
  readonly name: string;
  readonly base: string | null;
  rules: FakeRule[];
}
interface FakeTable {
  readonly sets: Map<string, FakeSet>;
  readonly chains: Map<string, FakeChain>;
  readonly counters: Map<string, { packets: number; bytes: number }>;
  nextHandle: number;
}

export class FakeNft implements NftDriver {
  readonly transactions: Transaction[] = [];
  readonly scripts: string[] = [];
  /** when set, the next run fails with this error (once) */
  failNext: PasslbError | undefined;
  #tables = new Map<string, FakeTable>();

  async run(tx: Transaction): Promise<void> {
    this.transactions.push(tx);
    this.scripts.push(nftScript(tx));
    if (this.failNext) {
      const e = this.failNext;
      this.failNext = undefined;
      throw e;
    }
    this.#tables = applied(this.#tables, tx);
  }

  async check(tx: Transaction): Promise<void> {
    applied(this.#tables, tx);
  }

  async dump(table: string, options: { terse?: boolean } = {}): Promise<NftState | undefined> {
    const t = this.#tables.get(table);
    if (!t) return undefined;
    const sets = new Map<string, NftSet>();
    for (const s of t.sets.values())
      sets.set(s.name, {
        name: s.name,
        decl: "?",
        isMap: s.isMap,
        elements: options.terse ? new Map() : new Map(s.elements),
      });
    const chains = new Map<string, NftChain>();
    for (const c of t.chains.values()) {
      const comment = c.rules.at(-1)?.comment ?? "";
      chains.set(c.name, {
        name: c.name,
        base: c.base,
        rules: null,
        ruleCount: c.rules.length,
        hash: comment.startsWith(HASH_COMMENT_PREFIX) ? comment.slice(HASH_COMMENT_PREFIX.length) : "",
      });
    }
    return { table, sets, chains, counters: new Set(t.counters.keys()) };
  }

  async counters(table: string): Promise<NftCounters> {
    const t = this.#tables.get(table);
    if (!t) throw refusal(`No such file or directory (table ${table})`, `list counters table inet ${table}`);
    return new Map([...t.counters].map(([k, v]) => [k, { ...v }]));
  }

  /** Simulates traffic: adds to a named counter (tests of the counter metrics). */
  count(table: string, counter: string, packets: number, bytes: number): void {
    const c = this.#tables.get(table)?.counters.get(counter);
    if (!c) throw new Error(`fake nft: no counter ${counter}`);
    c.packets += packets;
    c.bytes += bytes;
  }

  /** Rules of one chain as nft would list their text (for assertions). */
  rules(table: string, chain: string): readonly string[] | undefined {
    return this.#tables
      .get(table)
      ?.chains.get(chain)
      ?.rules.map((r) => (r.comment === undefined ? r.rule : `${r.rule} comment "${r.comment}"`));
  }

  /** someone ran `nft flush table inet <table>` */
  flushTable(table: string): void {
    for (const c of this.#tables.get(table)?.chains.values() ?? []) c.rules = [];
  }

  /** someone ran `nft flush map inet <table> <name>` */
  flushSet(table: string, name: string): void {
    this.#tables.get(table)?.sets.get(name)?.elements.clear();
  }

  deleteTable(table: string): void {
    this.#tables.delete(table);
  }
}

function refusal(message: string, line: string): PasslbError {
  return new PasslbError("nft_failed", `fake nft: ${message}`, {
    details: { stderr: `Error: ${message}\n${line}` },
  });
}

/** `tables` after `tx`, or the first refusal thrown; `tables` itself is left alone. */
function applied(tables: ReadonlyMap<string, FakeTable>, tx: Transaction): Map<string, FakeTable> {
  const next = cloneTables(tables);
  for (const op of tx.ops) {
    const fail = (message: string) => refusal(message, nftScript({ ...tx, ops: [op] }).trimEnd());
    if (op.object.kind === "table") tableOp(next, tx.table, op.verb, fail);
    else {
      const t = next.get(tx.table);
      if (!t) throw fail(`No such file or directory (table ${tx.table})`);
      objectOp(t, op, fail);
    }
  }
  return next;
}

type Fail = (message: string) => PasslbError;

function tableOp(tables: Map<string, FakeTable>, name: string, verb: NftOp["verb"], fail: Fail): void {
  const have = tables.get(name);
  if (verb === "add" || verb === "create") {
    if (have && verb === "create") throw fail(`File exists (table ${name})`);
    if (!have) tables.set(name, { sets: new Map(), chains: new Map(), counters: new Map(), nextHandle: 1 });
    return;
  }
  if (!have) throw fail(`No such file or directory (table ${name})`);
  if (verb === "delete") tables.delete(name);
  else if (verb === "flush") for (const c of have.chains.values()) c.rules = [];
  else throw fail(`${verb} table is not an nft command`);
}

function objectOp(t: FakeTable, op: NftOp, fail: Fail): void {
  const o = op.object;
  switch (o.kind) {
    case "chain":
      chainOp(t, op.verb, o, fail);
      return;
    case "rule":
      ruleOp(t, op.verb, o, fail);
      return;
    case "set":
    case "map":
      setOp(t, op.verb, o, fail);
      return;
    case "element":
      elementOp(t, op.verb, o, fail);
      return;
    case "counter":
      counterOp(t, op.verb, o.name, fail);
      return;
    case "table":
      throw fail("table operation inside a table");
  }
}

function chainOp(
  t: FakeTable,
  verb: NftOp["verb"],
  o: Extract<NftObject, { kind: "chain" }>,
  fail: Fail,
): void {
  const have = t.chains.get(o.name);
  if (verb === "add" || verb === "create") {
    if (have && verb === "create") throw fail(`File exists (chain ${o.name})`);
    if (!have) t.chains.set(o.name, { name: o.name, base: o.base ?? null, rules: [] });
    return;
  }
  if (!have) throw fail(`No such file or directory (chain ${o.name})`);
  if (verb === "flush") have.rules = [];
  else if (verb === "delete") {
    if (have.rules.length > 0) throw fail(`Device or resource busy (chain ${o.name} has rules)`);
    if (chainInUse(t, o.name)) throw fail(`Device or resource busy (chain ${o.name} in use)`);
    t.chains.delete(o.name);
  } else throw fail(`${verb} chain is not an nft command`);
}

const jumpRe = /\b(?:goto|jump) ([A-Za-z0-9_.-]+)/g;

function chainInUse(t: FakeTable, name: string): boolean {
  for (const s of t.sets.values())
    for (const v of s.elements.values()) if (v === `goto ${name}` || v === `jump ${name}`) return true;
  for (const c of t.chains.values())
    for (const r of c.rules) for (const m of r.rule.matchAll(jumpRe)) if (m[1] === name) return true;
  return false;
}

function ruleOp(
  t: FakeTable,
  verb: NftOp["verb"],
  o: Extract<NftObject, { kind: "rule" }>,
  fail: Fail,
): void {
  const c = t.chains.get(o.chain);
  if (!c) throw fail(`No such file or directory (chain ${o.chain})`);
  const at = o.handle === undefined ? -1 : c.rules.findIndex((r) => r.handle === o.handle);
  if (o.handle !== undefined && at < 0) throw fail(`No such file or directory (rule handle ${o.handle})`);
  if (verb === "delete") {
    if (at < 0) throw fail("delete rule needs a handle");
    c.rules.splice(at, 1);
    return;
  }
  const text = o.rule ?? "";
  for (const ref of text.matchAll(/@([A-Za-z0-9_.-]+)/g))
    if (!t.sets.has(ref[1]!)) throw fail(`No such file or directory (set ${ref[1]})`);
  for (const ref of text.matchAll(jumpRe))
    if (!t.chains.has(ref[1]!)) throw fail(`No such file or directory (chain ${ref[1]})`);
  const rule = { handle: t.nextHandle++, rule: text, comment: o.comment };
  if (verb === "add") c.rules.splice(at < 0 ? c.rules.length : at + 1, 0, rule);
  else if (verb === "insert") c.rules.splice(Math.max(at, 0), 0, rule);
  else if (verb === "replace") {
    if (at < 0) throw fail("replace rule needs a handle");
    c.rules[at] = { ...rule, handle: o.handle! };
  } else throw fail(`${verb} rule is not an nft command`);
}

function setOp(
  t: FakeTable,
  verb: NftOp["verb"],
  o: Extract<NftObject, { kind: "set" | "map" }>,
  fail: Fail,
): void {
  const have = t.sets.get(o.name);
  if (verb === "add" || verb === "create") {
    if (have && verb === "create") throw fail(`File exists (${o.kind} ${o.name})`);
    if (!have)
      t.sets.set(o.name, { name: o.name, decl: o.decl ?? "", isMap: o.kind === "map", elements: new Map() });
    return;
  }
  if (!have) throw fail(`No such file or directory (${o.kind} ${o.name})`);
  if (verb === "flush") have.elements.clear();
  else if (verb === "delete") {
    for (const c of t.chains.values())
      for (const r of c.rules)
        if (r.rule.includes(`@${o.name}`)) throw fail(`Device or resource busy (${o.kind} ${o.name} in use)`);
    t.sets.delete(o.name);
  } else throw fail(`${verb} ${o.kind} is not an nft command`);
}

function elementOp(
  t: FakeTable,
  verb: NftOp["verb"],
  o: Extract<NftObject, { kind: "element" }>,
  fail: Fail,
): void {
  const s = t.sets.get(o.set);
  if (!s) throw fail(`No such file or directory (set ${o.set})`);
  for (const { key, value = "" } of o.elements) {
    const have = s.elements.get(key);
    if (verb === "delete") {
      if (have === undefined) throw fail(`No such file or directory (element ${key} in ${o.set})`);
      s.elements.delete(key);
      continue;
    }
    if (verb !== "add" && verb !== "create") throw fail(`${verb} element is not an nft command`);
    const v = s.isMap ? value : "";
    if (have !== undefined && (verb === "create" || have !== v))
      throw fail(`File exists (element ${key} in ${o.set})`);
    const target = /^(?:goto|jump) (\S+)$/.exec(v)?.[1];
    if (target !== undefined && !t.chains.has(target))
      throw fail(`No such file or directory (chain ${target})`);
    if (s.decl.endsWith(": counter;") && !t.counters.has(v))
      throw fail(`No such file or directory (counter ${v})`);
    s.elements.set(key, v);
  }
}

function counterOp(t: FakeTable, verb: NftOp["verb"], name: string, fail: Fail): void {
  const have = t.counters.get(name);
  if (verb === "add" || verb === "create") {
    if (have && verb === "create") throw fail(`File exists (counter ${name})`);
    if (!have) t.counters.set(name, { packets: 0, bytes: 0 });
    return;
  }
  if (!have) throw fail(`No such file or directory (counter ${name})`);
  if (verb === "flush" || verb === "replace" || verb === "insert") {
    if (verb === "flush") t.counters.set(name, { packets: 0, bytes: 0 });
    else throw fail(`${verb} counter is not an nft command`);
    return;
  }
  for (const s of t.sets.values())
    if (s.decl.endsWith(": counter;"))
      for (const v of s.elements.values())
        if (v === name) throw fail(`Device or resource busy (counter ${name} in use)`);
  t.counters.delete(name);
}

function cloneTables(tables: ReadonlyMap<string, FakeTable>): Map<string, FakeTable> {
  const out = new Map<string, FakeTable>();
  for (const [name, t] of tables) {
    const sets = new Map<string, FakeSet>();
    for (const [k, s] of t.sets) sets.set(k, { ...s, elements: new Map(s.elements) });
    const chains = new Map<string, FakeChain>();
    for (const [k, c] of t.chains) chains.set(k, { ...c, rules: [...c.rules] });
    const counters = new Map([...t.counters].map(([k, v]) => [k, { ...v }]));
    out.set(name, { sets, chains, counters, nextHandle: t.nextHandle });
  }
  return out;
}
