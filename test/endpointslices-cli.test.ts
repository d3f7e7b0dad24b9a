// Golden scenarios for `passlb endpointslices reconcile|mirror|merge`: manifests under
// test/fixtures/endpointslices/<case>/, expected output beside them. UPDATE_GOLDEN=1 rewrites
// the expected files (review the diff before committing).
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Command } from "commander";
import { registerEndpointSlicesCommand } from "../src/cli/endpointslices-command.ts";

const DIR = join(import.meta.dirname, "fixtures", "endpointslices");
const cases: { name: string; args: string[]; golden: string }[] = JSON.parse(
  readFileSync(join(DIR, "cases.json"), "utf8"),
);

async function run(args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  let stdout = "";
  let stderr = "";
  let code = 0;
  const io = {
    stdout: (t: string) => {
      stdout += t;
    },
    stderr: (t: string) => {
      stderr += t;
    },
    readStdin: async () => "",
  };
  const program = new Command("passlb")
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });
  registerEndpointSlicesCommand(program, io, (c) => {
    code = c;
  });
  try {
    await program.parseAsync(["endpointslices", ...args], { from: "user" });
  } catch {
    code = 2;
  }
  return { stdout, stderr, code };
}

const resolve = (args: string[]) => args.map((a, i) => (args[i - 1] === "-f" ? join(DIR, a) : a));

for (const c of cases)
  test(`golden: ${c.name}`, async () => {
    const { stdout, stderr, code } = await run(resolve(c.args));
    assert.equal(code, 0, stderr);
    const path = join(DIR, c.golden);
    if (process.env.UPDATE_GOLDEN === "1") writeFileSync(path, stdout);
    assert.equal(stdout, readFileSync(path, "utf8"));
  });

test("output is the same on every run (deterministic)", async () => {
  const args = resolve(["merge", "-f", "merge", "-f", "basic", "-f", "update"]);
  const a = await run(args);
  const b = await run(args);
  assert.equal(a.stdout, b.stdout);
});

test("bad options and bad input exit 2", async () => {
  assert.equal(
    (await run(resolve(["reconcile", "-f", "basic", "--max-endpoints-per-slice", "1001"]))).code,
    2,
  );
  assert.equal((await run(resolve(["reconcile", "-f", "basic", "-o", "xml"]))).code, 2);
  assert.equal((await run(resolve(["reconcile", "-f", "nope"]))).code, 2);
});
