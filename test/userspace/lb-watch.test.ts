/**
 * `passlb lb -f DIR --loopback --dataplane userspace` follows its folder (issue 26: every
 * input mode watches its input and keeps the last good state): a file added while it runs
 * brings a new VIP that answers; a bad edit is refused with a line naming the file while
 * every VIP keeps answering; fixing it and removing the added file closes that listener;
 * the signal stops everything. Loopback only (fixtures/userspace/lb-watch: VIPs
 * 127.0.1.140+, node 127.0.2.140), no root.
 */
import assert from "node:assert/strict";
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { buildProgram } from "../../src/cli/program.ts";
import { until } from "./clients.ts";

const FIXTURES = fileURLToPath(new URL("../fixtures/userspace/lb-watch/", import.meta.url));
const NODE = "127.0.2.140";
const PORT = 21740;
const WEB = "127.0.1.140";
const WORKER = "127.0.1.141";

/** the node's nodePort: answers `name` and closes */
function nodePort(port: number, name: string): Promise<Server> {
  const srv = createServer((s) => {
    s.on("error", () => {});
    s.end(`${name}\n`);
  });
  return new Promise((resolve) => srv.listen({ host: NODE, port }, () => resolve(srv)));
}

/** what VIP:PORT answers, or `refused` */
function ask(host: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host, port: PORT });
    let got = "";
    s.setTimeout(2000, () => {
      s.destroy();
      resolve("timeout");
    });
    s.setEncoding("utf8");
    s.on("data", (d: string) => (got += d));
    s.on("error", () => resolve("refused"));
    s.on("close", () => resolve(got.trim() || "closed"));
  });
}

/** `passlb lb ARGS` in-process: its output so far, its exit code, and the run's promise */
function runLb(args: readonly string[], signal: AbortSignal) {
  const out = { stdout: "", stderr: "", exitCode: -1 };
  const program = buildProgram(
    {
      stdout: (s) => {
        out.stdout += s;
      },
      stderr: (s) => {
        out.stderr += s;
      },
      readStdin: async () => "",
    },
    (c) => {
      out.exitCode = c;
    },
    () => signal,
    { stdoutIsTTY: false, isRoot: false, hasNft: () => false, kubeEnv: {} },
  );
  const running = program.parseAsync(["node", "passlb", "lb", ...args]);
  return { out, running };
}

test("passlb lb -f follows the folder and keeps the last good state on a bad edit", {
  timeout: 30_000,
}, async (t) => {
  const nodes = [await nodePort(30740, "web"), await nodePort(30741, "worker")];
  t.after(() => Promise.all(nodes.map((n) => new Promise((r) => n.close(r)))));
  const dir = await mkdtemp(join(tmpdir(), "plb-lb-watch-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const f of ["cluster.yaml", "web.yaml"]) await copyFile(join(FIXTURES, "start", f), join(dir, f));
  const stop = new AbortController();
  t.after(() => stop.abort());
  const { out, running } = runLb(
    [
      ...["-f", dir, "--loopback", "--dataplane", "userspace"],
      ...["--poll-ms", "100", "--dashboard-address", "off", "--log-level", "silent"],
    ],
    stop.signal,
  );
  await until(
    () => out.stdout.includes(`t/web: ingress ${WEB} ipMode Proxy`),
    10_000,
    `web's VIP in ${out.stdout}`,
  );
  assert.match(out.stdout, /passlb lb: data plane userspace \(.*\); TCP on node:net sockets/);
  assert.equal(await ask(WEB), "web");

  // a new file: a new Service, a new listener
  await copyFile(join(FIXTURES, "edits", "worker.yaml"), join(dir, "worker.yaml"));
  await until(
    () => out.stdout.includes(`t/worker: ingress ${WORKER}`),
    10_000,
    `worker's VIP in ${out.stdout}`,
  );
  await until(async () => (await ask(WORKER)) === "worker", 5_000, "the worker VIP answering");

  // a bad edit: refused, naming the file and the field; every VIP keeps answering
  await copyFile(join(FIXTURES, "edits", "web-broken.yaml"), join(dir, "web.yaml"));
  await until(
    () => out.stderr.includes("keeping the last good state"),
    10_000,
    `the refusal in ${out.stderr}`,
  );
  assert.match(out.stderr, /web\.yaml \(document 1\): Service t\/web: spec\.ports\[0\]\.port/);
  assert.equal(await ask(WEB), "web", "the last good state still serves web");
  assert.equal(await ask(WORKER), "worker");

  // fixed, and the added file removed: valid again, the worker's listener closed
  await copyFile(join(FIXTURES, "start", "web.yaml"), join(dir, "web.yaml"));
  await rm(join(dir, "worker.yaml"));
  await until(
    () => out.stderr.includes("the manifests are valid again"),
    10_000,
    `the recovery in ${out.stderr}`,
  );
  await until(async () => (await ask(WORKER)) === "refused", 5_000, "the worker VIP closed");
  assert.equal(await ask(WEB), "web");

  stop.abort();
  await running;
  assert.equal(out.exitCode, 0);
  assert.equal(await ask(WEB), "refused", "listeners closed on shutdown");
});

test("passlb lb -f refuses a first read with problems (exit 2), naming the file", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "plb-lb-watch-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await copyFile(join(FIXTURES, "start", "cluster.yaml"), join(dir, "cluster.yaml"));
  await copyFile(join(FIXTURES, "edits", "web-broken.yaml"), join(dir, "web.yaml"));
  const { out, running } = runLb(
    ["-f", dir, "--loopback", "--dataplane", "userspace", "--dashboard-address", "off"],
    new AbortController().signal,
  );
  await running;
  assert.equal(out.exitCode, 2);
  assert.match(
    out.stderr,
    /^error: the input has 1 problem:\n {2}.*web\.yaml \(document 1\): Service t\/web/m,
  );
});
