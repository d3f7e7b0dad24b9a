/**
 * Driver for Debian's `bpftool` and `ip`: what the XDP data plane asks of the kernel's BPF
 * side. Load an object and pin its programs and maps (`bpftool prog loadall … pinmaps`,
 * reusing already pinned maps with `map name N pinned P`), run batches of map updates
 * (`bpftool batch file F`: one syscall per line, stops at the first error — not a
 * transaction, bpftool's `do_batch` in tools/bpf/bpftool/main.c), dump maps as JSON
 * (`bpftool -j map dump`), show a pinned program, and attach/detach through `ip link`
 * (`ip -force link set dev IF xdpdrv pinned P`: native mode only, an atomic replace of
 * whatever is attached; iproute2 man/man8/ip-link.8.in).
 *
 * bpftool's JSON "is not guaranteed to be stable" (bpftool.rst): it is parsed here only,
 * from the raw `key`/`value` byte arrays, never the BTF-formatted view. Every failure is a
 * PasslbError: `bpf_unavailable` (no binary) or `bpf_failed` (refused; stderr in details).
 *
 * Does not: decide map contents or encode structs (lb-host/xdp/), mount bpffs.
 */
import { access, mkdir, mkdtemp, rename, rm, statfs, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { PasslbError } from "../errors.ts";
import { type ProcessResult, runProcess } from "./run-process.ts";

/** One line of a batch: an update or a delete of one element of a pinned map, or an RCU
 * barrier — element 0 of a pinned array-of-maps set to the map `inner`: the kernel returns
 * from that update only after every running BPF program has finished
 * (`maybe_wait_bpf_programs`, kernel/bpf/syscall.c), so what the lines before it stopped
 * pointing at is no longer read by any packet. */
export type MapOp =
  | { readonly op: "update"; readonly map: string; readonly key: string; readonly value: string }
  | { readonly op: "delete"; readonly map: string; readonly key: string }
  | { readonly op: "barrier"; readonly map: string; readonly inner: string };

export interface MapEntry {
  readonly key: Uint8Array;
  /** the value; for a per-CPU map, one per possible CPU */
  readonly values: readonly Uint8Array[];
}

export interface XdpAttachment {
  readonly ifname: string;
  /** program id attached in native mode; undefined when none */
  readonly progId: number | undefined;
}

export interface BpfTool {
  /** Loads an object, pins its programs under `progDir` and its maps under `mapDir`,
   * reusing the pinned maps named in `reuse` (name → pin path). */
  loadAll(object: string, progDir: string, mapDir: string, reuse: ReadonlyMap<string, string>): Promise<void>;
  /** id and tag of a pinned program; undefined when nothing is pinned there */
  prog(pin: string): Promise<{ id: number; tag: string } | undefined>;
  /** Runs the ops in order, in batches of `chunk` lines. */
  batch(ops: readonly MapOp[]): Promise<void>;
  dump(mapPin: string): Promise<MapEntry[]>;
  /** the entries of these keys (hex), one `bpftool -j batch` run — for arrays, where every
   * key exists: bpftool ends a batch at its first failing line */
  lookup(mapPin: string, keys: readonly string[]): Promise<MapEntry[]>;
  attach(ifname: string, progPin: string): Promise<void>;
  detach(ifname: string): Promise<void>;
  attached(ifname: string): Promise<XdpAttachment>;
  /** whether a path exists (a pin or a pin directory) */
  exists(path: string): Promise<boolean>;
  /** removes a pin or a directory of pins */
  unpin(path: string): Promise<void>;
  /** renames a pin or a directory of pins (bpffs supports rename) */
  rename(from: string, to: string): Promise<void>;
  /** throws bpf_unavailable unless `dir` is on a bpffs mount */
  checkBpffs(dir: string): Promise<void>;
  /** Creates and pins a one-element array-of-maps whose inner template is the map pinned
   * at `inner` (`bpftool map create … type array_of_maps … inner_map pinned`): the target
   * of `barrier` ops. */
  createBarrier(pin: string, inner: string): Promise<void>;
}

export interface BpfToolOptions {
  readonly bpftool?: string;
  readonly ip?: string;
  /** lines per `bpftool batch` run (each run re-reads nothing; smaller runs bound a failure) */
  readonly chunk?: number;
}

type Run = ProcessResult;

const run = (cmd: string, args: readonly string[]): Promise<Run> => runProcess(cmd, args);

/** The one classifier of bpftool/ip failures. */
export function classifyBpfFailure(what: string, r: Run): PasslbError {
  if (r.spawnError?.code === "ENOENT")
    return new PasslbError(
      "bpf_unavailable",
      `${what}: command not found (Debian packages bpftool, iproute2)`,
      {
        cause: r.spawnError,
      },
    );
  const stderr = r.stderr.trim().split("\n").slice(-4).join("; ");
  return new PasslbError("bpf_failed", `${what}: ${stderr || `exit ${r.code}`}`, {
    details: { stderr: r.stderr },
  });
}

const bytes = (list: readonly string[]): Uint8Array => Uint8Array.from(list, (h) => Number.parseInt(h, 16));

/** Parses `bpftool -j map dump` (plain and per-CPU maps). */
export function parseMapDump(json: string): MapEntry[] {
  const rows = JSON.parse(json) as {
    key: string[];
    value?: string[];
    values?: { cpu: number; value: string[] }[];
  }[];
  return rows.map((r) => ({
    key: bytes(r.key),
    values: r.values ? r.values.map((v) => bytes(v.value)) : [bytes(r.value ?? [])],
  }));
}

/** Parses the `bpftool -j batch` output of lookups: the entries found. */
export function parseBatchLookups(json: string): MapEntry[] {
  const start = json.indexOf("[");
  if (start === -1) return [];
  const rows = JSON.parse(json.slice(start)) as {
    output?: { key: string[]; value?: string[]; values?: { value: string[] }[] };
  }[];
  return rows.flatMap((r) =>
    r.output?.key
      ? [
          {
            key: bytes(r.output.key),
            values: r.output.values
              ? r.output.values.map((v) => bytes(v.value))
              : [bytes(r.output.value ?? [])],
          },
        ]
      : [],
  );
}

/** One op as bpftool's arguments (a batch file line is the same words: bpftool splits
 * lines on blanks, so pins cannot contain them either way). */
export function opArgs(o: MapOp): string[] {
  const hex = (h: string) => ["hex", ...h.split(" ")];
  if (o.op === "update")
    return ["map", "update", "pinned", o.map, "key", ...hex(o.key), "value", ...hex(o.value)];
  if (o.op === "barrier")
    return ["map", "update", "pinned", o.map, "key", ...hex("00 00 00 00"), "value", "pinned", o.inner];
  return ["map", "delete", "pinned", o.map, "key", ...hex(o.key)];
}

/** The batch file text of some ops. */
export function batchText(ops: readonly MapOp[]): string {
  return ops
    .map((o) => opArgs(o).join(" "))
    .join("\n")
    .concat("\n");
}

/** Runs ops through bpftool: one op as its own command, spawned at once (no batch file to
 * write first — a barrier run after a commit proceeds while the caller computes); more as
 * batch files of `chunk` lines. */
async function runBatch(
  ops: readonly MapOp[],
  chunk: number,
  bpftool: (what: string, args: readonly string[]) => Promise<string>,
): Promise<void> {
  if (ops.length === 0) return;
  if (ops.length === 1) {
    await bpftool(`bpftool map ${ops[0]!.op}`, opArgs(ops[0]!));
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), "passlb-bpf-"));
  try {
    for (let i = 0; i < ops.length; i += chunk) {
      const file = join(dir, "batch");
      await writeFile(file, batchText(ops.slice(i, i + chunk)));
      await bpftool("bpftool batch", ["batch", "file", file]);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** the barrier map (BpfTool.createBarrier): one element, a map id */
const BARRIER_MAP = ["type", "array_of_maps", "key", "4", "value", "4", "entries", "1", "name", "passlb_rcu"];

export function createBpfTool(options: BpfToolOptions = {}): BpfTool {
  const bpftool = options.bpftool ?? "bpftool";
  const ip = options.ip ?? "ip";
  const chunk = options.chunk ?? 20_000;
  const must = async (what: string, cmd: string, args: readonly string[]): Promise<string> => {
    const r = await run(cmd, args);
    if (r.code !== 0 || r.spawnError) throw classifyBpfFailure(what, r);
    return r.stdout;
  };
  return {
    async loadAll(object, progDir, mapDir, reuse) {
      const maps = [...reuse].flatMap(([name, pin]) => ["map", "name", name, "pinned", pin]);
      await must(`bpftool prog loadall ${object}`, bpftool, [
        "prog",
        "loadall",
        object,
        progDir,
        "type",
        "xdp",
        ...maps,
        "pinmaps",
        mapDir,
      ]);
    },
    async prog(pin) {
      const r = await run(bpftool, ["-j", "prog", "show", "pinned", pin]);
      if (r.spawnError) throw classifyBpfFailure("bpftool prog show", r);
      if (r.code !== 0) return undefined;
      const p = JSON.parse(r.stdout) as { id: number; tag: string };
      return { id: p.id, tag: p.tag };
    },
    batch: (ops) => runBatch(ops, chunk, (what, args) => must(what, bpftool, args)),
    async dump(mapPin) {
      return parseMapDump(
        await must(`bpftool map dump ${mapPin}`, bpftool, ["-j", "map", "dump", "pinned", mapPin]),
      );
    },
    async lookup(mapPin, keys) {
      if (keys.length === 0) return [];
      const dir = await mkdtemp(join(tmpdir(), "passlb-bpf-"));
      try {
        const file = join(dir, "lookup");
        await writeFile(
          file,
          keys
            .map((k) => `map lookup pinned ${mapPin} key hex ${k}`)
            .join("\n")
            .concat("\n"),
        );
        const r = await run(bpftool, ["-j", "batch", "file", file]);
        if (r.spawnError) throw classifyBpfFailure("bpftool batch (lookups)", r);
        return parseBatchLookups(r.stdout);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    async attach(ifname, progPin) {
      await must(`ip link set dev ${ifname} xdpdrv`, ip, [
        "-force",
        "link",
        "set",
        "dev",
        ifname,
        "xdpdrv",
        "pinned",
        progPin,
      ]);
    },
    async detach(ifname) {
      await must(`ip link set dev ${ifname} xdpdrv off`, ip, ["link", "set", "dev", ifname, "xdpdrv", "off"]);
    },
    async attached(ifname) {
      const out = await must(`ip link show dev ${ifname}`, ip, ["-j", "link", "show", "dev", ifname]);
      return parseAttachment(ifname, out);
    },
    async exists(path) {
      return access(path).then(
        () => true,
        () => false,
      );
    },
    async unpin(path) {
      await rm(path, { recursive: true, force: true });
    },
    async rename(from, to) {
      await mkdir(dirname(to), { recursive: true });
      await rename(from, to);
    },
    async checkBpffs(dir) {
      await mkdir(dir, { recursive: true }).catch(() => undefined);
      const s = await statfs(dir).catch(() => undefined);
      // BPF_FS_MAGIC, include/uapi/linux/magic.h
      if (s?.type !== 0xcafe4a11)
        throw new PasslbError(
          "bpf_unavailable",
          `${dir} is not on a bpffs mount (mount -t bpf bpf ${dir}, or pass --xdp-pin-dir under /sys/fs/bpf)`,
        );
    },
    async createBarrier(pin, inner) {
      await mkdir(dirname(pin), { recursive: true }).catch(() => undefined);
      const args = ["map", "create", pin, ...BARRIER_MAP, "inner_map", "pinned", inner];
      await must(`bpftool map create ${pin}`, bpftool, args);
    },
  };
}

/** The native-mode program of `ip -j link show dev IF`. */
export function parseAttachment(ifname: string, json: string): XdpAttachment {
  const [link] = JSON.parse(json) as { xdp?: { mode?: number; prog?: { id: number } } }[];
  // mode 1 = XDP_ATTACHED_DRV (include/uapi/linux/if_link.h)
  const id = link?.xdp?.mode === 1 ? link.xdp.prog?.id : undefined;
  return { ifname, progId: id };
}
