// `passlb agent` end to end on loopback: reads a manifest folder, serves, follows edits
// (a healthCheckNodePort moves, a broken file keeps the last good state), stops cleanly.
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { Command } from "commander";
import { registerAgentCommand } from "../../src/cli/agent-command.ts";
import { parseBindAddress } from "../../src/node-agent/agent-config.ts";
import { fixturePath } from "./load-fixture.ts";
import { freePort, httpGet } from "./net-helpers.ts";

// an address of 127/8 no other test uses, so the fixture's fixed healthCheckNodePorts are free
const SERVICE_HOST = "127.93.0.1";

async function eventually<T>(probe: () => Promise<T>, ok: (value: T) => boolean, ms = 4000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe().catch((e: Error) => e as unknown as T);
    if (ok(value) || Date.now() > end) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const status = (port: number) => () => httpGet(SERVICE_HOST, port).then((a) => a.status);

it("parses bind addresses as kube-proxy takes them", () => {
  // 0.0.0.0 is every address of both families, as Go's net.Listen("tcp") makes it for kube-proxy
  assert.deepEqual(parseBindAddress("0.0.0.0:10256"), { host: undefined, port: 10256 });
  assert.deepEqual(parseBindAddress("[::1]:10256"), { host: "::1", port: 10256 });
  assert.deepEqual(parseBindAddress(":10256"), { host: undefined, port: 10256 });
  assert.equal(parseBindAddress("10256"), undefined);
  assert.equal(parseBindAddress("nowhere:10256"), undefined);
  assert.equal(parseBindAddress("127.0.0.1:70000"), undefined);
});

it("serves the folder, follows edits and stops on the signal", async () => {
  const dir = mkdtempSync(join(tmpdir(), "passlb-agent-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const manifest = join(dir, "cluster.yaml");
  copyFileSync(fixturePath("agent-cluster.yaml"), manifest);
  const healthzPort = await freePort("127.0.0.1");
  const stop = new AbortController();
  const stderr: string[] = [];
  const program = new Command("passlb").exitOverride();
  let exitCode = 0;
  registerAgentCommand(
    program,
    { stdout: () => {}, stderr: (t) => stderr.push(t), readStdin: async () => "" },
    (c) => {
      exitCode = c;
    },
    () => stop.signal,
  );
  const running = program.parseAsync([
    ...["node", "passlb", "agent", "--node", "node-a", "--manifests", dir],
    ...["--healthz-bind-address", `0.0.0.0:${healthzPort}`, "--bind-address", SERVICE_HOST],
    ...["--dashboard-address", "127.0.0.1:0"],
  ]);
  after(() => stop.abort());

  const healthz = await eventually(
    () => httpGet("127.0.0.1", healthzPort, "/healthz"),
    (a) => a.status === 200,
  );
  assert.equal(healthz.status, 200);
  // 0.0.0.0 serves IPv6 too, as kube-proxy's Go listener does: an LB probing the node's IPv6 address gets it
  assert.equal((await httpGet("::1", healthzPort, "/healthz")).status, 200);
  assert.match(stderr.join(""), /"reason":"health_check_node_port_missing".*"service":"shop\/no-port"/);
  assert.equal(await status(30100)(), 200);
  assert.equal(await status(30101)(), 503);
  // /metrics on the dashboard address (port 0 here: the URL is in the dashboard_listening line)
  const dashboard = /"event":"dashboard_listening","url":"(http:[^"]+)"/.exec(stderr.join(""))?.[1];
  assert.ok(dashboard, "the agent logs its dashboard URL");
  const metrics = await httpGet("127.0.0.1", Number(new URL(dashboard).port), "/metrics");
  assert.match(metrics.body, /# TYPE passlb_health_probes_total counter/);

  writeFileSync(
    manifest,
    readFileSync(manifest, "utf8").replace("healthCheckNodePort: 30101", "healthCheckNodePort: 30102"),
  );
  assert.equal(await eventually(status(30102), (s) => s === 503), 503);
  await assert.rejects(httpGet(SERVICE_HOST, 30101), /ECONNREFUSED/);

  writeFileSync(join(dir, "broken.yaml"), "kind: [\n");
  await eventually(
    async () => stderr.join(""),
    (t) => t.includes("keeping the last good state"),
  );
  assert.match(stderr.join(""), /broken\.yaml/);
  assert.equal(await status(30100)(), 200, "the last good state keeps serving");

  stop.abort();
  await running;
  assert.equal(exitCode, 0);
  await assert.rejects(httpGet("127.0.0.1", healthzPort, "/healthz"), /ECONNREFUSED/);
  await assert.rejects(httpGet(SERVICE_HOST, 30100), /ECONNREFUSED/);
});
