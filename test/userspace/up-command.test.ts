/**
 * `passlb up` as a user runs it (a child process, no root, loopback only): it starts the
 * bundled example, serves traffic, refuses a second instance, and stops cleanly on SIGINT
 * within a bounded time, leaving its ports free; an unknown --tcp-plumbing is refused.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { connect } from "node:net";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { httpGet, until } from "./clients.ts";

const BIN = fileURLToPath(new URL("../../bin/passlb.js", import.meta.url));
const CONTROL = String(17460 + (process.pid % 500));
const children: ChildProcess[] = [];

function start(args: string[]): { child: ChildProcess; out: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [BIN, "up", "--control-port", CONTROL, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let text = "";
  child.stdout!.on("data", (d) => (text += d));
  child.stderr!.on("data", (d) => (text += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, out: () => text, exited };
}

after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

function portClosed(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.once("connect", () => {
      s.destroy();
      resolve(false);
    });
    s.once("error", () => resolve(true));
  });
}

test("passlb up starts the example, serves traffic, refuses a second instance and stops on SIGINT", {
  timeout: 30_000,
}, async () => {
  const first = start(["--duration", "25", "--refresh", "1"]);
  // the "try:" lines follow "running:" in a later chunk: wait for the line we check
  await until(
    () => first.out().includes("curl -s http://127.0.1.3:8080/"),
    15_000,
    `try lines in ${first.out()}`,
  );
  assert.match(first.out(), /curl -s http:\/\/127\.0\.1\.3:8080\//);
  assert.match(first.out(), /demo\/web: ingress 127\.0\.1\.3 \(ipMode Proxy\)/);
  // the default TCP plumbing is the documented one (tcp-plumbing.ts)
  assert.match(first.out(), /; TCP on node:net sockets;/);
  const status = (await (await fetch(`http://127.0.0.1:${CONTROL}/`)).json()) as {
    status: Array<{ service: string; loadBalancer: { ingress: Array<{ ip: string; ipMode: string }> } }>;
  };
  assert.deepEqual(status.status.find((s) => s.service === "demo/web")?.loadBalancer.ingress, [
    { ip: "127.0.1.3", ipMode: "Proxy" },
  ]);
  const a = await httpGet("127.0.1.3", 8080);
  assert.match(a.pod, /^demo\/web-\d$/);
  assert.match(a.client, /^127\.0\.0\.1:/);

  // the node agents run the kube-proxy-compatible health servers (src/health/health-servers.ts):
  // /livez exists there, and a Local Service's healthCheckNodePort sends the weight header
  const livez = await fetch("http://127.0.2.11:10256/livez");
  assert.equal(livez.status, 200);
  const hc = await fetch("http://127.0.2.11:32100/");
  assert.equal(hc.status, 200);
  assert.equal(hc.headers.get("x-load-balancing-endpoint-weight"), "3");

  const second = start(["--duration", "5"]);
  assert.equal(await second.exited, 1);
  assert.match(second.out(), /already running/);

  // plain periodic lines when stdout is not a terminal
  await until(() => /\[\d+s\] demo\/web TCP 127\.0\.1\.3:8080 Local/.test(first.out()), 5000, "a live line");

  const t0 = Date.now();
  first.child.kill("SIGINT");
  assert.equal(await first.exited, 0);
  assert.ok(Date.now() - t0 < 5000, "stops within 5 s");
  assert.match(first.out(), /stopped/);
  assert.ok(await portClosed("127.0.1.3", 8080), "the VIP listener is gone");
  assert.ok(await portClosed("127.0.2.11", 30080), "the node agent is gone");
  assert.ok(await portClosed("127.0.0.1", Number(CONTROL)), "the control port is free");
});

test("passlb up refuses an unknown --tcp-plumbing before starting anything", {
  timeout: 15_000,
}, async () => {
  const run = start(["--tcp-plumbing", "libuv", "--duration", "5"]);
  assert.equal(await run.exited, 2);
  assert.match(run.out(), /--tcp-plumbing must be net or experimental-libuv, not libuv/);
});
