// Runs every *.test.ts under src/ and test/ with node's test runner through tsx.
// Node 20's `--test` does not expand globs itself, so we list the files here.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

function collect(dir, out) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries.sort()) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out);
    else if (name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}

const only = process.argv.slice(2);
const files = only.length > 0 ? only : [...collect("src", []), ...collect("test", [])];
if (files.length === 0) {
  console.error("run-tests: no test files found");
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", "--test-reporter=spec", "--test-concurrency=2", ...files],
  { stdio: "inherit" },
);
process.exit(result.status ?? 1);
