/**
 * Faults on the LB host under load (issue 16 §1), in the lab as root with real packets:
 * while one client makes a new TCP connection every 20 ms to an eTP Cluster VIP and
 * another holds long-lived ones to the weighted eTP Local VIP, someone
 *   - deletes the `inet passlb` table, or flushes its `dispatch4` map, by hand;
 *   - deletes passlb's policy rules (prefs 3100-3199), or flushes its route tables, by hand;
 *   - SIGKILLs `passlb lb` and starts it again;
 *   - SIGKILLs a node's `passlb agent` and starts it again.
 * Bounds: the kernel faults are repaired within one drift interval (`--drift-check-ms`,
 * 5 s by default) plus 1 s for the pass and a loaded machine's late timers — every new
 * connection started later succeeds; the connections that failed meanwhile are counted
 * and printed. The restarts lose nothing: 0 failed new connections, 0 broken long-lived
 * ones, and the restarted LB adopts the table (same kernel handle: no flush, no replace).
 * Root only; otherwise skipped with the reason. The lab (unique name `dft<pid>`) is removed
 * when the test ends, pass or fail.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { underLoad as runUnderLoad } from "./under-load.ts";

const TOPOLOGY = "test/fixtures/lab/e2e/topology.yaml";
const DRIFT_MS = 5000; // passlb lb's default --drift-check-ms
const BOUND_MS = DRIFT_MS + 1000;
const why = labUnavailable();

test("faults on the LB host under load: drift repaired within one interval, restarts lose nothing", {
  timeout: 300_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "dft", lb: true });
  const cluster = await lab.vip("e2e/any");
  const local = await lab.vip("e2e/web");
  const nftLb = (...args: string[]) => lab.exec("lb", ["nft", ...args]);
  const ipLb = (...args: string[]) => lab.exec("lb", ["ip", ...args]);

  /** Both clients for `ms` (new connections to the Cluster VIP, long-lived ones to the Local one), `fault` 2.5 s in. */
  const underLoad = (ms: number, fault: () => Promise<void> | void) =>
    runUnderLoad(
      lab,
      {
        stream: { client: "client-a", target: `${cluster}:81` },
        hold: { client: "client-b", target: `${local}:80` },
      },
      ms,
      fault,
    );

  /** the LB's log lines since a byte offset that tell what repaired what */
  const lbLog = () => readFileSync(lab.state.processes.find((p) => p.role === "lb")!.log, "utf8");
  const repairs = (from: number) =>
    lbLog()
      .slice(from)
      .split("\n")
      .filter((l) => /drift|full sync|sync failed|routes/.test(l))
      .slice(0, 6)
      .join(" | ");

  const tableHandle = () =>
    (
      JSON.parse(nftLb("-j", "list", "tables")).nftables as { table?: { name: string; handle: number } }[]
    ).find((i) => i.table?.name === "passlb")?.table?.handle;

  const kernelFaults: [string, () => void][] = [
    ["the inet passlb table deleted", () => void nftLb("delete", "table", "inet", "passlb")],
    ["its dispatch4 map flushed", () => void nftLb("flush", "map", "inet", "passlb", "dispatch4")],
    [
      "passlb's policy rules deleted",
      () => {
        // every rule of passlb's rule tree (prefs 3100-3199, policy-routes.ts wantedRules)
        for (const fam of ["-4", "-6"])
          for (let pref = 3100; pref < 3200; pref++)
            for (let i = 0; i < 100; i++) {
              try {
                ipLb(fam, "rule", "del", "pref", String(pref));
              } catch {
                break;
              }
            }
      },
    ],
    [
      "passlb's route tables flushed",
      () => {
        for (const fam of ["-4", "-6"] as const)
          for (const r of JSON.parse(ipLb("-j", fam, "rule", "show")) as {
            priority: number;
            table?: string;
          }[])
            if (r.priority >= 3100 && r.priority < 3200 && /^\d+$/.test(r.table ?? ""))
              ipLb(fam, "route", "flush", "table", r.table!);
      },
    ],
  ];
  for (const [what, fault] of kernelFaults)
    await t.test(`${what}: restored within one drift interval`, async (st) => {
      const logFrom = lbLog().length;
      const r = await underLoad(DRIFT_MS + 6000, fault);
      st.diagnostic(`${what}: the LB: ${repairs(logFrom)}`);
      st.diagnostic(
        `${what}: ${r.failed.length} of ${r.s.events.length} new connections failed (${JSON.stringify(r.errors)}), the last one started ${r.lastFailed ?? "-"} ms after the fault; ${r.broken.length} of ${r.h.connections.length} long-lived connections stalled > 2 s or broke (${JSON.stringify(r.broken.map((c) => c.error))})`,
      );
      const failedBefore = r.before.filter((e) => !e.ok);
      assert.ok(r.before.length >= 20, `${what}: only ${r.before.length} connections before the fault`);
      assert.deepEqual(failedBefore, [], `${what}: connections failed before the fault`);
      assert.ok(r.failed.length > 0, `${what}: the fault had no effect (the test would prove nothing)`);
      const after = r.after(BOUND_MS);
      assert.ok(after.length > 100, `${what}: only ${after.length} connections after the bound`);
      assert.deepEqual(
        after.filter((e) => !e.ok).map((e) => ({ ...e, sinceFault: r.sinceFault(e) })),
        [],
        `${what}: new connections still failed later than the bound (${BOUND_MS} ms after the fault)`,
      );
    });

  await t.test(
    "passlb lb SIGKILLed and restarted: 0 failed new connections, 0 broken long-lived ones",
    async (st) => {
      const handle = tableHandle();
      assert.ok(handle !== undefined);
      const r = await underLoad(10_000, async () => void (await lab.restart("lb", "lb", false, "SIGKILL")));
      st.diagnostic(
        `lb SIGKILL: ${r.failed.length} of ${r.s.events.length} new connections failed; ${r.broken.length} of ${r.h.connections.length} long-lived broke`,
      );
      assert.deepEqual(r.errors, {}, "no new connection failed");
      assert.deepEqual(r.broken, [], "no long-lived connection broke or stalled");
      await sleep(1000);
      assert.equal(tableHandle(), handle, "the new process adopted the table: same handle, never replaced");
    },
  );

  await t.test("passlb agent SIGKILLed and restarted: its node's traffic loses nothing", async (st) => {
    const r = await underLoad(
      10_000,
      async () => void (await lab.restart("agent", "node-a1", false, "SIGKILL")),
    );
    st.diagnostic(
      `agent SIGKILL: ${r.failed.length} of ${r.s.events.length} new connections failed; ${r.broken.length} of ${r.h.connections.length} long-lived broke; long-lived per node ${JSON.stringify(
        Object.fromEntries(
          ["node-a1", "node-a2"].map((n) => [n, r.h.connections.filter((c) => c.node === n).length]),
        ),
      )}`,
    );
    assert.ok(
      r.s.events.some((e) => e.node === "node-a1" && r.s.started + e.t > r.faultAt) &&
        r.h.connections.some((c) => c.node === "node-a1"),
      "node-a1 carried new and long-lived connections while its agent was down",
    );
    assert.deepEqual(r.errors, {}, "no new connection failed");
    assert.deepEqual(r.broken, [], "no long-lived connection broke or stalled");
  });
});
