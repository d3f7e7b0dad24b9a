/**
 * `passlb agent --dataplane userspace` on loopback: the node proxy listens on the node's
 * address at every nodePort and, under externalTrafficPolicy Local, only sends to this
 * node's pods; a PROXY v2 header from the LB is read; the signal stops everything.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { registerAgentCommand } from "../../src/cli/agent-command.ts";
import { encodeProxyV2 } from "../../src/lb-host/userspace/proxy-protocol.ts";
import { exchange, until } from "./clients.ts";

const DIR = fileURLToPath(new URL("../fixtures/userspace/agent/", import.meta.url));

function pod(host: string, name: string): Promise<Server> {
  const srv = createServer((s) => {
    s.on("error", () => {});
    s.once("data", (d) => s.end(`${name} ${s.remoteAddress} ${d.length}`));
  });
  return new Promise((resolve) => srv.listen({ host, port: 9000 }, () => resolve(srv)));
}

const ask = (payload: Buffer): Promise<string> =>
  exchange({ host: "127.0.2.150", port: 30300 }, payload, 2000);

test("Local nodePort goes to this node's pod only, with or without a PROXY header", async () => {
  const pods = [await pod("127.0.3.150", "here"), await pod("127.0.3.151", "elsewhere")];
  after(() => Promise.all(pods.map((p) => new Promise((r) => p.close(r)))));
  const stop = new AbortController();
  after(() => stop.abort());
  const errors: string[] = [];
  const program = new Command("passlb").exitOverride();
  registerAgentCommand(
    program,
    { stdout: () => {}, stderr: (t) => errors.push(t), readStdin: async () => "" },
    () => {},
    () => stop.signal,
  );
  const running = program.parseAsync([
    ...[
      "node",
      "passlb",
      "agent",
      "--node",
      "n1",
      "--manifests",
      DIR,
      "--dataplane",
      "userspace",
      "--loopback",
    ],
    ...["--healthz-bind-address", "127.0.2.150:10256", "--bind-address", "127.0.2.150"],
  ]);
  await until(
    async () => (await ask(Buffer.from("x")).catch(() => "")) !== "",
    4000,
    `the nodePort: ${errors.join("")}`,
  ).catch((e) => {
    throw new Error(`${e.message}: ${errors.join("")}`);
  });
  for (let i = 0; i < 10; i++) assert.match(await ask(Buffer.from("hello")), /^here 127\.0\.0\.1 5$/);
  const header = encodeProxyV2({
    transport: "TCP",
    srcAddr: "127.0.7.1",
    srcPort: 1234,
    dstAddr: "127.0.1.1",
    dstPort: 80,
  });
  // the header is taken off: the pod sees the 5 payload bytes only
  assert.match(await ask(Buffer.concat([header, Buffer.from("hello")])), /^here 127\.0\.0\.1 5$/);
  stop.abort();
  await running;
  await assert.rejects(ask(Buffer.from("x")), /ECONNREFUSED/);
  assert.ok(errors.join("").includes("userspace data plane: nodePorts on 127.0.2.150"), errors.join(""));
});
