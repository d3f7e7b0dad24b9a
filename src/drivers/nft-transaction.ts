/**
 * Typed nft operations and the one `nft -f` script they render to. Pure.
 *
 * The model is sigs.k8s.io/knftables' `Transaction` (transaction.go, objects.go): a list of
 * operations — add, create, flush, delete, insert, replace — each on one object of one
 * table (table, chain, rule, set, map, element, counter). The real driver (nft.ts) sends
 * `nftScript(tx)` to `nft -f -` as one kernel transaction; the fake (fake-nft.ts) applies
 * the same operations to an in-memory table, so no one re-parses our own text.
 *
 * Rendering is one command per line, in the operation order, in nft's own command syntax
 * (nft(8) "TABLES", "CHAINS", "RULES", "SETS", "MAPS", "ELEMENTS", "STATEFUL OBJECTS").
 * Chain hooks, set declarations and rule bodies stay nft text: they are what the renderers
 * decide, and golden rulesets keep them byte for byte.
 *
 * Does not: decide contents (lb-host/nftables/render/*, node-agent/agent-ruleset.ts), run nft
 * (nft.ts), choose a chunk size (the renderer says how many elements one operation carries).
 */

export type NftVerb = "add" | "create" | "flush" | "delete" | "insert" | "replace";
export type NftFamily = "inet" | "ip" | "ip6";

export type NftObject =
  | { readonly kind: "table" }
  /** `base`: the hook spec inside `{ … }` (`type nat hook prerouting priority dstnat;`), null for a regular chain */
  | { readonly kind: "chain"; readonly name: string; readonly base?: string | null }
  /** `handle` addresses an existing rule (delete, replace, insert before it) */
  | {
      readonly kind: "rule";
      readonly chain: string;
      readonly rule?: string;
      readonly comment?: string;
      readonly handle?: number;
    }
  /** `decl`: the declaration inside `{ … }` (`type ipv4_addr; flags interval;`) */
  | { readonly kind: "set" | "map"; readonly name: string; readonly decl?: string }
  /** `value` set for map elements that are added (a delete names keys only) */
  | { readonly kind: "element"; readonly set: string; readonly elements: readonly NftElement[] }
  | { readonly kind: "counter"; readonly name: string };

/** one set or map element: `value` only for the elements of a map that are added */
export interface NftElement {
  readonly key: string;
  readonly value?: string;
}

export interface NftOp {
  readonly verb: NftVerb;
  readonly object: NftObject;
}

export interface Transaction {
  readonly family: NftFamily;
  readonly table: string;
  readonly ops: readonly NftOp[];
}

/** A transaction builder: `tx.add({ kind: "chain", name })`, then `tx.done()`. */
export class TransactionBuilder {
  readonly #ops: NftOp[] = [];
  constructor(
    readonly table: string,
    readonly family: NftFamily = "inet",
  ) {}
  add(object: NftObject): this {
    return this.op("add", object);
  }
  create(object: NftObject): this {
    return this.op("create", object);
  }
  flush(object: NftObject): this {
    return this.op("flush", object);
  }
  delete(object: NftObject): this {
    return this.op("delete", object);
  }
  insert(object: NftObject): this {
    return this.op("insert", object);
  }
  replace(object: NftObject): this {
    return this.op("replace", object);
  }
  /** `verb` element operations on `set`, at most `chunk` elements each; none when `items` is empty */
  elements(verb: "add" | "delete", set: string, items: readonly NftElement[], chunk: number): this {
    this.#ops.push(...elementOps(verb, set, items, chunk));
    return this;
  }
  op(verb: NftVerb, object: NftObject): this {
    this.#ops.push({ verb, object });
    return this;
  }
  get size(): number {
    return this.#ops.length;
  }
  done(): Transaction {
    return { family: this.family, table: this.table, ops: [...this.#ops] };
  }
}

/** `verb` element operations on `set`, at most `chunk` elements each; none when `items` is empty. */
export function elementOps(
  verb: "add" | "delete",
  set: string,
  items: readonly NftElement[],
  chunk: number,
): NftOp[] {
  const ops: NftOp[] = [];
  for (let i = 0; i < items.length; i += chunk)
    ops.push({ verb, object: { kind: "element", set, elements: items.slice(i, i + chunk) } });
  return ops;
}

/** A transaction of these operations (a shorthand for tests and small callers). */
export function transaction(table: string, ops: readonly NftOp[], family: NftFamily = "inet"): Transaction {
  return { family, table, ops };
}

/** The `nft -f` script of `tx`: one line per operation, "" for an empty transaction. */
export function nftScript(tx: Transaction): string {
  if (tx.ops.length === 0) return "";
  const t = `${tx.family} ${tx.table}`;
  let out = "";
  for (const op of tx.ops) out += `${opLine(t, op)}\n`;
  return out;
}

function opLine(t: string, { verb, object: o }: NftOp): string {
  switch (o.kind) {
    case "table":
      return `${verb} table ${t}`;
    case "chain":
      return `${verb} chain ${t} ${o.name}${o.base == null || !creates(verb) ? "" : ` { ${o.base} }`}`;
    case "set":
    case "map":
      return `${verb} ${o.kind} ${t} ${o.name}${o.decl === undefined || !creates(verb) ? "" : ` { ${o.decl} }`}`;
    case "counter":
      return `${verb} counter ${t} ${o.name}`;
    case "element": {
      const items = o.elements.map((e) => (e.value === undefined ? e.key : `${e.key} : ${e.value}`));
      return `${verb} element ${t} ${o.set} { ${items.join(", ")} }`;
    }
    case "rule": {
      const handle =
        o.handle === undefined
          ? ""
          : ` ${verb === "insert" || verb === "add" ? "position" : "handle"} ${o.handle}`;
      if (verb === "delete") return `delete rule ${t} ${o.chain}${handle}`;
      const comment = o.comment === undefined ? "" : ` comment "${o.comment}"`;
      return `${verb} rule ${t} ${o.chain}${handle} ${o.rule ?? ""}${comment}`;
    }
  }
}

const creates = (verb: NftVerb) => verb === "add" || verb === "create";
