// Unit tests of the connection budget's choice of victim and of the descriptor-limit
// reading (http-limits.ts); the behaviour under real hostile clients is
// test/health/hostile-clients.test.ts.
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import { test } from "node:test";
import { ConnectionBudget, defaultHttpLimits, softNofileLimit } from "./http-limits.ts";

class FakeSocket extends EventEmitter {
  destroyed = false;
  constructor(readonly name: string) {
    super();
  }
  destroy(): this {
    if (!this.destroyed) {
      this.destroyed = true;
      this.emit("close");
    }
    return this;
  }
}
const sockets = (n: number) => Array.from({ length: n }, (_, i) => new FakeSocket(`s${i}`));
const asSocket = (s: FakeSocket) => s as unknown as Socket;

test("over the budget, the least recently active connection not being answered is closed", () => {
  const b = new ConnectionBudget(3);
  const [a, c, d, e] = sockets(4) as [FakeSocket, FakeSocket, FakeSocket, FakeSocket];
  for (const s of [a, c, d]) b.admit(asSocket(s));
  b.busy(asSocket(a)); // a is being answered
  b.busy(asSocket(c));
  b.idle(asSocket(c)); // c was active after d opened
  b.admit(asSocket(e));
  assert.deepEqual(
    [a, c, d, e].map((s) => s.destroyed),
    [false, false, true, false],
    "d: idle and least recently active",
  );
  assert.equal(b.size, 3);
  assert.equal(b.evicted, 1);
});

test("when every other connection is being answered the oldest goes; the newest never", () => {
  const b = new ConnectionBudget(2);
  const [a, c, d] = sockets(3) as [FakeSocket, FakeSocket, FakeSocket];
  b.admit(asSocket(a));
  b.admit(asSocket(c));
  b.busy(asSocket(a));
  b.busy(asSocket(c));
  b.admit(asSocket(d));
  assert.deepEqual([a.destroyed, c.destroyed, d.destroyed], [true, false, false]);
  const solo = new ConnectionBudget(1);
  const [x, y] = sockets(2) as [FakeSocket, FakeSocket];
  solo.admit(asSocket(x));
  solo.admit(asSocket(y));
  assert.deepEqual([x.destroyed, y.destroyed], [true, false]);
});

test("a connection closed by its client leaves the budget", () => {
  const b = new ConnectionBudget(2);
  const [a, c, d] = sockets(3) as [FakeSocket, FakeSocket, FakeSocket];
  b.admit(asSocket(a));
  b.admit(asSocket(c));
  a.destroy();
  b.admit(asSocket(d));
  assert.deepEqual([c.destroyed, d.destroyed], [false, false]);
  assert.equal(b.size, 2);
  assert.equal(b.evicted, 0);
});

test("the default budget is a quarter of the soft descriptor limit, within 64…4096", () => {
  const limits = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 524288               files
`;
  assert.equal(softNofileLimit(limits), 1024);
  assert.equal(softNofileLimit("Max open files            unlimited  unlimited  files\n"), undefined);
  assert.equal(defaultHttpLimits(1024).maxConnections, 256);
  assert.equal(defaultHttpLimits(100).maxConnections, 64);
  assert.equal(defaultHttpLimits(1_048_576).maxConnections, 4096);
});
