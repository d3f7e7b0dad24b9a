/**
 * Golden scenarios for `passlb plan`: each folder under test/fixtures/plan holds an
 * input.yaml whose header comment says which rule it pins, an optional `args` file (the
 * command line after `plan`; $BASE is the shared six-node cluster and pool, $DIR the
 * folder), and expected.txt: exit code, stdout and stderr, reviewed once by a person.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { assertGolden } from "./golden.ts";
import { runCli } from "./run-cli.ts";

const ROOT = "test/fixtures/plan";
const BASE = join(ROOT, "_base");
const DEFAULT_ARGS = "-o json -f $BASE -f $DIR/input.yaml";

for (const name of readdirSync(ROOT).sort()) {
  if (name.startsWith("_")) continue;
  const dir = join(ROOT, name);
  test(`plan scenario: ${name}`, async () => {
    const argsFile = join(dir, "args");
    const line = existsSync(argsFile) ? readFileSync(argsFile, "utf8").trim() : DEFAULT_ARGS;
    const args = line.split(/\s+/).map((a) => a.replaceAll("$BASE", BASE).replaceAll("$DIR", dir));
    const run = await runCli(["plan", ...args]);
    assertGolden(
      join(dir, "expected.txt"),
      `exit: ${run.exitCode}\n--- stdout\n${run.stdout}--- stderr\n${run.stderr}`,
    );
  });
}
