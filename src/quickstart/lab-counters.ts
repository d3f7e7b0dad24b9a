/**
 * Adapter: the live view's per-pod counters in lab mode (lab-view.ts says what they count):
 * installs each node's `inet plbview` table, updates it when the lab's pods change (kept
 * counters keep their values, counters of pods that left are deleted) and reads them back
 * as `pod|protocol|port` → new connections so far. Only `ip netns exec NODE nft`.
 */
import { execFile, spawnSync } from "node:child_process";
import type { LabLayout } from "../lab/lab-layout.ts";
import { type PodCounter, parseCounters, podCounterScript, VIEW_TABLE } from "./lab-view.ts";

export class LabCounters {
  /** node namespace → its counters */
  readonly #counters = new Map<string, PodCounter[]>();

  /** installs or updates every node's table for this layout; throws when nft refuses */
  install(layout: LabLayout): void {
    const previous = new Map<string, PodCounter[]>();
    for (const counters of this.#counters.values()) if (counters[0]) previous.set(counters[0].node, counters);
    const scripts = podCounterScript(layout, previous);
    this.#counters.clear();
    for (const n of layout.nodes) {
      const plan = scripts.get(n.name);
      if (!plan) continue;
      const r = spawnSync("ip", ["netns", "exec", n.ns, "nft", "-f", "-"], {
        input: plan.script,
        encoding: "utf8",
      });
      if (r.status !== 0) throw new Error(`counters in ${n.ns}: ${(r.stderr || "").trim()}`);
      this.#counters.set(n.ns, plan.counters);
    }
  }

  /** every counter's value now (a node that does not answer counts nothing) */
  async sample(): Promise<Map<string, number>> {
    const values = new Map<string, number>();
    await Promise.all(
      [...this.#counters].map(async ([ns, counters]) => {
        const json = await run([
          "ip",
          "netns",
          "exec",
          ns,
          "nft",
          "-j",
          "list",
          "counters",
          "table",
          "inet",
          VIEW_TABLE,
        ]);
        const parsed = parseCounters(json);
        for (const c of counters) values.set(`${c.pod}|${c.protocol}|${c.port}`, parsed.get(c.name) ?? 0);
      }),
    );
    return values;
  }
}

function run(argv: readonly string[]): Promise<string> {
  return new Promise((resolve) => {
    execFile(argv[0]!, argv.slice(1), { encoding: "utf8", timeout: 5000 }, (_err, stdout) =>
      resolve(stdout ?? ""),
    );
  });
}
