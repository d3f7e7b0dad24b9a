/**
 * The XDP fast path as an LbDataplane (docs/dataplane-xdp.md): loads or adopts the program
 * and its pinned maps, attaches it to the client-facing interfaces, turns each wanted
 * forwarding state into ordered map updates (xdp-maps.ts → xdp-plan.ts → one bpftool batch),
 * checks for drift (detached program, maps that differ from what was written) and restores,
 * and reads the per-CPU counters.
 *
 * Pins: `<pinDir>/prog/passlb_xdp` (+ `passlb_xdp_pass`, for veth peers) and
 * `<pinDir>/maps/<name>`. They outlive the process, as does the netlink attachment
 * (Documentation/bpf and iproute2 ip-link(8)): the kernel keeps forwarding while passlb is
 * down, and the next start adopts the maps (flows, node indexes, counters) instead of
 * starting over. A start with a changed object loads it reusing the maps and swaps the
 * attachment atomically (`ip -force`). (bpffs refuses names with a dot, kernel/bpf/inode.c
 * `bpf_lookup`: hence `prog-new`, not `prog.new`.)
 *
 * Does not: choose backends (forwarding-state.ts), run nftables (the stack behind it does
 * everything XDP passes), or clean up pins on stop — `passlb lb --xdp-detach` does that.
 */

import type { BpfTool, MapEntry } from "../../drivers/bpftool.ts";
import type { MaglevTable } from "../../forwarding/maglev.ts";
import type {
  ApplyReport,
  DataplaneCounters,
  LbDataplane,
  LbDesiredState,
  StartReport,
  TrafficCount,
} from "../lb-dataplane.ts";
import { FlowEvictions } from "./flow-evictions.ts";
import {
  decodeConfig,
  decodeCounter,
  decodeName,
  decodeNode,
  decodeU32,
  decodeVipValue,
  encodeU32,
  type Family,
  hexBytes,
  XDP_LIMITS,
  XDP_MAPS,
  XDP_REASONS,
  type XdpConfig,
  type XdpMapName,
} from "./xdp-layout.ts";
import {
  emptyIndexes,
  emptyRenderMemo,
  pruneIndexes,
  type RingContent,
  renderXdpMaps,
  type XdpIndexes,
  type XdpRenderMemo,
} from "./xdp-maps.ts";
import type { NextHopResolver } from "./xdp-next-hops.ts";
import { emptyApplied, planXdpUpdate, type XdpApplied, type XdpBarrier } from "./xdp-plan.ts";
import { RingPool } from "./xdp-rings.ts";

export interface XdpDataplaneOptions {
  readonly bpf: BpfTool;
  readonly nextHops: NextHopResolver;
  /** client-facing interfaces the program is attached to */
  readonly interfaces: readonly string[];
  readonly pinDir: string;
  /** the compiled program (xdp-object.ts) */
  readonly object: string;
  readonly seed: number;
  /** the largest Maglev table (--max-table-size): one ring block */
  readonly blockSize: number;
  readonly udpTimeoutS?: number;
  readonly maxSynPerCpu?: number;
  /** monotonic milliseconds */
  readonly now: () => number;
}

/** hash maps (and the one-element config) the drift check dumps whole and compares with what
 * was written; the large arrays (nodes, stats) are read by lookups of the indexes in use */
const CHECKED: readonly XdpMapName[] = ["vips", "src_ranges", "zone_rings", "ring_ids", "tx_ports", "config"];
const ARRAYS = new Set<XdpMapName>(["nodes", "config", "node_names", "svc_names", "rings"]);

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(" ");
const isZero = (v: string) => /^(00 ?)*$/.test(v);

export class XdpDataplane implements LbDataplane {
  readonly name = "xdp" as const;
  readonly #o: XdpDataplaneOptions;
  readonly #indexes: XdpIndexes = emptyIndexes();
  readonly #pool: RingPool;
  readonly #memo = new WeakMap<MaglevTable, Map<Family, RingContent | undefined>>();
  readonly #renderMemo: XdpRenderMemo = emptyRenderMemo();
  #applied: XdpApplied = emptyApplied();
  /** the RCU barrier the batches end with when they retire a ring block (undefined: the
   * ring pool's time grace instead) */
  #barrier: XdpBarrier | undefined;
  /** the barrier of the last pass, still running */
  #settling: Promise<void> | undefined;
  #last: LbDesiredState | undefined;
  #serial: Promise<unknown> = Promise.resolve();
  /** node index → the name and counter reading when that name took it */
  readonly #nodeBase = new Map<number, { name: string } & TrafficCount>();
  readonly #evictions = new FlowEvictions();

  constructor(options: XdpDataplaneOptions) {
    this.#o = options;
    this.#pool = new RingPool(XDP_LIMITS.ringSlots, options.blockSize);
  }

  get pinDir(): string {
    return this.#o.pinDir;
  }

  /** the index of "node/4" or "node/6" (debugging, `passlb plan`, tests) */
  nodeIndex(name: string): { index: number; gen: number } | undefined {
    const index = this.#indexes.nodes.get(name);
    return index === undefined ? undefined : { index, gen: this.#indexes.gens.get(index) ?? 1 };
  }

  #pin = (m: XdpMapName): string => `${this.#o.pinDir}/maps/${m}`;
  get #progPin(): string {
    return `${this.#o.pinDir}/prog/passlb_xdp`;
  }

  get #config(): XdpConfig {
    return {
      seed: this.#o.seed,
      udpTimeoutS: this.#o.udpTimeoutS ?? 30,
      maxSynPerCpu: this.#o.maxSynPerCpu ?? 0,
      lastGen: this.#indexes.lastGen,
    };
  }

  start(): Promise<StartReport> {
    return this.#serialise(() => this.#start());
  }

  async #start(): Promise<StartReport> {
    const { bpf, pinDir } = this.#o;
    await bpf.checkBpffs(pinDir);
    const found = await bpf.prog(this.#progPin);
    const reuse = new Map<string, string>();
    for (const m of XDP_MAPS) if (await bpf.exists(this.#pin(m))) reuse.set(m, this.#pin(m));
    // the current object, loaded beside whatever is pinned, over the maps already pinned
    await bpf.unpin(`${pinDir}/prog-new`);
    await bpf.unpin(`${pinDir}/maps-new`);
    await bpf.loadAll(this.#o.object, `${pinDir}/prog-new`, `${pinDir}/maps-new`, reuse);
    for (const m of XDP_MAPS) if (!reuse.has(m)) await bpf.rename(`${pinDir}/maps-new/${m}`, this.#pin(m));
    await bpf.unpin(`${pinDir}/maps-new`);
    const loaded = await bpf.prog(`${pinDir}/prog-new/passlb_xdp`);
    const replaced = found !== undefined && loaded?.tag !== found.tag;
    if (found && !replaced) await bpf.unpin(`${pinDir}/prog-new`);
    else {
      if (found) for (const i of this.#o.interfaces) await bpf.attach(i, `${pinDir}/prog-new/passlb_xdp`);
      await bpf.unpin(`${pinDir}/prog`);
      await bpf.rename(`${pinDir}/prog-new`, `${pinDir}/prog`);
    }
    if (reuse.size > 0) await this.#adopt();
    const notes = await this.#ensureBarrier();
    await this.#attachAll();
    return { adopted: reuse.size > 0, replaced, ...(notes.length > 0 && { notes }) };
  }

  /** the array-of-maps the batches' RCU barriers update (bpftool.ts MapOp), created once and
   * pinned beside the maps; without one, a retired ring block waits out the pool's grace */
  async #ensureBarrier(): Promise<string[]> {
    const { bpf } = this.#o;
    const barrier = { map: `${this.#o.pinDir}/maps/rcu_barrier`, inner: this.#pin("config") };
    try {
      if (!(await bpf.exists(barrier.map))) await bpf.createBarrier(barrier.map, barrier.inner);
      this.#barrier = barrier;
      return [];
    } catch (e) {
      this.#barrier = undefined;
      return [
        `no RCU barrier map (${(e as Error).message}): a retired ring block is reused after ${this.#pool.graceMs} ms`,
      ];
    }
  }

  /** indexes and the written state from the pinned maps (a restart keeps flows and counters) */
  async #adopt(): Promise<void> {
    const { bpf } = this.#o;
    const dumps = new Map<XdpMapName, MapEntry[]>();
    for (const m of [...CHECKED, "node_names", "svc_names"] as XdpMapName[])
      dumps.set(m, await bpf.dump(this.#pin(m)));
    // `nodes` is an array of XDP_LIMITS.nodes entries: read the named ones
    const named = (dumps.get("node_names") ?? []).filter((e) => decodeName(e.values[0]!));
    dumps.set(
      "nodes",
      await bpf.lookup(
        this.#pin("nodes"),
        named.map((e) => hex(e.key)),
      ),
    );
    // generations carry on from the last one handed out, so an index the new process gives
    // to another node never matches a flow entry of the node that held it before
    const config = dumps.get("config")?.[0]?.values[0];
    let lastGen = config ? decodeConfig(config).lastGen : 0;
    for (const e of dumps.get("nodes") ?? []) {
      const n = decodeNode(e.values[0]!);
      if (n.gen > 0) this.#indexes.gens.set(decodeU32(e.key), n.gen);
      lastGen = Math.max(lastGen, n.gen);
    }
    this.#indexes.lastGen = Math.max(this.#indexes.lastGen, lastGen);
    for (const e of dumps.get("node_names") ?? []) {
      const name = decodeName(e.values[0]!);
      if (name) this.#indexes.nodes.set(name, decodeU32(e.key));
    }
    for (const e of dumps.get("svc_names") ?? []) {
      const name = decodeName(e.values[0]!);
      if (name) this.#indexes.services.set(name, decodeU32(e.key));
    }
    for (const e of dumps.get("vips") ?? []) {
      const v = decodeVipValue(e.values[0]!);
      this.#indexes.listeners.set(hex(e.key), v.listener);
    }
    // the blocks the ring ids point at stay untouched until nothing names them
    const ringIds = new Map<number, string>();
    for (const e of dumps.get("ring_ids") ?? []) {
      const ref = e.values[0]!;
      ringIds.set(decodeU32(e.key), this.#pool.reserve(decodeU32(ref), decodeU32(ref.subarray(4))));
    }
    this.#applied = { maps: kernelMaps(dumps), ringIds };
  }

  async #attachAll(): Promise<string[]> {
    const prog = await this.#o.bpf.prog(this.#progPin);
    const fixed: string[] = [];
    for (const i of this.#o.interfaces) {
      const a = await this.#o.bpf.attached(i);
      if (a.progId === prog?.id) continue;
      await this.#o.bpf.attach(i, this.#progPin);
      fixed.push(a.progId === undefined ? `program not attached to ${i}` : `another program on ${i}`);
    }
    return fixed;
  }

  apply(state: LbDesiredState): Promise<ApplyReport> {
    return this.#serialise(() => this.#apply(state));
  }

  async #apply(state: LbDesiredState): Promise<ApplyReport> {
    const started = this.#o.now();
    this.#last = state;
    const addresses = new Set<string>();
    const seen = new Set<unknown>();
    for (const f of state.forwarding)
      if (!seen.has(f.plan.members) && seen.add(f.plan.members))
        for (const m of f.plan.members)
          for (const a of [m.addresses.IPv4, m.addresses.IPv6]) if (a !== undefined) addresses.add(a);
    const nextHops = await this.#o.nextHops.resolve([...addresses]);
    const desired = renderXdpMaps({
      forwarding: state.forwarding,
      zones: state.zones,
      nextHops,
      seed: this.#o.seed,
      indexes: this.#indexes,
      memo: this.#memo,
      renderMemo: this.#renderMemo,
    });
    // the last pass's barrier (its child process ran while this pass rendered) frees the
    // blocks it retired before this pass places rings
    const renderedOnly = this.#o.now();
    await this.#settling;
    const rendered = this.#o.now();
    const update = planXdpUpdate(
      this.#applied,
      desired,
      this.#config,
      this.#pool,
      started,
      this.#pin,
      this.#barrier,
    );
    const planned = this.#o.now();
    // the barrier is not part of the commit: it runs after, and the next pass waits for it
    const barrier = update.barrier ? update.ops.at(-1) : undefined;
    try {
      await this.#o.bpf.batch(barrier ? update.ops.slice(0, -1) : update.ops);
    } catch (e) {
      // part of the batch may have landed: compare with the kernel next time
      this.#applied = { maps: new Map(), ringIds: new Map() };
      this.#pool.distrust();
      throw e;
    }
    this.#applied = update.applied;
    if (barrier)
      // a barrier that fails leaves the blocks retired: the pool's grace frees them
      this.#settling = this.#o.bpf.batch([barrier]).then(
        () => this.#pool.settle(),
        () => undefined,
      );
    const written = this.#o.now();
    pruneIndexes(this.#indexes, desired);
    return {
      ops: update.ops.length,
      ms: this.#o.now() - started,
      phases: {
        render: renderedOnly - started,
        barrier: rendered - renderedOnly,
        plan: planned - rendered,
        write: written - planned,
      },
    };
  }

  check(): Promise<readonly string[]> {
    return this.#serialise(() => this.#check());
  }

  async #check(): Promise<readonly string[]> {
    const { bpf } = this.#o;
    const findings: string[] = [];
    if (!(await bpf.prog(this.#progPin))) {
      findings.push(`no program pinned at ${this.#progPin}`);
      await this.#start();
    }
    findings.push(...(await this.#attachAll()));
    let differs = false;
    const read = async (m: XdpMapName) =>
      m === "nodes"
        ? bpf.lookup(this.#pin(m), [...(this.#applied.maps.get("nodes")?.keys() ?? [])])
        : bpf.dump(this.#pin(m));
    for (const m of [...CHECKED, "nodes"] as XdpMapName[]) {
      const kernel = kernelMaps(new Map([[m, await read(m)]])).get(m)!;
      const written = this.#applied.maps.get(m) ?? new Map<string, string>();
      const diff = mapDifference(written, kernel, ARRAYS.has(m));
      if (diff > 0) {
        findings.push(
          `map ${m}: ${diff} entr${diff === 1 ? "y differs" : "ies differ"} from what was written`,
        );
        differs = true;
      }
    }
    const rings = await this.#ringDrift();
    if (rings > 0) {
      findings.push(`map rings: ${rings} slot${rings === 1 ? " differs" : "s differ"} from what was written`);
      differs = true;
    }
    if (differs) {
      const dumps = new Map<XdpMapName, MapEntry[]>();
      for (const m of [...CHECKED, "nodes"] as XdpMapName[]) dumps.set(m, await read(m));
      // rings are rewritten too: a flushed vips map may come with scrubbed rings
      this.#applied = { maps: kernelMaps(dumps), ringIds: new Map() };
      this.#pool.distrust();
    }
    // every interval: next hops again (a neighbour resolved, a MAC changed)
    if (this.#last) await this.#apply(this.#last);
    return findings;
  }

  /** ring slots in use that differ from what the pool says their blocks hold (unknown
   * blocks are not compared: they are rewritten whole on their next placement) */
  async #ringDrift(): Promise<number> {
    let differ = 0;
    for (const value of this.#applied.maps.get("ring_ids")?.values() ?? []) {
      const b = hexBytes(value);
      const base = decodeU32(b);
      const size = decodeU32(b.subarray(4));
      const want = this.#pool.content(base);
      if (!want || size === 0) continue;
      const keys = Array.from({ length: size }, (_, k) => encodeU32(base + k));
      const got = new Map<number, number>();
      for (const e of await this.#o.bpf.lookup(this.#pin("rings"), keys))
        got.set(decodeU32(e.key), decodeU32(e.values[0]!));
      for (let k = 0; k < size; k++) if (got.get(base + k) !== want[k]) differ++;
    }
    return differ;
  }

  counters(): Promise<DataplaneCounters> {
    return this.#serialise(() => this.#counters());
  }

  async #counters(): Promise<DataplaneCounters> {
    const { bpf } = this.#o;
    const sum = (e: MapEntry): TrafficCount =>
      e.values.reduce(
        (a, v) => {
          const c = decodeCounter(v);
          return { packets: a.packets + c.packets, bytes: a.bytes + c.bytes };
        },
        { packets: 0, bytes: 0 },
      );
    const byIndex = async (m: XdpMapName, indexes?: Iterable<number>) =>
      new Map(
        (indexes === undefined
          ? await bpf.dump(this.#pin(m))
          : await bpf.lookup(
              this.#pin(m),
              [...indexes].map((i) => encodeU32(i)),
            )
        ).map((e) => [decodeU32(e.key), sum(e)]),
      );
    const services = new Map<string, TrafficCount>();
    const svc = await byIndex("svc_stats", this.#indexes.services.byName.values());
    for (const [name, i] of this.#indexes.services.byName)
      services.set(name, svc.get(i) ?? { packets: 0, bytes: 0 });
    const nodes = new Map<string, TrafficCount>();
    const nodeStats = await byIndex("node_stats", this.#indexes.nodes.byName.values());
    for (const [name, i] of this.#indexes.nodes.byName) {
      const now = nodeStats.get(i) ?? { packets: 0, bytes: 0 };
      const seen = this.#nodeBase.get(i);
      // an index another node had: count from its reading when this node took it
      const base = seen?.name === name ? seen : { name, ...(seen ? now : { packets: 0, bytes: 0 }) };
      this.#nodeBase.set(i, base);
      const node = name.slice(0, name.lastIndexOf("/"));
      const had = nodes.get(node) ?? { packets: 0, bytes: 0 };
      nodes.set(node, {
        packets: had.packets + now.packets - base.packets,
        bytes: had.bytes + now.bytes - base.bytes,
      });
    }
    const reasons = new Map<string, TrafficCount>();
    const r = await byIndex("reasons");
    for (const [i, name] of XDP_REASONS.entries()) reasons.set(name, r.get(i) ?? { packets: 0, bytes: 0 });
    const entries = new Map<"IPv4" | "IPv6", number>([
      ["IPv4", 0],
      ["IPv6", 0],
    ]);
    for (const e of await bpf.dump(this.#pin("flows"))) {
      const fam = e.key[0] === 6 ? "IPv6" : "IPv4";
      entries.set(fam, entries.get(fam)! + 1);
    }
    const evictions = this.#evictions.read(
      reasons.get("flow_new")!.packets,
      entries.get("IPv4")! + entries.get("IPv6")!,
    );
    return { services, nodes, reasons, flows: { entries, capacity: XDP_LIMITS.flows, evictions } };
  }

  async stop(): Promise<void> {
    await this.#serial.catch(() => undefined);
    await this.settled();
  }

  /** resolves once the last pass's RCU barrier ran (its retired ring blocks are free) */
  async settled(): Promise<void> {
    await this.#settling;
  }

  /** Detaches the program and removes every pin (`passlb lb --xdp-detach`). */
  async remove(): Promise<void> {
    for (const i of this.#o.interfaces) await this.#o.bpf.detach(i).catch(() => undefined);
    await this.#o.bpf.unpin(this.#o.pinDir);
  }

  #serialise<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#serial.catch(() => undefined).then(fn);
    this.#serial = run;
    return run;
  }
}

/** dumps → key hex → value hex, zero-valued array elements left out */
function kernelMaps(dumps: ReadonlyMap<XdpMapName, MapEntry[]>): Map<XdpMapName, Map<string, string>> {
  const out = new Map<XdpMapName, Map<string, string>>();
  for (const [m, entries] of dumps) {
    const map = new Map<string, string>();
    for (const e of entries) {
      const v = hex(e.values[0]!);
      if (ARRAYS.has(m) && isZero(v)) continue;
      map.set(hex(e.key), v);
    }
    out.set(m, map);
  }
  return out;
}

/** how many keys differ; for arrays a zero element equals a missing one */
function mapDifference(
  written: ReadonlyMap<string, string>,
  kernel: ReadonlyMap<string, string>,
  array: boolean,
): number {
  let n = 0;
  for (const [k, v] of written)
    if ((kernel.get(k) ?? (array ? "" : undefined)) !== v && !(array && isZero(v) && !kernel.has(k))) n++;
  for (const k of kernel.keys()) if (!written.has(k)) n++;
  return n;
}
