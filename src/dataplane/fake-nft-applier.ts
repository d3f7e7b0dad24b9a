/**
 * A fake NftApplier for controller tests (the knftables pattern, STYLE.md): it reads the
 * same scripts the real applier sends — the command subset the renderer emits, one command
 * per line — into an in-memory table, all or nothing per script like an nft transaction,
 * and refuses what nft refuses in ways the controller must handle (adding a key that
 * exists with another value, deleting a missing element, touching a missing object,
 * deleting a chain that a dispatch element still points at). Every script is recorded.
 *
 * `flushTable()`, `flushSet()` and `deleteTable()` simulate someone else editing the kernel (drift).
 * Does not: validate rule syntax — golden rulesets are checked by the real `nft`.
 */
import { PasslbError } from "../errors.ts";
import type { NftApplier } from "./nft-applier.ts";
import { HASH_COMMENT_PREFIX, type NftChain, type NftSet, type NftState } from "./render/nft-state.ts";

interface MutableSet {
  name: string;
  decl: string;
  isMap: boolean;
  elements: Map<string, string>;
}
interface MutableChain {
  name: string;
  base: string | null;
  rules: string[];
}
interface Table {
  sets: Map<string, MutableSet>;
  chains: Map<string, MutableChain>;
  /** named counters and their packets/bytes */
  counters: Map<string, { packets: number; bytes: number }>;
}

export class FakeNftApplier implements NftApplier {
  readonly scripts: string[] = [];
  /** when set, the next apply fails with this error (once) */
  failNext: PasslbError | undefined;
  #tables = new Map<string, Table>();

  async apply(script: string): Promise<void> {
    this.scripts.push(script);
    if (this.failNext) {
      const e = this.failNext;
      this.failNext = undefined;
      throw e;
    }
    const next = cloneTables(this.#tables);
    for (const line of script.split("\n")) if (line.trim() !== "") execute(next, line);
    this.#tables = next;
  }

  async check(script: string): Promise<void> {
    const next = cloneTables(this.#tables);
    for (const line of script.split("\n")) if (line.trim() !== "") execute(next, line);
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
      const last = c.rules.at(-1) ?? "";
      const m = / comment "([^"]*)"$/.exec(last);
      const comment = m?.[1] ?? "";
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

  async counters(table: string): Promise<Map<string, { packets: number; bytes: number }>> {
    const t = this.#tables.get(table);
    if (!t) throw new PasslbError("nft_failed", `fake nft: No such file or directory (table ${table})`);
    return new Map([...t.counters].map(([k, v]) => [k, { ...v }]));
  }

  /** Simulates traffic: adds to a named counter (tests of the counter metrics). */
  count(table: string, counter: string, packets: number, bytes: number): void {
    const c = this.#tables.get(table)?.counters.get(counter);
    if (!c) throw new Error(`fake nft: no counter ${counter}`);
    c.packets += packets;
    c.bytes += bytes;
  }

  /** Rules of one chain as sent (for assertions). */
  rules(table: string, chain: string): readonly string[] | undefined {
    return this.#tables.get(table)?.chains.get(chain)?.rules;
  }

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

const fail = (message: string, line: string) =>
  new PasslbError("nft_failed", `fake nft: ${message}`, {
    details: { stderr: `Error: ${message}\n${line}` },
  });

function execute(tables: Map<string, Table>, line: string): void {
  const m =
    /^(add|delete|flush) (table|set|map|chain|rule|element|counter) inet (\S+)(?: (\S+))?(?: (.*))?$/.exec(
      line,
    );
  if (!m) throw fail(`cannot parse: ${line}`, line);
  const [, verb, what, tableName, name = "", rest = ""] = m;
  if (what === "table") {
    if (verb === "add") {
      if (!tables.has(tableName!))
        tables.set(tableName!, { sets: new Map(), chains: new Map(), counters: new Map() });
    } else if (verb === "delete") {
      if (!tables.delete(tableName!)) throw fail("No such file or directory (table)", line);
    } else {
      for (const c of tables.get(tableName!)?.chains.values() ?? []) c.rules = [];
    }
    return;
  }
  const t = tables.get(tableName!);
  if (!t) throw fail(`No such file or directory (table ${tableName})`, line);
  switch (`${verb} ${what}`) {
    case "add set":
    case "add map": {
      if (!t.sets.has(name))
        t.sets.set(name, { name, decl: braces(rest, line), isMap: what === "map", elements: new Map() });
      return;
    }
    case "flush set":
    case "flush map": {
      const s = t.sets.get(name);
      if (!s) throw fail(`No such file or directory (set ${name})`, line);
      s.elements.clear();
      return;
    }
    case "delete set":
    case "delete map": {
      if (!t.sets.delete(name)) throw fail(`No such file or directory (set ${name})`, line);
      return;
    }
    case "add counter": {
      if (!t.counters.has(name)) t.counters.set(name, { packets: 0, bytes: 0 });
      return;
    }
    case "delete counter": {
      if (!t.counters.has(name)) throw fail(`No such file or directory (counter ${name})`, line);
      for (const s of t.sets.values())
        if (s.decl.endsWith(": counter;"))
          for (const v of s.elements.values())
            if (v === name) throw fail(`Device or resource busy (counter ${name} in use)`, line);
      t.counters.delete(name);
      return;
    }
    case "add chain": {
      if (!t.chains.has(name))
        t.chains.set(name, { name, base: rest === "" ? null : braces(rest, line), rules: [] });
      return;
    }
    case "flush chain":
    case "delete chain": {
      const c = t.chains.get(name);
      if (!c) throw fail(`No such file or directory (chain ${name})`, line);
      if (verb === "flush") c.rules = [];
      else {
        if (c.rules.length > 0) throw fail(`Device or resource busy (chain ${name} has rules)`, line);
        for (const s of t.sets.values())
          for (const v of s.elements.values())
            if (v === `goto ${name}`) throw fail(`Device or resource busy (chain ${name} in use)`, line);
        t.chains.delete(name);
      }
      return;
    }
    case "add rule": {
      const c = t.chains.get(name);
      if (!c) throw fail(`No such file or directory (chain ${name})`, line);
      for (const ref of rest.matchAll(/@([A-Za-z0-9_.-]+)/g))
        if (!t.sets.has(ref[1]!)) throw fail(`No such file or directory (set ${ref[1]})`, line);
      c.rules.push(rest);
      return;
    }
    case "add element":
    case "delete element": {
      const s = t.sets.get(name);
      if (!s) throw fail(`No such file or directory (set ${name})`, line);
      for (const e of braces(rest, line).split(", ")) {
        if (e === "") continue;
        const [k, v = ""] = s.isMap && verb === "add" ? splitOnce(e, " : ") : [e, ""];
        if (verb === "add") {
          const have = s.elements.get(k);
          if (have !== undefined && have !== v) throw fail(`File exists (element ${k} in ${name})`, line);
          if (v.startsWith("goto ") && !t.chains.has(v.slice(5)))
            throw fail(`No such file or directory (${v})`, line);
          if (s.decl.endsWith(": counter;") && !t.counters.has(v))
            throw fail(`No such file or directory (counter ${v})`, line);
          s.elements.set(k, v);
        } else if (!s.elements.delete(k))
          throw fail(`No such file or directory (element ${k} in ${name})`, line);
      }
      return;
    }
    default:
      throw fail(`unsupported command: ${line}`, line);
  }
}

function braces(text: string, line: string): string {
  const m = /^\{ (.*) \}$/.exec(text.trim());
  if (!m) throw fail(`expected { … }: ${line}`, line);
  return m[1]!;
}

function splitOnce(text: string, sep: string): [string, string] {
  const i = text.indexOf(sep);
  return i < 0 ? [text, ""] : [text.slice(0, i), text.slice(i + sep.length)];
}

function cloneTables(tables: Map<string, Table>): Map<string, Table> {
  const out = new Map<string, Table>();
  for (const [name, t] of tables) {
    const sets = new Map<string, MutableSet>();
    for (const [k, s] of t.sets) sets.set(k, { ...s, elements: new Map(s.elements) });
    const chains = new Map<string, MutableChain>();
    for (const [k, c] of t.chains) chains.set(k, { ...c, rules: [...c.rules] });
    const counters = new Map([...t.counters].map(([k, v]) => [k, { ...v }]));
    out.set(name, { sets, chains, counters });
  }
  return out;
}
