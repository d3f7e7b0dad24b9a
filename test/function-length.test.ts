/**
 * No function in src/ is longer than 120 lines (docs/architecture.md "Conventions": a function
 * tells one step; a decision of many steps reads as a short list of named steps). Every
 * function of every src/**\/*.ts module but the tests is measured with the TypeScript
 * compiler's own parser: declarations, methods, constructors, accessors, arrow functions and
 * function expressions, from their first line (after the doc comment) to their closing brace.
 * A function holds its nested closures, so a 200-line closure makes its parent long too.
 *
 * A function that must stay longer is named in ALLOWED with its reason in one line. An entry
 * that names no long function any more fails too, so the list never keeps a dead excuse.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { test } from "node:test";
import ts from "typescript";

const LIMIT = 120;

/** `file-name.ts: qualified name` → why it may be longer than LIMIT lines (one line each). */
const ALLOWED: Readonly<Record<string, string>> = {};

export interface LongFunction {
  /** `file-name.ts: qualified name`, the key of ALLOWED */
  readonly key: string;
  /** `src/x/file-name.ts:12` */
  readonly where: string;
  readonly lines: number;
}

/** The name a reader would look for: `Class.method`, a variable's or property's name, or the call it is passed to. */
function ownName(node: ts.SignatureDeclaration, file: ts.SourceFile): string {
  const named = node.name && !ts.isComputedPropertyName(node.name) ? node.name.getText(file) : undefined;
  const parent = node.parent;
  if (ts.isClassLike(parent) && (named || ts.isConstructorDeclaration(node)))
    return `${parent.name?.getText(file) ?? "(class)"}.${named ?? "constructor"}`;
  if (named) return named;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText(file);
  if (ts.isCallExpression(parent)) {
    const callee = parent.expression;
    return ts.isPropertyAccessExpression(callee) ? `.${callee.name.text}(…)` : `${callee.getText(file)}(…)`;
  }
  return "(anonymous)";
}

/** Every function of a module longer than `limit` lines, named by its enclosing functions too. */
export function longFunctions(path: string, text: string, limit = LIMIT): LongFunction[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: LongFunction[] = [];
  const line = (pos: number) => file.getLineAndCharacterOfPosition(pos).line + 1;
  const visit = (node: ts.Node, outer: readonly string[]): void => {
    let names = outer;
    if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      names = [...outer, ownName(node, file)];
      const start = line(node.getStart(file));
      const lines = line(node.getEnd()) - start + 1;
      if (lines > limit)
        found.push({ key: `${basename(path)}: ${names.join(" > ")}`, where: `${path}:${start}`, lines });
    }
    ts.forEachChild(node, (child) => visit(child, names));
  };
  visit(file, []);
  return found;
}

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (name.endsWith(".ts") && !name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}

const LONG = sources("src").flatMap((path) => longFunctions(path, readFileSync(path, "utf8")));

test(`no function in src/ is longer than ${LIMIT} lines unless ALLOWED says why`, () => {
  const files = sources("src");
  assert.ok(files.length > 300, `src/ was not found (${files.length} modules)`);
  const offenders = LONG.filter((f) => !Object.hasOwn(ALLOWED, f.key)).map(
    (f) =>
      `${f.where} ${f.key.split(": ")[1]}: ${f.lines} lines; split it into named steps, or add "${f.key}" to ALLOWED with its reason`,
  );
  assert.deepEqual(offenders, []);
});

test("every ALLOWED entry names a function that is still too long (remove the others)", () => {
  const long = new Set(LONG.map((f) => f.key));
  const stale = Object.keys(ALLOWED).filter((key) => !long.has(key));
  assert.deepEqual(stale, [], "these functions are gone or short now: remove their ALLOWED entries");
  for (const [key, reason] of Object.entries(ALLOWED))
    assert.ok(reason.trim() !== "" && !reason.includes("\n"), `${key}: the reason is one line`);
});

test("the measure: a 121-line function is found and named by where it sits, a 120-line one is not", () => {
  const body = (n: number) => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i};`).join("\n");
  const text = [
    "/** a doc comment is not counted */",
    `export function fits(): void {\n${body(120)}\n}`,
    `export function outer(program: { action(f: () => void): void }): void {\n  program.action(() => {\n${body(121)}\n  });\n}`,
    `class Host {\n  start(): void {\n${body(121)}\n  }\n}`,
    `const handler = function () {\n${body(121)}\n};`,
    `const arrow = async () => {\n${body(121)}\n};`,
    `export const report = {\n  onPass(n: number) {\n${body(121)}\n  },\n};`,
  ].join("\n");
  const found = longFunctions("src/x/example.ts", text);
  assert.deepEqual(
    found.map((f) => [f.key, f.lines]),
    [
      ["example.ts: outer", 123],
      ["example.ts: outer > .action(…)", 121],
      ["example.ts: Host.start", 121],
      ["example.ts: handler", 121],
      ["example.ts: arrow", 121],
      ["example.ts: onPass", 121],
    ],
  );
  assert.equal(found[0]?.where, "src/x/example.ts:122");
});
