/**
 * The node-loss check the LB-path labs share (same segment: lb-path.test.ts and
 * node-death.test.ts; routed, through encapsulation: encap-path.test.ts): while a client
 * opens a new connection every 25 ms, `fail()` takes a node out (its link, its agent); no
 * new connection may reach it — and none fail — later than the caller's bound after the
 * fault (wall-clock, taken just before `fail()`). The figures (how many failed, how many
 * still reached the node, when the last of them started) are printed and returned; when
 * the bound is missed, the connections per half second and the LB's log are printed too.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { TestContext } from "node:test";
import type { Lab } from "./lab-harness.ts";
import { sleep } from "./lab-harness.ts";
import { type StreamEvent, streamFigures, streamLoad } from "./under-load.ts";

export interface NodeLossCase {
  readonly what: string;
  readonly client: string;
  /** `ip:port` or `[ip6]:port` */
  readonly target: string;
  readonly node: string;
  readonly boundMs: number;
  readonly fail: () => Promise<void>;
  /** whether a connection went through the lost node (default: its pod is on it; under
   * eTP Cluster a pod elsewhere sees the node's address as the client; with `through`
   * given, the check before the fault looks for that address among the clients) */
  readonly through?: (e: StreamEvent) => boolean;
}

/** What a node loss cost: new connections that failed or reached the lost node after the fault. */
export interface NodeLossFigures {
  readonly total: number;
  readonly failed: number;
  /** connections the lost node still got after the fault (they succeed while it lives) */
  readonly toNode: number;
  /** ms from the fault to the start of the last connection that failed or reached the node */
  readonly lastWrongMs: number | undefined;
}

export async function assertNodeLossBound(
  t: TestContext,
  lab: Lab,
  c: NodeLossCase,
): Promise<NodeLossFigures> {
  const { what, node, boundMs } = c;
  // the node takes connections before the failure (after an earlier case: once it is back)
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await lab.client(c.client, ["--target", c.target, "--count", "40", "--timeout", "1000"]);
    const took = c.through ? (r.clients[lab.host(node).ipv4] ?? 0) : (r.byNode[node] ?? 0);
    if (took > 0 && r.failed === 0) break;
    assert.ok(Date.now() < deadline, `${what}: ${node} does not take connections before the failure`);
    await sleep(500);
  }
  const running = streamLoad(lab, c, boundMs + 4000, 25);
  await sleep(1000); // the client is up (its start included) before the node fails
  const faultAt = Date.now();
  await c.fail();
  const s = await running;
  const f = streamFigures(s, faultAt);
  const through = c.through ?? ((e: StreamEvent) => e.node === node);
  const isWrong = (e: StreamEvent) => !e.ok || through(e);
  const since = s.events.filter((e) => f.sinceFault(e) >= 0);
  const wrongSince = since.filter(isWrong);
  const figures: NodeLossFigures = {
    total: since.length,
    failed: since.filter((e) => !e.ok).length,
    toNode: since.filter((e) => e.ok && through(e)).length,
    lastWrongMs: wrongSince.length > 0 ? Math.max(...wrongSince.map(f.sinceFault)) : undefined,
  };
  t.diagnostic(
    `${what}: after the fault ${figures.failed} of ${figures.total} new connections failed (${JSON.stringify(f.errors)}), ${figures.toNode} still reached ${node}; the last such one started ${figures.lastWrongMs ?? "-"} ms after the fault (bound ${boundMs} ms)`,
  );
  // (a loaded machine may start the client late: then few or none came before the fault)
  assert.deepEqual(
    f.before.filter((e) => !e.ok),
    [],
    `${what}: connections failed before the fault`,
  );
  const late = f.after(boundMs);
  assert.ok(late.length > 40, `${what}: only ${late.length} connections after the bound`);
  const wrong = late.filter(isWrong);
  if (wrong.length > 0) {
    // the connections per half second since the fault (N: the lost node, x: failed, .: another node)
    const slots = new Map<number, string>();
    for (const e of since) {
      const k = Math.floor(f.sinceFault(e) / 500) * 500;
      slots.set(k, (slots.get(k) ?? "") + (e.ok ? (through(e) ? "N" : ".") : "x"));
    }
    const log = readFileSync(lab.state.processes.find((p) => p.role === "lb")!.log, "utf8");
    t.diagnostic(`${what}: ${[...slots].map(([k, v]) => `${k}:${v}`).join(" ")}`);
    t.diagnostic(`LB log, last lines:\n${log.split("\n").slice(-40).join("\n")}`);
  }
  assert.deepEqual(
    wrong.map((e) => ({ ...e, sinceFault: f.sinceFault(e) })),
    [],
    `${what}: ${node} still got new connections (or they failed) later than the bound (${boundMs} ms)`,
  );
  return figures;
}
