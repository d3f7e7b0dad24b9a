/**
 * The load the fault tests run under (issue 16 §1; docs/reliability.md): the lab client
 * (src/lab/lab-client.ts) making a new TCP connection back to back (`stream`, one every
 * 20 ms, each with a 1 s timeout) and holding long-lived ones (`hold`, a ping every 100 ms,
 * one unanswered for 2 s is a stall), started as lab processes in client hosts; a fault
 * applied while they run; and the figures the tests assert and print: which new
 * connections failed and when relative to the fault, which long-lived ones broke.
 * Shared by faults.test.ts, rolling.test.ts and bad-input.test.ts. Not here: what a fault
 * is, or the bound a test asserts.
 */
import assert from "node:assert/strict";
import type { Lab } from "./lab-harness.ts";
import { sleep } from "./lab-harness.ts";

export interface StreamEvent {
  /** ms after the stream's start */
  readonly t: number;
  readonly ok: boolean;
  readonly pod?: string;
  readonly node?: string;
  /** the client address the pod saw */
  readonly client?: string;
  readonly error?: string;
}
export interface StreamRun {
  /** wall-clock ms of the stream's start */
  readonly started: number;
  readonly events: readonly StreamEvent[];
}
export interface HeldConnection {
  readonly ok: boolean;
  readonly error?: string;
  readonly pod?: string;
  readonly node?: string;
  readonly pings: number;
  /** wall-clock ms when it ended (broke, or the run's end) */
  readonly at: number;
}
export interface HeldRun {
  readonly started: number;
  readonly connections: readonly HeldConnection[];
}

/** `host` runs the client, `target` is `ip:port` or `[ip6]:port` */
export interface LoadTarget {
  readonly client: string;
  readonly target: string;
}

/** Waits until every target answers 30 connections in a row (20 s at most). */
export async function waitServing(lab: Lab, targets: readonly LoadTarget[]): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const runs = await Promise.all(
      targets.map((x) => lab.client(x.client, ["--target", x.target, "--count", "30", "--timeout", "1000"])),
    );
    if (runs.every((r) => r.failed === 0)) return;
    assert.ok(
      Date.now() < deadline,
      `the VIPs do not serve before the fault: ${JSON.stringify(runs.map((r) => r.errors))}`,
    );
    await sleep(500);
  }
}

/** A new connection every `intervalMs` for `ms` (with `bind0`, each bound to port 0 first). */
export function streamLoad(
  lab: Lab,
  x: LoadTarget,
  ms: number,
  intervalMs = 20,
  bind0 = false,
): Promise<StreamRun> {
  return lab.client(x.client, [
    "--mode",
    "stream",
    "--target",
    x.target,
    "--duration",
    String(ms),
    "--interval",
    String(intervalMs),
    "--timeout",
    "1000",
    ...(bind0 ? ["--bind0"] : []),
  ]) as unknown as Promise<StreamRun>;
}

/** `connections` long-lived connections pinging every 100 ms for `ms`. */
export function holdLoad(lab: Lab, x: LoadTarget, ms: number, connections = 12): Promise<HeldRun> {
  return lab.client(x.client, [
    "--mode",
    "hold",
    "--target",
    x.target,
    "--connections",
    String(connections),
    "--duration",
    String(ms),
    "--interval",
    "100",
  ]) as unknown as Promise<HeldRun>;
}

/** What a stream saw relative to a moment (the fault): failures, the last one, by error. */
export function streamFigures(s: StreamRun, faultAt: number) {
  const at = (e: StreamEvent) => s.started + e.t;
  const before = s.events.filter((e) => at(e) < faultAt);
  const failed = s.events.filter((e) => !e.ok);
  const lastFailed = failed.length > 0 ? Math.max(...failed.map(at)) - faultAt : undefined;
  const errors: Record<string, number> = {};
  for (const e of failed) errors[e.error ?? "?"] = (errors[e.error ?? "?"] ?? 0) + 1;
  /** the stream's events that started later than `ms` after the fault */
  const after = (ms: number) => s.events.filter((e) => at(e) > faultAt + ms);
  return { before, failed, lastFailed, errors, after, sinceFault: (e: StreamEvent) => at(e) - faultAt };
}

/**
 * Runs a stream and a hold for `ms`, applies `fault` 2.5 s in (both clients are up and
 * connected by then, their start included), and returns what they saw.
 */
export async function underLoad(
  lab: Lab,
  load: { readonly stream: LoadTarget; readonly hold: LoadTarget },
  ms: number,
  fault: () => Promise<void> | void,
) {
  await waitServing(lab, [load.stream, load.hold]);
  const stream = streamLoad(lab, load.stream, ms);
  const held = holdLoad(lab, load.hold, ms);
  await sleep(2500);
  const faultAt = Date.now();
  await fault();
  const s = await stream;
  const h = await held;
  const broken = h.connections.filter((c) => !c.ok);
  return { s, h, faultAt, broken, ...streamFigures(s, faultAt) };
}
