/**
 * The soak (issue 16 §4) for as long as asked (default 60 minutes): churn against the real
 * `passlb lb` (nftables) and node agents in the end-to-end lab — 10 endpoint changes a
 * second, a node's link down for 10 s every minute, 100 new connections a second — and its
 * figures (test/e2e/soak.ts): RSS and open fds of the LB and of every agent, first against
 * last quarter after warm-up (the baseline is the same process earlier in the same run),
 * changes written and programmed at each checkpoint, connections failed, and whether the
 * kernel state and the LB's fds at rest are back after the run. Exits 1 when a bound of
 * the issue is missed. Root only. The lab is named `sokb<pid>` and removed at the end.
 * Run: node --import tsx bench/soak.bench.ts [--minutes 60]
 */
import type { TestContext } from "node:test";
import { labUnavailable, startLab } from "../test/e2e/lab-harness.ts";
import { runSoak, SOAK_TOPOLOGY, soakTable, soakViolations } from "../test/e2e/soak.ts";

const i = process.argv.indexOf("--minutes");
const minutes = i >= 0 ? Number(process.argv[i + 1]) : 60;
const why = labUnavailable();
if (why) {
  console.error(`soak not run: ${why}`);
  process.exit(2);
}
const cleanups: (() => unknown)[] = [];
const ctx = { after: (fn: () => unknown) => cleanups.push(fn) } as unknown as TestContext;
const cleanup = async () => {
  for (const fn of cleanups.reverse()) await fn();
  cleanups.length = 0;
};
for (const sig of ["SIGINT", "SIGTERM"] as const)
  process.on(sig, () => {
    void cleanup().then(() => process.exit(130));
  });
const t0 = Date.now();
let failed = true;
try {
  const lab = await startLab(ctx, SOAK_TOPOLOGY, { prefix: "sokb", lb: true });
  const figures = await runSoak(lab, minutes * 60, (line) =>
    console.log(`${((Date.now() - t0) / 1000).toFixed(0)}s ${line}`),
  );
  console.log(`\n${soakTable(figures)}\n`);
  const v = soakViolations(figures);
  for (const line of v) console.log(`BOUND MISSED: ${line}`);
  failed = v.length > 0;
} finally {
  await cleanup();
}
process.exit(failed ? 1 : 0);
