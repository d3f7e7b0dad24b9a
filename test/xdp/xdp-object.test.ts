/**
 * The compiled XDP program is the current source's: the object names the SHA-256 of the
 * passlb-xdp.c it was built from, the build is reproducible byte for byte (so a shipped
 * object can be checked against a rebuild), and a shipped object (dist/bpf/passlb-xdp.o, as
 * `npm run build:xdp` and the image's build stage leave it) must name the source in this
 * tree. The stale-object refusal needs no compiler; the rest needs clang (skipped without).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  buildXdpObject,
  objectProblem,
  objectSourceHash,
  sourceHash,
  XDP_OBJECT,
} from "../../src/lb-host/xdp/xdp-object.ts";

const noClang = spawnSync("clang", ["--version"]).error ? "needs clang (Debian package clang)" : undefined;

test("an object that names another source, or none, is refused by name", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "plb-xdpobj-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const stale = join(dir, "stale.o");
  writeFileSync(stale, Buffer.from(`\x7fELF…passlb-xdp-source-sha256:${"0".repeat(64)}…`));
  assert.match((await objectProblem(stale)) ?? "", /built from another passlb-xdp\.c/);
  assert.match(
    (await objectProblem(join(dir, "missing.o"))) ?? "",
    /no compiled XDP program .*npm run build:xdp/,
  );
});

test("the build names its source and is reproducible byte for byte", { skip: noClang }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "plb-xdpobj-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  await buildXdpObject(join(dir, "a.o"));
  await buildXdpObject(join(dir, "b.o"));
  const a = readFileSync(join(dir, "a.o"));
  assert.equal(objectSourceHash(a), await sourceHash());
  assert.ok(a.equals(readFileSync(join(dir, "b.o"))), "two builds of one source give the same bytes");
  assert.equal(await objectProblem(join(dir, "a.o")), undefined);
});

test("a shipped object (dist/bpf/passlb-xdp.o) is built from the current source", async (t) => {
  if (!existsSync(XDP_OBJECT)) return t.skip(`no ${XDP_OBJECT} here (npm run build:xdp makes one)`);
  assert.equal(await objectProblem(), undefined);
});
