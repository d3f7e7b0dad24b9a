// Runs every *.test.ts under src/ and test/ with node's test runner through tsx.
// Node 20's `--test` does not expand globs itself, so we list the files here.
// The network-namespace end-to-end tests (test/e2e/) run after the others, one file at a
// time: each builds a lab of a dozen processes and asserts timings (failover, health
// detection), which two labs sharing a two-core machine would stretch.
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
const isLab = (f) => f.split(/[\\/]/).includes("e2e");
const run = (list, concurrency) =>
  list.length === 0
    ? 0
    : (spawnSync(
        process.execPath,
        ["--import", "tsx", "--test", "--test-reporter=spec", `--test-concurrency=${concurrency}`, ...list],
        { stdio: "inherit" },
      ).status ?? 1);
const first = run(
  files.filter((f) => !isLab(f)),
  2,
);
const labs = run(files.filter(isLab), 1);
process.exit(first !== 0 ? first : labs);
