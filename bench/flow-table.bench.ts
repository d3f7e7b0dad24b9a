/**
 * The TCP flow table's cost (issue 25; docs/dataplane-nftables.md "Flow pinning"), as root
 * in a throwaway network namespace:
 *   1. kernel memory per flow: N entries loaded into `flows4` / `flows6` exactly as
 *      rendered (timeouts, 1 Mi size), the kernel's Slab + vmalloc growth per entry; the
 *      baseline in the same run is a conntrack entry's object size (the `nf_conntrack` slab
 *      cache's objsize × objects per slab) — what every flow already costs the host;
 *   2. what the metrics' read costs: listing and counting N entries (`nft list map`);
 *   3. IPv6 key collisions: the kernel's jhash (include/linux/jhash.h, as nft_jhash.c uses
 *      it: `jhash(tuple, len, seed)` scaled by `reciprocal_scale`) over N random IPv6
 *      tuples, colliding pairs for one 32-bit hash against the two independent ones the map
 *      uses (64 bits), beside the birthday estimate n²/2m.
 * Run: node --import tsx bench/flow-table.bench.ts [--entries 200000] [--hash-tuples 1000000]
 * Addresses: fd00::/8 and 198.51.100.0/24 keys only (nothing is sent anywhere).
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { createEntryCounter } from "../src/lb-host/nftables/flow-table-usage.ts";
import { DEFAULT_FLOW_TABLE, flowMap } from "../src/lb-host/nftables/render/flow-map.ts";
import { seededRandom } from "../src/net/seeded-random.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../test/netns.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const ENTRIES = arg("entries", 200_000);
const TUPLES = arg("hash-tuples", 1_000_000);

const meminfoKb = (key: string) =>
  Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0);
const kernelKb = () => meminfoKb("Slab") + meminfoKb("VmallocUsed");

function conntrackObjectBytes(): number | undefined {
  const line = readFileSync("/proc/slabinfo", "utf8")
    .split("\n")
    .find((l) => l.startsWith("nf_conntrack "));
  if (!line) return undefined;
  const f = line.split(/\s+/);
  // name active_objs num_objs objsize objperslab pagesperslab
  const [objsize, perSlab, pages] = [Number(f[3]), Number(f[4]), Number(f[5])];
  return Math.max(objsize, (pages * 4096) / perSlab);
}

function nft(ns: string, script: string): number {
  const t0 = performance.now();
  const r = spawnSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], {
    input: script,
    encoding: "utf8",
    maxBuffer: 1 << 30,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return performance.now() - t0;
}

function key(fam: 4 | 6, i: number): string {
  const port = 1024 + (i % 60000);
  const host = Math.floor(i / 60000);
  if (fam === 4) return `198.51.100.${1 + (host % 250)} . ${port} . 203.0.113.${1 + (i % 13)} . 443`;
  return `${(i * 2654435761) >>> 0} . ${(i * 40503 + 7) >>> 0}`;
}

function memoryPerEntry(
  ns: string,
  fam: 4 | 6,
): { bytes: number; loadMs: number; listMs: number; counted: number } {
  const m = flowMap(fam, DEFAULT_FLOW_TABLE);
  nft(ns, `add table inet plbft\nadd map inet plbft ${m.name} { ${m.decl} }\n`);
  const before = kernelKb();
  let loadMs = 0;
  const CHUNK = 5000;
  for (let i = 0; i < ENTRIES; i += CHUNK) {
    const elems: string[] = [];
    for (let j = i; j < Math.min(ENTRIES, i + CHUNK); j++)
      elems.push(`${key(fam, j)} timeout 300s : 0x5a00000${1 + (j % 8)}`);
    loadMs += nft(ns, `add element inet plbft ${m.name} { ${elems.join(", ")} }\n`);
  }
  const after = kernelKb();
  const t0 = performance.now();
  const counter = createEntryCounter();
  const r = spawnSync("ip", ["netns", "exec", ns, "nft", "list", "map", "inet", "plbft", m.name], {
    encoding: "utf8",
    maxBuffer: 1 << 30,
  });
  counter.push(r.stdout);
  const listMs = performance.now() - t0;
  nft(ns, "delete table inet plbft\n");
  return { bytes: ((after - before) * 1024) / ENTRIES, loadMs, listMs, counted: counter.count };
}

// include/linux/jhash.h: __jhash_mix / __jhash_final, JHASH_INITVAL 0xdeadbeef
const rot = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;
function jhash(words: Uint32Array, seed: number): number {
  let a = (0xdeadbeef + words.length * 4 + seed) >>> 0;
  let b = a;
  let c = a;
  let i = 0;
  let n = words.length;
  while (n > 3) {
    a = (a + words[i]!) >>> 0;
    b = (b + words[i + 1]!) >>> 0;
    c = (c + words[i + 2]!) >>> 0;
    a = (a - c) >>> 0;
    a = (a ^ rot(c, 4)) >>> 0;
    c = (c + b) >>> 0;
    b = (b - a) >>> 0;
    b = (b ^ rot(a, 6)) >>> 0;
    a = (a + c) >>> 0;
    c = (c - b) >>> 0;
    c = (c ^ rot(b, 8)) >>> 0;
    b = (b + a) >>> 0;
    a = (a - c) >>> 0;
    a = (a ^ rot(c, 16)) >>> 0;
    c = (c + b) >>> 0;
    b = (b - a) >>> 0;
    b = (b ^ rot(a, 19)) >>> 0;
    a = (a + c) >>> 0;
    c = (c - b) >>> 0;
    c = (c ^ rot(b, 4)) >>> 0;
    b = (b + a) >>> 0;
    i += 3;
    n -= 3;
  }
  if (n === 0) return c;
  if (n >= 3) c = (c + words[i + 2]!) >>> 0;
  if (n >= 2) b = (b + words[i + 1]!) >>> 0;
  a = (a + words[i]!) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rot(b, 14)) >>> 0;
  a = (a ^ c) >>> 0;
  a = (a - rot(c, 11)) >>> 0;
  b = (b ^ a) >>> 0;
  b = (b - rot(a, 25)) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rot(b, 16)) >>> 0;
  a = (a ^ c) >>> 0;
  a = (a - rot(c, 4)) >>> 0;
  b = (b ^ a) >>> 0;
  b = (b - rot(a, 14)) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rot(b, 24)) >>> 0;
  return c;
}
/** nft_jhash.c: reciprocal_scale(h, modulus) */
const scale = (h: number, mod: number) => Number((BigInt(h) * BigInt(mod)) >> 32n);

function collisions(): { n: number; pairs32: number; pairs64: number; est32: number; est64: number } {
  const random = seededRandom(25);
  // saddr (4 words), sport + daddr + dport as the registers hold them: 4 + 1 + 4 + 1 words
  const words = new Uint32Array(10);
  const seen32 = new Map<number, number>();
  const seen64 = new Map<string, number>();
  const mod = 4294967295;
  for (let i = 0; i < TUPLES; i++) {
    words[0] = 0xfd000000;
    for (let w = 1; w < 4; w++) words[w] = Math.floor(random() * 2 ** 32);
    words[4] = 1024 + Math.floor(random() * 64000);
    words[5] = 0xfd000010;
    words[6] = 0;
    words[7] = 0;
    words[8] = 1 + Math.floor(random() * 255);
    words[9] = 443;
    const a = scale(jhash(words, 42), mod);
    const b = scale(jhash(words, (42 ^ 0x5bd1e995) >>> 0), mod);
    seen32.set(a, (seen32.get(a) ?? 0) + 1);
    const k = `${a}.${b}`;
    seen64.set(k, (seen64.get(k) ?? 0) + 1);
  }
  const pairs = (m: Map<unknown, number>) => {
    let p = 0;
    for (const c of m.values()) p += (c * (c - 1)) / 2;
    return p;
  };
  const n = TUPLES;
  return {
    n,
    pairs32: pairs(seen32),
    pairs64: pairs(seen64),
    est32: (n * n) / 2 / mod,
    est64: (n * n) / 2 / mod ** 2,
  };
}

const why = kernelSkipReason();
if (why) {
  console.error(`flow-table bench not run: ${why}`);
  process.exit(2);
}
console.log(
  `load ${loadavg()
    .map((x) => x.toFixed(1))
    .join(" ")} (shared machine; figures under load)`,
);
const ct = conntrackObjectBytes();
const ns = createNetns("flowbench");
try {
  console.log(
    "\n| family | entries | kernel memory per entry | at 1 M flows | load | list + count | counted |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const fam of [4, 6] as const) {
    const r = memoryPerEntry(ns, fam);
    console.log(
      `| IPv${fam} | ${ENTRIES} | ${r.bytes.toFixed(0)} B | ${((r.bytes * 1_000_000) / 2 ** 20).toFixed(0)} MiB | ${r.loadMs.toFixed(0)} ms | ${r.listMs.toFixed(0)} ms (${((r.listMs * 1000) / ENTRIES).toFixed(1)} µs per entry) | ${r.counted} |`,
    );
    if (ct !== undefined)
      console.log(
        `|  | baseline: a conntrack entry | ${ct.toFixed(0)} B | ratio ${(r.bytes / ct).toFixed(2)} | | | |`,
      );
  }
} finally {
  deleteNetns(ns);
}
const c = collisions();
console.log(`\nIPv6 key collisions over ${c.n} random tuples (kernel jhash, seeds 42 and 42 ^ 0x5bd1e995):`);
console.log(`  one 32-bit hash: ${c.pairs32} colliding pairs (birthday estimate ${c.est32.toFixed(1)})`);
console.log(`  two hashes, 64 bits (the map's key): ${c.pairs64} (estimate ${c.est64.toExponential(1)})`);
