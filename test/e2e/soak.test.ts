/**
 * The soak's 60 s version (issue 16 §4; the hour is bench/soak.bench.ts): churn against
 * the real `passlb lb` (nftables) and node agents in the end-to-end lab — 10 endpoint
 * changes a second, node-a2's link down for 10 s, 100 new connections a second — with the
 * bounds of the long run (test/e2e/soak.ts): RSS and open fds of the LB and every agent
 * grow ≤ 15 % here (≤ 5 % in the hour; `rssBoundPct`) from the first to the last quarter after warm-up, every checkpoint's changes
 * programmed within 8 s, the kernel state of the LB and of every node back to the one
 * before once the topology is, and the LB's fds at rest back where they were. Root only;
 * otherwise skipped with the reason. The lab (unique name `soak<pid>`) is removed when the
 * test ends, pass or fail.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { labUnavailable, startLab } from "./lab-harness.ts";
import { runSoak, SOAK_TOPOLOGY, soakTable, soakViolations } from "./soak.ts";

const why = labUnavailable();

test("soak, 60 s: RSS and fds flat, every change programmed, nothing leaked", {
  timeout: 300_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, SOAK_TOPOLOGY, { prefix: "soak", lb: true });
  const figures = await runSoak(lab, 60, (line) => t.diagnostic(line));
  for (const line of soakTable(figures).split("\n")) t.diagnostic(line);
  assert.deepEqual(soakViolations(figures), []);
});
