/**
 * Docs and code in step: every planner issue code is documented in docs/plan.md with its
 * severity, every operational error code in docs/errors.md, and the golden plans use each
 * code with the severity the catalogue gives it.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ERROR_CODES } from "../src/errors.ts";
import { PLAN_ISSUE_CODES } from "../src/plan/issue-codes.ts";

test("docs/plan.md lists every planner issue code with its severity", () => {
  const doc = readFileSync("docs/plan.md", "utf8");
  for (const [code, [severity]] of Object.entries(PLAN_ISSUE_CODES))
    assert.match(
      doc,
      new RegExp(`\\|\\s*\`${code}\`\\s*\\|\\s*${severity}\\s*\\|`),
      `docs/plan.md lacks ${code} (${severity})`,
    );
});

test("docs/errors.md lists every operational error code", () => {
  const doc = readFileSync("docs/errors.md", "utf8");
  for (const code of Object.keys(ERROR_CODES))
    assert.ok(doc.includes(`\`${code}\``), `docs/errors.md lacks ${code}`);
});

test("golden plans use each issue code with the catalogue's severity", () => {
  const root = "test/fixtures/plan";
  let seen = 0;
  for (const dir of readdirSync(root)) {
    let text: string;
    try {
      text = readFileSync(join(root, dir, "expected.txt"), "utf8");
    } catch {
      continue;
    }
    for (const m of text.matchAll(/"code": "([a-z_]+)",\s*"severity": "([a-z]+)"/g)) {
      const entry = PLAN_ISSUE_CODES[m[1] as keyof typeof PLAN_ISSUE_CODES];
      assert.ok(entry, `${dir}: unknown code ${m[1]}`);
      assert.equal(m[2], entry[0], `${dir}: ${m[1]} should be ${entry[0]}`);
      seen++;
    }
  }
  assert.ok(seen > 20, "the goldens were not found");
});
