#!/usr/bin/env node
/**
 * Writes the pure core's declaration (pure-core.json) into biome.json: the
 * noRestrictedImports override's `includes` (test files left out) and its banned imports. Biome's configuration is
 * JSON and cannot import the list, so it is copied here and test/boundaries.test.ts fails
 * when the copy differs. `--check` only reports (exit 1 when biome.json is out of step).
 * Usage: node scripts/sync-pure-core.mjs [--check]
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const decl = JSON.parse(readFileSync("pure-core.json", "utf8"));
const biome = JSON.parse(readFileSync("biome.json", "utf8"));
const index = biome.overrides.findIndex((o) => o.linter?.rules?.style?.noRestrictedImports);
// tests of pure modules may read their fixtures: the rule is for the modules themselves
const override = {
  includes: [...decl.modules, "!**/*.test.ts"],
  linter: {
    rules: {
      style: {
        noRestrictedImports: { level: "error", options: { paths: decl.forbiddenImports } },
      },
    },
  },
};
const same = index >= 0 && JSON.stringify(biome.overrides[index]) === JSON.stringify(override);
if (process.argv.includes("--check")) {
  if (!same) console.error("biome.json differs from pure-core.json: run node scripts/sync-pure-core.mjs");
  process.exit(same ? 0 : 1);
}
if (index >= 0) biome.overrides[index] = override;
else biome.overrides = [...(biome.overrides ?? []), override];
writeFileSync("biome.json", `${JSON.stringify(biome, null, 2)}\n`);
execFileSync("npx", ["biome", "format", "--write", "biome.json"], { stdio: "inherit" });
