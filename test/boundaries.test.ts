/**
 * The pure core stays pure. Which modules are pure is declared once, in pure-core.json;
 * biome.json's import ban is generated from it (node scripts/sync-pure-core.mjs) and checked
 * here to be in step. Besides Biome's ban, no pure module imports a banned module, reads the
 * clock, randomness, the process or timers, or imports (for its values) a module outside the
 * pure core. A failing line names the file and the call or import.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { test } from "node:test";

interface PureCore {
  readonly modules: readonly string[];
  readonly forbiddenImports: Readonly<Record<string, string>>;
}

const DECL: PureCore = JSON.parse(readFileSync("pure-core.json", "utf8"));
const FORBIDDEN = [
  /\bDate\.now\(/,
  /new Date\(\)/,
  /\bMath\.random\(/,
  /\bprocess\./,
  /\bset(Timeout|Interval|Immediate)\(/,
  /\bperformance\.now\(/,
];

/** A Biome glob as a regular expression: `**` any path, `*` any part of a name. */
function globRegExp(glob: string): RegExp {
  const parts = glob.split("**").map((p) =>
    p
      .split("*")
      .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join("[^/]*"),
  );
  return new RegExp(`^${parts.join(".*")}$`);
}

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (name.endsWith(".ts") && !name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}

const MODULES = walk("src");
const GLOBS = DECL.modules.map((g) => ({ glob: g, re: globRegExp(g) }));
const PURE = new Set(MODULES.filter((f) => GLOBS.some(({ re }) => re.test(f))));

test("biome.json's import ban is generated from pure-core.json (node scripts/sync-pure-core.mjs)", () => {
  const biome = JSON.parse(readFileSync("biome.json", "utf8"));
  const override = biome.overrides.find(
    (o: { linter?: { rules?: { style?: { noRestrictedImports?: unknown } } } }) =>
      o.linter?.rules?.style?.noRestrictedImports,
  );
  assert.ok(override, "biome.json has no noRestrictedImports override");
  assert.deepEqual(override.includes, [...DECL.modules, "!**/*.test.ts"]);
  assert.deepEqual(override.linter.rules.style.noRestrictedImports.options.paths, DECL.forbiddenImports);
});

test("every glob of pure-core.json names at least one module", () => {
  const dead = GLOBS.filter(({ re }) => !MODULES.some((f) => re.test(f))).map(({ glob }) => glob);
  assert.deepEqual(dead, []);
  assert.ok(PURE.size > 100, "the pure core was not found");
});

test("pure-core modules use no clock, randomness, process or timers", () => {
  const offences: string[] = [];
  for (const file of PURE) {
    const lines = readFileSync(file, "utf8").split("\n");
    lines.forEach((line, i) => {
      if (line.trim().startsWith("*") || line.trim().startsWith("//")) return;
      for (const re of FORBIDDEN) if (re.test(line)) offences.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(offences, []);
});

test("pure-core modules import no banned module and no module outside the pure core", () => {
  const offences: string[] = [];
  const banned = new Set(Object.keys(DECL.forbiddenImports).flatMap((m) => [m, m.replace(/^node:/, "")]));
  for (const file of PURE) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/^(import|export)(\s+type)?[^;]*?\sfrom\s+"([^"]+)"/gms)) {
      const spec = m[3]!;
      if (banned.has(spec)) offences.push(`${file}: imports ${spec}`);
      // a type-only import brings no code along
      if (m[2] || !spec.startsWith(".")) continue;
      const target = normalize(join(dirname(file), spec));
      if (!PURE.has(target)) offences.push(`${file}: imports ${target}, which is not in pure-core.json`);
    }
  }
  assert.deepEqual(offences, []);
});
