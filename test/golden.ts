/**
 * Golden files: compare text with a file reviewed once by a person; `UPDATE_GOLDEN=1`
 * rewrites the file instead (then review the diff before committing).
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export function assertGolden(path: string, actual: unknown): void {
  const text = typeof actual === "string" ? actual : `${JSON.stringify(actual, null, 2)}\n`;
  if (process.env.UPDATE_GOLDEN === "1" || !existsSync(path)) {
    if (process.env.CI && !existsSync(path)) assert.fail(`golden file ${path} is missing`);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
    return;
  }
  assert.equal(text, readFileSync(path, "utf8"), `output differs from ${path} (UPDATE_GOLDEN=1 rewrites it)`);
}
