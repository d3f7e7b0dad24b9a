/**
 * The compiled XDP program: where it is, whether it was built from the source in this tree,
 * and how to build it (clang, as docs/dataplane-xdp.md "Build" says). The object carries the
 * SHA-256 of the source it was compiled from (the `.passlb.source` section of passlb-xdp.c,
 * text `passlb-xdp-source-sha256:<hex>`), so a stale object is refused by name instead of
 * misbehaving. The quickstart never needs it: only `--dataplane xdp` (or auto with
 * `--xdp-interface`) looks for it.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../../..");
export const XDP_SOURCE = resolve(ROOT, "src/lb-host/xdp/passlb-xdp.c");
/** where `npm run build:xdp` and the image put it */
export const XDP_OBJECT = resolve(ROOT, "dist/bpf/passlb-xdp.o");
const MARK = "passlb-xdp-source-sha256:";

export async function sourceHash(source = XDP_SOURCE): Promise<string> {
  return createHash("sha256")
    .update(await readFile(source))
    .digest("hex");
}

/** the source hash an object names, or undefined */
export function objectSourceHash(object: Buffer): string | undefined {
  const at = object.indexOf(MARK);
  if (at === -1) return undefined;
  const text = object.subarray(at + MARK.length, at + MARK.length + 64).toString("latin1");
  return /^[0-9a-f]{64}$/.test(text) ? text : undefined;
}

/** Why the object cannot be used (missing, or built from another source), or undefined. */
export async function objectProblem(object = XDP_OBJECT, source = XDP_SOURCE): Promise<string | undefined> {
  const bytes = await readFile(object).catch(() => undefined);
  if (!bytes) return `no compiled XDP program at ${object} (npm run build:xdp; needs clang)`;
  const named = objectSourceHash(bytes);
  const want = await sourceHash(source).catch(() => undefined);
  if (want === undefined) return named ? undefined : `${object} does not name its source`;
  if (named !== want) return `${object} was built from another passlb-xdp.c (npm run build:xdp)`;
  return undefined;
}

/** Compiles the program with clang (Debian: clang, llvm, libbpf-dev). Throws with stderr. */
export async function buildXdpObject(
  out = XDP_OBJECT,
  source = XDP_SOURCE,
  defines: readonly string[] = [],
): Promise<void> {
  await mkdir(dirname(out), { recursive: true });
  const hash = await sourceHash(source);
  const args = [
    "-O2",
    "-g",
    "-target",
    "bpf",
    "-Wall",
    "-Werror",
    `-fdebug-prefix-map=${dirname(source)}=.`,
    `-I/usr/include/${process.arch === "arm64" ? "aarch64" : "x86_64"}-linux-gnu`,
    `-DPASSLB_SOURCE_SHA256="${hash}"`,
    ...defines.map((d) => `-D${d}`),
    "-c",
    source,
    "-o",
    out,
  ];
  await new Promise<void>((done, fail) => {
    const child = spawn("clang", args, { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      err += d;
    });
    child.on("error", fail);
    child.on("close", (code) => (code === 0 ? done() : fail(new Error(`clang failed (${code}): ${err}`))));
  });
}
