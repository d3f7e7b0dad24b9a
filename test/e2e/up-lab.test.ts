/**
 * `passlb up --dataplane nftables` as a user runs it (root): the bundled example in the
 * network-namespace lab under a lab name of the test's own. Bounded traffic from a client
 * host to each VIP is answered by that Service's pods (client address kept under Local);
 * the live view counts it; the dashboard address relays to the LB's own state; a folder
 * edit reaches the LB; Ctrl-C removes every namespace, link and process of the lab. The
 * lab is also removed in `t.after` when the test fails. Skips without root, ip or nft.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { labExec } from "../../src/lab/lab-runner.ts";
import { until } from "../userspace/clients.ts";
import { type ClientResult, labUnavailable, REPO_ROOT } from "./lab-harness.ts";
import { alive, hostLinks, namespaces, startUpLab } from "./up-lab-run.ts";

const BIN = join(REPO_ROOT, "bin", "passlb.js");
const skip = labUnavailable();

test("passlb up --dataplane nftables runs the example in the lab and leaves nothing behind", {
  skip,
  timeout: 180_000,
}, async (t) => {
  const linksBefore = hostLinks();
  // a copy of the example: the test edits it
  const run = await startUpLab(t, {
    name: `u${randomBytes(3).toString("hex")}`,
    source: join(REPO_ROOT, "examples", "quickstart"),
    durationS: 150,
    ports: 18460,
    readyMs: 120_000,
  });
  const { name, prefix, stateDir, dir, child, exited } = run;
  const dashboard = run.dashboardPort;
  assert.match(run.out, new RegExp(`network-namespace lab ${prefix}\\*`));

  const vip = (service: string) => {
    const m = new RegExp(`${service}: ingress (\\S+?)[, ]`).exec(run.out);
    assert.ok(m, `${service}'s ingress in ${run.out}`);
    return m[1]!;
  };
  const client = ["node", join(stateDir, "bin", "lab-client.mjs")];
  const send = (host: string, target: string, udp = false): ClientResult => {
    const r = labExec(name, host, [
      ...client,
      `--target=${target}`,
      "--count=20",
      "--concurrency=4",
      ...(udp ? ["--proto=udp"] : []),
    ]);
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as ClientResult;
  };
  // every answer comes from a pod of the Service (pod names as in examples/quickstart/pods.yaml)
  const web = send("client-zone-a", `${vip("demo/web")}:80`);
  assert.equal(web.ok, 20, JSON.stringify(web));
  assert.ok(
    Object.keys(web.byPod).every((p) => /^web-[1-6]$/.test(p)),
    JSON.stringify(web.byPod),
  );
  assert.deepEqual(Object.keys(web.clients), ["192.0.2.10"], "Local keeps the client address");
  const echo = send("client-zone-b", `${vip("demo/tcp-echo")}:9000`);
  assert.equal(echo.ok, 20, JSON.stringify(echo));
  assert.ok(
    Object.keys(echo.byPod).every((p) => /^echo-[1-3]$/.test(p)),
    JSON.stringify(echo.byPod),
  );
  assert.equal(Object.keys(echo.byPod).length, 1, "ClientIP affinity: one client, one pod");
  const dns = send("client-zone-c", `${vip("demo/dns")}:53`, true);
  assert.equal(dns.ok, 20, JSON.stringify(dns));
  assert.ok(
    Object.keys(dns.byPod).every((p) => /^dns-[12]$/.test(p)),
    JSON.stringify(dns.byPod),
  );

  // the live view counts the web connections per pod (kernel counters on the nodes)
  await until(
    () => /demo\/web TCP \S+:80 Local .*\| last 10s: 20 conns/.test(run.out),
    15_000,
    `20 web connections in the view: ${run.out.slice(-2000)}`,
  );
  // the dashboard address reaches the LB's own state inside the lab
  const state = (await (await fetch(`http://127.0.0.1:${dashboard}/api/v1/state`)).json()) as {
    process: string;
    dataplane: string;
    services: { service: string }[];
  };
  assert.equal(state.process, "passlb lb");
  assert.equal(state.dataplane, "nftables");
  assert.ok(state.services.some((s) => s.service === "demo/web"));

  // a folder edit reaches the lab: web switches to Cluster, the LB plans it so
  const services = join(dir, "services.yaml");
  writeFileSync(
    services,
    readFileSync(services, "utf8")
      .replace("externalTrafficPolicy: Local", "externalTrafficPolicy: Cluster")
      .replace("  healthCheckNodePort: 32100\n", ""),
  );
  await until(
    async () => {
      const s = (await fetch(`http://127.0.0.1:${dashboard}/api/v1/state`)
        .then((r) => r.json())
        .catch(() => undefined)) as { services: { service: string; policy: string }[] } | undefined;
      return s?.services.find((x) => x.service === "demo/web")?.policy === "Cluster";
    },
    20_000,
    "the LB to plan demo/web as Cluster",
  );

  // a second instance on another control port refuses the running lab instead of removing it
  const second = spawnSync(
    process.execPath,
    [
      BIN,
      "up",
      "--dataplane",
      "nftables",
      "--lab-name",
      name,
      "--control-port",
      String(run.controlPort + 1),
      "--dashboard-address",
      "off",
      "--once",
    ],
    { encoding: "utf8", timeout: 60_000 },
  );
  assert.equal(second.status, 1, second.stderr);
  assert.match(second.stderr, new RegExp(`a lab named ${name} is running`));

  // every process running in the lab's namespaces, to check after the stop
  const pids = namespaces(prefix).flatMap((ns) =>
    (spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).stdout ?? "")
      .split("\n")
      .map(Number)
      .filter((n) => n > 1),
  );
  assert.ok(pids.length >= 20, `echo servers, agents, LB and relay run (${pids.length})`);

  const t0 = Date.now();
  child.kill("SIGINT");
  assert.equal(await exited, 0, run.out.slice(-2000));
  assert.ok(Date.now() - t0 < 30_000, "stops within 30 s");
  assert.match(run.out, /stopped; the lab's namespaces, links and processes are removed/);
  assert.deepEqual(namespaces(prefix), [], "no namespace of the lab remains");
  assert.deepEqual(pids.filter(alive), [], "no process of the lab remains");
  assert.equal(existsSync(stateDir), false, "the state directory is removed");
  assert.equal(hostLinks(), linksBefore, "no link was left in the caller's namespace");
});

test("without root, passlb up --dataplane nftables says why instead of starting", async () => {
  const { buildProgram } = await import("../../src/cli/program.ts");
  let err = "";
  let code = 0;
  const program = buildProgram(
    { stdout: () => {}, stderr: (s) => (err += s), readStdin: async () => "" },
    (c) => (code = c),
  );
  await program.parseAsync(["node", "passlb", "up", "--dataplane", "nftables"]);
  assert.equal(code, 1);
  assert.match(err, /needs root and the nft command \(not root and no nft command\)/);
  assert.match(err, /network-namespace lab/);
});
