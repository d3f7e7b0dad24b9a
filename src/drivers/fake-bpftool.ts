/**
 * The fake of the bpftool driver (bpftool.ts): pinned programs and maps in memory, the same
 * typed operations applied in order, failures injectable per call. Map values are kept as
 * the hex text the driver would send; dumps give bytes back as bpftool would.
 */
import { PasslbError } from "../errors.ts";
import type { BpfTool, MapEntry, MapOp, XdpAttachment } from "./bpftool.ts";

const bytes = (hex: string): Uint8Array =>
  Uint8Array.from(hex.split(" ").filter(Boolean), (h) => Number.parseInt(h, 16));

export class FakeBpfTool implements BpfTool {
  /** pin path → key hex → value hex */
  readonly maps = new Map<string, Map<string, string>>();
  /** pin path → program */
  readonly progs = new Map<string, { id: number; tag: string }>();
  readonly links = new Map<string, number | undefined>();
  readonly calls: string[] = [];
  /** the tag the next load gives its programs (a changed object) */
  tag = "t1";
  failNext: string | undefined;
  #ids = 100;

  constructor(readonly mapNames: readonly string[]) {}

  #maybeFail(what: string): void {
    this.calls.push(what);
    if (this.failNext && what.startsWith(this.failNext)) {
      this.failNext = undefined;
      throw new PasslbError("bpf_failed", `${what}: injected failure`);
    }
  }

  async loadAll(_object: string, progDir: string, mapDir: string, reuse: ReadonlyMap<string, string>) {
    this.#maybeFail(`loadAll ${progDir}`);
    for (const name of ["passlb_xdp", "passlb_xdp_pass"])
      this.progs.set(`${progDir}/${name}`, { id: this.#ids++, tag: `${this.tag}-${name}` });
    for (const name of this.mapNames) {
      const kept = reuse.get(name);
      this.maps.set(`${mapDir}/${name}`, kept ? this.maps.get(kept)! : new Map());
    }
  }

  async prog(pin: string) {
    return this.progs.get(pin);
  }

  async batch(ops: readonly MapOp[]) {
    this.#maybeFail(`batch ${ops.length}`);
    for (const o of ops) {
      const m = this.maps.get(o.map);
      if (!m) throw new PasslbError("bpf_failed", `no map pinned at ${o.map}`);
      if (o.op === "barrier") {
        if (!this.maps.has(o.inner)) throw new PasslbError("bpf_failed", `no map pinned at ${o.inner}`);
        this.barriers++;
      } else if (o.op === "update") m.set(o.key, o.value);
      else if (!m.delete(o.key)) throw new PasslbError("bpf_failed", `delete ${o.map}: no such key`);
    }
  }

  async dump(mapPin: string): Promise<MapEntry[]> {
    this.#maybeFail(`dump ${mapPin}`);
    const m = this.maps.get(mapPin);
    if (!m) throw new PasslbError("bpf_failed", `no map pinned at ${mapPin}`);
    return [...m].map(([k, v]) => ({ key: bytes(k), values: [bytes(v)] }));
  }

  async lookup(mapPin: string, keys: readonly string[]): Promise<MapEntry[]> {
    this.#maybeFail(`lookup ${mapPin}`);
    const m = this.maps.get(mapPin);
    if (!m) throw new PasslbError("bpf_failed", `no map pinned at ${mapPin}`);
    return keys.flatMap((k) => {
      const v = m.get(k);
      return v === undefined ? [] : [{ key: bytes(k), values: [bytes(v)] }];
    });
  }

  async attach(ifname: string, progPin: string) {
    this.#maybeFail(`attach ${ifname}`);
    const p = this.progs.get(progPin);
    if (!p) throw new PasslbError("bpf_failed", `no program pinned at ${progPin}`);
    this.links.set(ifname, p.id);
  }

  async detach(ifname: string) {
    this.links.set(ifname, undefined);
  }

  async attached(ifname: string): Promise<XdpAttachment> {
    return { ifname, progId: this.links.get(ifname) };
  }

  async exists(path: string) {
    const under = (p: string) => p === path || p.startsWith(`${path}/`);
    return [...this.maps.keys(), ...this.progs.keys()].some(under);
  }

  async unpin(path: string) {
    for (const store of [this.maps, this.progs] as Map<string, unknown>[])
      for (const k of [...store.keys()]) if (k === path || k.startsWith(`${path}/`)) store.delete(k);
  }

  async rename(from: string, to: string) {
    for (const store of [this.maps, this.progs] as Map<string, unknown>[])
      for (const [k, v] of [...store])
        if (k === from || k.startsWith(`${from}/`)) {
          store.delete(k);
          store.set(to + k.slice(from.length), v);
        }
  }

  async checkBpffs() {}

  /** barrier ops run so far */
  barriers = 0;

  async createBarrier(pin: string, inner: string) {
    this.#maybeFail(`createBarrier ${pin}`);
    if (!this.maps.has(inner)) throw new PasslbError("bpf_failed", `no map pinned at ${inner}`);
    if (this.maps.has(pin)) throw new PasslbError("bpf_failed", `${pin}: File exists`);
    this.maps.set(pin, new Map());
  }
}
