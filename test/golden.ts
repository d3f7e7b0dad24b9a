/**
 * Golden files: compare output with a file reviewed once by a person. Objects are compared
 * as pretty JSON (two-space indent, trailing newline), strings as they are. With
 * `UPDATE_GOLDEN=1` the file is written instead (review the diff before committing); a
 * missing golden fails, so a new scenario cannot pass unreviewed.
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export function assertGolden(path: string, actual: unknown): void {
  const text = typeof actual === "string" ? actual : `${JSON.stringify(actual, null, 2)}\n`;
  if (process.env.UPDATE_GOLDEN === "1") {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
    return;
  }
  let expected: string;
  try {
    expected = readFileSync(path, "utf8");
  } catch {
    assert.fail(`golden file ${path} is missing: run with UPDATE_GOLDEN=1 and review it`);
  }
  if (typeof actual !== "string")
    assert.deepStrictEqual(JSON.parse(text), JSON.parse(expected), `differs from ${path}`);
  assert.equal(text, expected, `output differs from ${path} (UPDATE_GOLDEN=1 rewrites it; review the diff)`);
}
