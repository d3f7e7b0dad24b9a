/**
 * The TCP flow table under drift (issue 25; docs/dataplane-nftables.md "Flow pinning",
 * "Keeping the kernel right"), in the lab as root with the real kernel: while 16 long-lived
 * connections exchange a line every 100 ms through `passlb lb` (drift check every 2 s),
 * someone
 *   - flushes the `flows4` map: not configuration (the packet path writes it), so no
 *     repair: each flow's next packet finds its conntrack mark and writes its entry back;
 *   - flushes the flow table's `write` chain: drift, restored by the next check;
 *   - deletes the flow table (`inet passlb-flows`): restored by the next check, and the
 *     entries come back from conntrack marks;
 *   - deletes passlb's own table: restored by the next check (a full sync), while the flow
 *     table, a table of its own, keeps its entries.
 * Bounds: restored within one drift interval + 1 s; the entries back within 1 s; no
 * long-lived connection breaks before passlb's table is deleted (while it is gone nothing
 * is forwarded, so a connection may stall past the client's 2 s limit and end). Root only;
 * otherwise skipped with the reason. The lab (`fdrf<pid>`) is removed when the test ends,
 * pass or fail; every loop is bounded.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type Lab, labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { type HeldRun, holdLoad } from "./under-load.ts";

const why = labUnavailable();
const DRIFT_MS = 2000;
const HELD = 16;

/** elements of a flow map in the LB namespace; undefined when the map is missing */
function flowEntries(lab: Lab, map: string): number | undefined {
  try {
    return (lab.exec("lb", ["nft", "list", "map", "inet", "passlb-flows", map]).match(/ expires /g) ?? [])
      .length;
  } catch {
    return undefined;
  }
}

function chainRules(lab: Lab, chain: string): number | undefined {
  try {
    const j = JSON.parse(lab.exec("lb", ["nft", "-j", "list", "chain", "inet", "passlb-flows", chain])) as {
      nftables: { rule?: unknown }[];
    };
    return j.nftables.filter((i) => i.rule).length;
  } catch {
    return undefined;
  }
}

function tableExists(lab: Lab): boolean {
  try {
    lab.exec("lb", ["nft", "list", "table", "inet", "passlb"]);
    return true;
  } catch {
    return false;
  }
}

/** ms until `ok()` holds, polling every 100 ms, or undefined after `limitMs` */
async function within(limitMs: number, ok: () => boolean): Promise<number | undefined> {
  const start = Date.now();
  while (Date.now() - start <= limitMs) {
    if (ok()) return Date.now() - start;
    await sleep(100);
  }
  return undefined;
}

test("flow table drift: a flushed map re-learns from conntrack, a flushed chain or a deleted table is restored within one interval", {
  timeout: 180_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, "test/fixtures/lab/reuse/lb-path.yaml", {
    prefix: "fdrf",
    lb: true,
    lbArgs: [`--drift-check-ms=${DRIFT_MS}`],
  });
  const vip = await lab.vip("reuse/web");
  const held: Promise<HeldRun> = holdLoad(lab, { client: "client-a", target: `${vip}:80` }, 30_000, HELD);
  const pinned = () => (flowEntries(lab, "flows4") ?? 0) >= HELD;
  assert.notEqual(await within(5000, pinned), undefined, "the held connections have their entries");

  lab.exec("lb", ["nft", "flush", "map", "inet", "passlb-flows", "flows4"]);
  const relearned = await within(1000, pinned);
  t.diagnostic(`flows4 flushed: ${HELD} entries back after ${relearned} ms`);
  assert.notEqual(relearned, undefined, "entries come back from conntrack marks within 1 s");

  lab.exec("lb", ["nft", "flush", "chain", "inet", "passlb-flows", "write"]);
  const chainBack = await within(DRIFT_MS + 1000, () => chainRules(lab, "write") === 4);
  t.diagnostic(`write chain flushed: restored after ${chainBack} ms`);
  assert.notEqual(chainBack, undefined, `the write chain restored within ${DRIFT_MS + 1000} ms`);

  lab.exec("lb", ["nft", "delete", "table", "inet", "passlb-flows"]);
  const flowsBack = await within(
    DRIFT_MS + 1000,
    () => flowEntries(lab, "flows4") !== undefined && flowEntries(lab, "flows6") !== undefined,
  );
  t.diagnostic(`flow table deleted: restored after ${flowsBack} ms`);
  assert.notEqual(flowsBack, undefined, `the flow table restored within ${DRIFT_MS + 1000} ms`);
  const again = await within(1000, pinned);
  t.diagnostic(`flow table deleted: ${HELD} entries back ${again} ms after it`);
  assert.notEqual(again, undefined, "entries come back from conntrack marks within 1 s");

  // passlb's own table: a full sync replaces it; the flow table and its entries stay
  const deletedAt = Date.now();
  lab.exec("lb", ["nft", "delete", "table", "inet", "passlb"]);
  const tableBack = await within(DRIFT_MS + 1000, () => chainRules(lab, "follow") === 2 && tableExists(lab));
  t.diagnostic(
    `passlb table deleted: restored after ${tableBack} ms; flow entries meanwhile ${flowEntries(lab, "flows4")}`,
  );
  assert.notEqual(tableBack, undefined, `passlb's table restored within ${DRIFT_MS + 1000} ms`);
  assert.ok(pinned(), "the flow entries outlived passlb's table");

  const r = await held;
  const broken = r.connections.filter((c) => !c.ok);
  t.diagnostic(
    `long-lived: ${broken.length} of ${HELD} ended early, at ${JSON.stringify(broken.map((c) => c.at - deletedAt))} ms after the table was deleted`,
  );
  assert.equal(r.connections.length, HELD);
  // while the table is gone nothing is forwarded (up to one interval): a connection may
  // stall past the client's 2 s limit then; before it, none may break
  assert.deepEqual(
    broken.filter((c) => c.at < deletedAt),
    [],
    "no long-lived connection broke through the flow table's faults",
  );
});
