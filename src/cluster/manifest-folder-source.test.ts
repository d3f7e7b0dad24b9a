/**
 * ManifestFolderSource on a scratch folder: every change is read, also when a file is
 * replaced by a rename again and again (how editors and passlb's own lab write files), and
 * a burst of writes is read once.
 */
import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ManifestFolderSource } from "./manifest-folder-source.ts";

const dir = mkdtempSync(join(tmpdir(), "plb-folder-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const service = (name: string) =>
  `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: demo}\nspec: {type: ClusterIP, ports: [{port: 80}]}\n`;

function replace(file: string, text: string): void {
  writeFileSync(join(dir, `.${file}.tmp`), text);
  renameSync(join(dir, `.${file}.tmp`), join(dir, file));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("a file replaced by a rename, again and again: each version is read", async () => {
  replace("a.yaml", service("v0"));
  const seen: string[] = [];
  const source = new ManifestFolderSource({ path: dir, rereadMs: 60_000, debounceMs: 20, pollMs: 50 });
  try {
    await source.start({
      onChange: () => {},
      onRead: async (read) => {
        seen.push(read.ok ? read.snapshot.services.map((s) => s.metadata.name).join(",") : "problems");
      },
    });
    for (const v of ["v1", "v2", "v3"]) {
      replace("a.yaml", service(v));
      for (let i = 0; i < 40 && seen.at(-1) !== v; i++) await sleep(25);
      assert.equal(seen.at(-1), v, `version ${v} read (reads so far: ${seen.join(" ")})`);
    }
    // a burst of writes inside the debounce is read once, at its last state
    const before = seen.length;
    for (const v of ["w1", "w2", "w3"]) replace("a.yaml", service(v));
    for (let i = 0; i < 40 && seen.at(-1) !== "w3"; i++) await sleep(25);
    await sleep(150);
    assert.equal(seen.at(-1), "w3");
    assert.ok(seen.length - before <= 2, `the burst read ${seen.length - before} times`);
  } finally {
    await source.close();
  }
});
