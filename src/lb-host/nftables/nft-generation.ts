/**
 * The kernel's nftables generation as a cheap drift signal (issue 16). Every committed
 * nftables transaction in a network namespace bumps one generation id, and `nft monitor`
 * prints `# new generation N by process P (comm)` after each (nftables src/monitor.c,
 * netlink_events_newgen_cb; measured here with nft 1.0.6: a filtered monitor such as
 * `nft monitor tables` prints no generation lines, so the monitor runs unfiltered). While
 * no transaction was committed since the table was last compared, it cannot have drifted,
 * and the drift check skips listing it.
 *
 * - generationOf (pure): one monitor line → the generation it announces, or undefined;
 * - createNftGenerationWatch (adapter): one long-running `nft monitor` child; `token()` is
 *   undefined until the monitor has printed its first generation (before that, a commit
 *   may have happened before it subscribed) and again whenever it has exited (restarted
 *   after `restartMs`, doubling up to 30 s while it keeps exiting without printing a
 *   generation): undefined means "unknown, compare everything".
 * - tableToken(table): changes only with a commit whose monitor lines name that table
 *   (`delete rule inet passlb-flows write handle 3`, `delete table inet passlb-flows`, as
 *   the monitor prints each object of a transaction before its generation line): the flow
 *   table, whose listing costs time in proportion to its entries (docs/benchmarks.md
 *   "Flow table"), is listed only after someone touched it, not after every passlb commit.
 *   Packet-path updates of its maps commit nothing and print nothing.
 * Does not: compare tables (nft-drift.ts) or decide when to look (lb-controller.ts).
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export interface GenerationWatch {
  /** changes with every committed nftables transaction; undefined while unknown */
  token(): string | undefined;
  /** changes with every committed transaction that named `table`; undefined while unknown */
  tableToken?(table: string): string | undefined;
  close(): void;
}

export function generationOf(line: string): number | undefined {
  const m = /^# new generation (\d+)\b/.exec(line);
  return m ? Number(m[1]) : undefined;
}

/** the table one monitor line names (`add rule inet passlb-flows write …` → passlb-flows) */
export function tableOf(line: string): string | undefined {
  return /^(?:add|delete|flush|update|replace|insert|destroy) \S+ (?:inet|ip|ip6|arp|bridge|netdev) (\S+)/.exec(
    line,
  )?.[1];
}

export function createNftGenerationWatch(
  options: { netns?: string; nft?: string; restartMs?: number; onExit?: (stderr: string) => void } = {},
): GenerationWatch {
  const nft = options.nft ?? "nft";
  let epoch = 0;
  let generation: number | undefined;
  /** monitor lines seen per table (this child's) */
  const touches = new Map<string, number>();
  let closed = false;
  let child: ReturnType<typeof spawn> | undefined;
  let restart: NodeJS.Timeout | undefined;
  let delay = options.restartMs ?? 1000;
  const start = () => {
    epoch++;
    generation = undefined;
    touches.clear();
    const [cmd, argv] = options.netns
      ? ["ip", ["netns", "exec", options.netns, nft, "monitor"]]
      : [nft, ["monitor"]];
    const c = spawn(cmd, argv, { stdio: ["ignore", "pipe", "pipe"] });
    child = c;
    let stderr = "";
    c.stderr?.setEncoding("utf8").on("data", (d: string) => {
      stderr = (stderr + d).slice(-2000);
    });
    createInterface({ input: c.stdout! }).on("line", (line) => {
      if (child !== c) return;
      const table = tableOf(line);
      if (table !== undefined) touches.set(table, (touches.get(table) ?? 0) + 1);
      const g = generationOf(line);
      if (g === undefined) return;
      generation = g;
      delay = options.restartMs ?? 1000; // it works: the next restart is quick again
    });
    c.on("error", () => {}); // no nft: 'close' follows, the token stays unknown
    c.on("close", () => {
      if (child !== c) return;
      child = undefined;
      generation = undefined;
      if (closed) return;
      options.onExit?.(stderr.trim());
      restart = setTimeout(start, delay);
      delay = Math.min(30_000, delay * 2);
      restart.unref();
    });
    c.unref();
  };
  start();
  return {
    token: () => (generation === undefined || !child ? undefined : `${epoch}:${generation}`),
    tableToken: (table) =>
      generation === undefined || !child ? undefined : `${epoch}:${touches.get(table) ?? 0}`,
    close() {
      closed = true;
      if (restart) clearTimeout(restart);
      const c = child;
      child = undefined;
      generation = undefined;
      if (c?.pid !== undefined) c.kill("SIGTERM");
    },
  };
}
