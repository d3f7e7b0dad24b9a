// `passlb probe` against passlb's own health server and a closed port on loopback.
import assert from "node:assert/strict";
import { it } from "node:test";
import { Command } from "commander";
import { parseProbeUrl, registerProbeCommand } from "../../src/cli/probe-command.ts";
import { FakeClock } from "../../src/health/clock.ts";
import { HealthServers } from "../../src/health/health-servers.ts";
import { freePort } from "./net-helpers.ts";

const HOST = "127.0.0.1";
const PARAMS = {
  intervalMs: 1000,
  timeoutMs: 1000,
  healthyThreshold: 1,
  unhealthyThreshold: 2,
  readsWeight: false,
};

it("parses probe URLs", () => {
  assert.equal(parseProbeUrl("http://192.0.2.1:10256/healthz", PARAMS)?.key, "HTTP 192.0.2.1:10256/healthz");
  assert.equal(parseProbeUrl("https://[fd00::1]:443", PARAMS)?.key, "HTTPS [fd00::1]:443/");
  assert.equal(parseProbeUrl("tcp://192.0.2.1:30080", PARAMS)?.path, null);
  assert.equal(parseProbeUrl("http://example.com:80/", PARAMS), undefined);
  assert.equal(parseProbeUrl("udp://192.0.2.1:53", PARAMS), undefined);
});

it("probes, prints results and transitions, and exits 1 when a target ends unhealthy", async (t) => {
  const servers = new HealthServers({
    clock: new FakeClock(),
    healthz: { host: HOST, port: 0 },
    serviceHost: HOST,
    healthTimeoutMs: 60_000,
    onFinding: () => {},
  });
  t.after(() => servers.close());
  const port = await freePort(HOST);
  const closed = await freePort(HOST);
  await servers.update({
    nodeEligible: true,
    ineligibleReason: undefined,
    families: ["IPv4"],
    services: [{ namespace: "shop", name: "web", port, localEndpoints: 2 }],
    findings: [],
  });
  const out: string[] = [];
  let code = -1;
  const program = new Command("passlb").exitOverride();
  registerProbeCommand(
    program,
    { stdout: (s) => out.push(s), stderr: (s) => out.push(s), readStdin: async () => "" },
    (c) => {
      code = c;
    },
    () => new AbortController().signal,
  );
  await program.parseAsync([
    ...["node", "passlb", "probe", `http://${HOST}:${port}/healthz`, `tcp://${HOST}:${closed}`],
    ...["--interval", "0.2", "--timeout", "0.2", "--count", "3", "--weight"],
  ]);
  const text = out.join("");
  assert.match(text, new RegExp(`HTTP 127\\.0\\.0\\.1:${port}/healthz: ok +HTTP 200 weight 2`));
  assert.match(text, /unknown → healthy/);
  assert.match(
    text,
    new RegExp(`TCP 127\\.0\\.0\\.1:${closed}: unknown → unhealthy \\(2 consecutive failures`),
  );
  assert.match(text, new RegExp(`TCP 127\\.0\\.0\\.1:${closed}: unhealthy\\n`));
  assert.equal(code, 1);
});
