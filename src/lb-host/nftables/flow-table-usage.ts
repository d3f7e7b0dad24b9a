/**
 * Adapter: how many entries the TCP flow maps hold (flow-map.ts), for the metrics
 * `passlb_flow_table_entries` / `passlb_flow_table_capacity` (docs/metrics.md).
 *
 * The kernel reports no element count for a set, so the map is listed
 * (`nft list map inet <table> flows4`) and its elements counted while the text streams in —
 * every entry carries its `expires` (the maps have timeouts), so counting that word counts
 * the entries without holding the listing in memory. The listing costs nft time in
 * proportion to the entries (docs/benchmarks.md "Flow table": ~0.1–0.2 ms each on a loaded
 * machine), so `FlowUsagePacer` spaces the reads: never two at once, and after a read that
 * took d, none for 20 × d (at most 5 % of a core; a few seconds at 10,000 flows, minutes at
 * a million).
 *
 * Does not: decide the sizes (flow-table-sizing.ts) or export the metrics (metrics.ts).
 */
import { spawn } from "node:child_process";
import { type FlowTableConfig, flowMapName } from "./render/flow-map.ts";
import type { Fam } from "./render/nft-state.ts";

export interface FlowTableUsage {
  readonly family: "IPv4" | "IPv6";
  readonly entries: number;
  readonly capacity: number;
}

const WORD = " expires ";

/** Counts WORD over a stream of chunks (a match may span two chunks). Pure. */
export function createEntryCounter(): { push(chunk: string): void; readonly count: number } {
  let tail = "";
  let count = 0;
  return {
    push(chunk: string) {
      const text = tail + chunk;
      for (let i = text.indexOf(WORD); i >= 0; i = text.indexOf(WORD, i + WORD.length)) count++;
      // keep what could start a match that the next chunk completes, never a whole match
      tail = text.slice(Math.max(0, text.length - (WORD.length - 1)));
    },
    get count() {
      return count;
    },
  };
}

/** When the next read may start (pure but for the clock it is given). */
export class FlowUsagePacer {
  readonly #now: () => number;
  #busy = false;
  #notBefore = Number.NEGATIVE_INFINITY;

  constructor(now: () => number) {
    this.#now = now;
  }

  /** Runs `read` unless one runs or the last one was too recent; its failure propagates. */
  async maybe<T>(read: () => Promise<T>): Promise<T | undefined> {
    if (this.#busy || this.#now() < this.#notBefore) return undefined;
    this.#busy = true;
    const started = this.#now();
    try {
      return await read();
    } finally {
      this.#busy = false;
      this.#notBefore = this.#now() + 20 * (this.#now() - started);
    }
  }
}

export async function readFlowTableUsage(
  table: string,
  config: FlowTableConfig,
  nft = "nft",
): Promise<FlowTableUsage[]> {
  const out: FlowTableUsage[] = [];
  for (const fam of [4, 6] as Fam[]) {
    const entries = await countEntries(nft, table, flowMapName(fam));
    out.push({ family: fam === 4 ? "IPv4" : "IPv6", entries, capacity: config.size });
  }
  return out;
}

function countEntries(nft: string, table: string, map: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(nft, ["list", "map", "inet", table, map], { stdio: ["ignore", "pipe", "pipe"] });
    const counter = createEntryCounter();
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => counter.push(d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      err += d;
    });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(counter.count) : reject(new Error(`nft list map ${map}: ${err.trim() || code}`)),
    );
  });
}
