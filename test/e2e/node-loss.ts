/**
 * The node-loss bound both LB-path labs assert (same segment: lb-path.test.ts; routed,
 * through encapsulation: encap-path.test.ts): once `fail()` takes a node out (its link, its
 * agent), no new connection reaches it — and none fails — later than the prober's worst case
 * (docs/health.md: interval × unhealthyThreshold + timeout) plus 1 s for programming and a
 * loaded machine's late timers. When it fails, the connections per half second and the LB's
 * log are printed.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { TestContext } from "node:test";
import type { Lab } from "./lab-harness.ts";
import { sleep } from "./lab-harness.ts";

interface StreamEvent {
  readonly t: number;
  readonly ok: boolean;
  readonly node?: string;
  readonly error?: string;
}

export interface NodeLossCase {
  readonly what: string;
  readonly client: string;
  /** `ip:port` or `[ip6]:port` */
  readonly target: string;
  readonly node: string;
  readonly boundMs: number;
  readonly fail: () => Promise<void>;
}

export async function assertNodeLossBound(t: TestContext, lab: Lab, c: NodeLossCase): Promise<void> {
  const { what, node, boundMs } = c;
  // the node takes connections before the failure (after an earlier case: once it is back)
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await lab.client(c.client, ["--target", c.target, "--count", "40", "--timeout", "1000"]);
    if ((r.byNode[node] ?? 0) > 0 && r.failed === 0) break;
    assert.ok(Date.now() < deadline, `${what}: ${node} does not take connections before the failure`);
    await sleep(500);
  }
  const running = lab.client(c.client, [
    "--mode",
    "stream",
    "--target",
    c.target,
    "--duration",
    String(boundMs + 3000),
    "--interval",
    "25",
    "--timeout",
    "1000",
  ]) as unknown as Promise<{ events: StreamEvent[] }>;
  await sleep(500);
  const failedAt = 500;
  await c.fail();
  const { events } = await running;
  const late = events.filter((e) => e.t > failedAt + boundMs);
  assert.ok(late.length > 40, `${what}: only ${late.length} connections after the bound`);
  const wrong = late.filter((e) => !e.ok || e.node === node);
  if (wrong.length > 0) {
    // the connections per half second (N: the lost node, x: failed, .: another node)
    const slots = new Map<number, string>();
    for (const e of events) {
      const k = Math.floor(e.t / 500) * 500;
      slots.set(k, (slots.get(k) ?? "") + (e.ok ? (e.node === node ? "N" : ".") : "x"));
    }
    const log = readFileSync(lab.state.processes.find((p) => p.role === "lb")!.log, "utf8");
    t.diagnostic(`${what}: ${[...slots].map(([k, v]) => `${k}:${v}`).join(" ")}`);
    t.diagnostic(`LB log, last lines:\n${log.split("\n").slice(-40).join("\n")}`);
  }
  assert.deepEqual(
    wrong,
    [],
    `${what}: ${node} still got new connections (or they failed) later than interval × unhealthyThreshold + timeout + 1 s (${boundMs} ms)`,
  );
}
