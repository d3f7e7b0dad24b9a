/**
 * Golden files: `assertGolden(path, actual)` compares `actual` as pretty JSON (two-space
 * indent, trailing newline) with the file; with `UPDATE_GOLDEN=1` it writes the file
 * instead. Goldens are reviewed by a person once, then pinned.
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export function assertGolden(path: string, actual: unknown): void {
  const text = `${JSON.stringify(actual, null, 2)}\n`;
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
  assert.deepStrictEqual(JSON.parse(text), JSON.parse(expected), `differs from ${path}`);
  assert.equal(text, expected, `${path}: same data, different layout or key order`);
}
