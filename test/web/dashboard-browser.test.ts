// The dashboard of a running quickstart, in a real headless Chromium (Debian's
// /usr/bin/chromium driven by playwright-core; .ci/run installs it as root).
//
// 1. `passlb up -f test/fixtures/web/quickstart` as a user runs it (a child process,
//    loopback only): it prints the dashboard URL, which serves /api/v1/state and /metrics.
// 2. The same run in-process (QuickstartRun with the Observer, as up-command.ts wires it:
//    echo pods, node agents, prober, userspace LB), so the test can stop one node's agent:
//    the page shows every Service and node, connection shares after some traffic, and
//    node-b turning unhealthy within interval × unhealthyThreshold + timeout plus the
//    page's 1 s poll and a margin; with an announcement engine's status (a fake one), the
//    Announcement card shows which VIPs this host holds; with the XDP fast path's counters,
//    its card shows them and follows the next read. Screenshot: test-artifacts/dashboard.png.
//
// Addresses (after the loopback rewrite): VIPs 127.0.1.150 (api), 127.0.1.151 (web), nodes
// 127.0.2.151-153 — a block no other test uses.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { FakeAnnouncer, vipReady } from "../../src/announce/fake-announcer.ts";
import { startObservability } from "../../src/cli/observability.ts";
import { QuickstartRun } from "../../src/quickstart/quickstart-run.ts";
import { httpGet, until } from "../userspace/clients.ts";

const CHROMIUM = "/usr/bin/chromium";
const BIN = fileURLToPath(new URL("../../bin/passlb.js", import.meta.url));
const FOLDER = fileURLToPath(new URL("../fixtures/web/quickstart/", import.meta.url));
const ARTIFACTS = fileURLToPath(new URL("../../test-artifacts/", import.meta.url));
const CONTROL = String(17960 + (process.pid % 30));
const WEB = "127.0.1.151";
const PROBE_MS = 200;

async function getText(url: string): Promise<string> {
  const res = await fetch(url);
  assert.equal(res.status, 200, url);
  return res.text();
}

test("passlb up prints its dashboard URL; the page, /api/v1/state and /metrics answer there", {
  timeout: 20_000,
}, async (t) => {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      BIN,
      "up",
      "-f",
      FOLDER,
      "--duration",
      "15",
      "--control-port",
      CONTROL,
      "--dashboard-address",
      "127.0.0.1:0",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  await until(
    () => /dashboard: http:\/\/127\.0\.0\.1:\d+\//.test(out),
    15_000,
    `the dashboard line in ${out}`,
  );
  const url = /dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)![1]!;
  assert.match(await getText(url), /<title>passlb<\/title>/);
  const state = JSON.parse(await getText(`${url}api/v1/state`)) as {
    process: string;
    services: { service: string }[];
  };
  assert.equal(state.process, "passlb up");
  assert.deepEqual(
    state.services.map((s) => s.service),
    ["shop/api", "shop/web"],
  );
  assert.match(await getText(`${url}metrics`), /^passlb_services_programmed 2$/m);
  child.kill("SIGINT");
  assert.equal(await exited, 0);
});

test("dashboard in Chromium: every Service and node, traffic shares, a stopped agent turns unhealthy", {
  timeout: 40_000,
}, async (t) => {
  if (!existsSync(CHROMIUM)) {
    t.skip(`needs ${CHROMIUM} (apt-get install chromium; .ci/run does this as root)`);
    return;
  }
  const { chromium } = await import("playwright-core");
  const logs: string[] = [];
  const obs = await startObservability(
    { dashboardAddress: "127.0.0.1:0", logLevel: "info" },
    {
      io: { stdout: () => {}, stderr: (l) => logs.push(l), readStdin: async () => "" },
      process: "passlb up",
      component: "up",
      dataplane: "userspace",
    },
  );
  assert.ok(typeof obs !== "string", String(obs));
  t.after(() => obs.close());
  const run = new QuickstartRun({
    dir: FOLDER,
    probeIntervalMs: PROBE_MS,
    log: () => {},
    observer: obs.observer,
  });
  t.after(() => run.close());
  const started = await run.start();
  assert.deepEqual(started.errors, []);
  const url = await obs.serve();
  assert.ok(url);

  // some traffic, so the page has connection shares to show
  await until(
    () => run.liveState().services.every((s) => s.nodes.every((n) => n.health === "healthy")),
    5_000,
    "first probes",
  );
  for (let i = 0; i < 40; i++) await httpGet(WEB, 8080);

  const profile = mkdtempSync(join(tmpdir(), "plb-chromium-"));
  const context = await chromium
    .launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
      viewport: { width: 1280, height: 900 },
      timeout: 15_000,
    })
    .catch((e: unknown) => {
      // chromium may still be writing its profile: retry, and keep the launch's own error
      try {
        rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
      } catch {}
      throw e;
    });
  // the profile goes once the browser has closed (it writes there until then)
  t.after(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const origin = new URL(url).origin;
  const outside: string[] = [];
  page.on("request", (r) => {
    if (new URL(r.url()).origin !== origin) outside.push(r.url());
  });
  // an announcement engine's status (the fake honours the keepalived driver's interface):
  // the page's Announcement card shows each VIP held or not
  const announcer = new FakeAnnouncer("lb-1");
  await announcer.start({
    vips: [vipReady(WEB), vipReady("127.0.1.150", "no_healthy_backend")],
    generation: 1,
  });
  // with what the wire says (lb-wire.ts adds it): a second MAC answers for WEB, a foreign
  // VRRP speaker on VRID 3
  const message = `${WEB}: 2 answers: 5e:b5:dc:86:86:80 (lb-1), 86:df:f1:ec:47:3e (unknown device)`;
  const foreign = {
    interface: "eth0",
    family: "IPv4" as const,
    vrid: 3,
    source: "192.0.2.9",
    mac: "86:df:f1:ec:47:3e",
    priority: 254,
    lastSeen: 0,
    adverts: 4,
  };
  obs.observer.announcement(() => ({
    ...announcer.status(),
    wire: {
      checkedAt: Date.now(),
      periodMs: 10_000,
      errors: [],
      vips: [{ vip: WEB, problem: "duplicate_answer", answers: [], message }],
      vrrp: { watching: true, interface: "eth0", range: { first: 1, last: 255 }, foreign: [foreign] },
    },
  }));
  // `--dataplane xdp`: the fast path's counters as lb-xdp.ts hands them over after a read
  const xdpRead = (forwarded: number, flows: number) => ({
    services: new Map(),
    nodes: new Map([["node-a", { packets: forwarded, bytes: forwarded * 64 }]]),
    reasons: new Map([
      ["fwd_redirect", { packets: forwarded, bytes: forwarded * 64 }],
      ["pass_not_vip", { packets: 7, bytes: 448 }],
      ["drop_source", { packets: 3, bytes: 192 }],
      ["flow_new", { packets: 0, bytes: 0 }],
    ]),
    flows: { entries: new Map([["IPv4", flows] as const]), capacity: 262_144, evictions: flows * 2 },
  });
  obs.observer.fastPathCounters("xdp", xdpRead(1200, 40));
  await page.goto(url, { timeout: 10_000 });
  await page.locator('#fastpath [data-forwarded="1200"]').waitFor({ timeout: 3_000 });
  assert.equal(await page.locator("#fastpath tr.reason").count(), 3, "reasons without packets are left out");
  assert.match((await page.locator('#fastpath tr[data-reason="drop_source"]').textContent()) ?? "", /3/);
  // the next read shows on the next poll
  obs.observer.fastPathCounters("xdp", xdpRead(5000, 41));
  await page.locator('#fastpath [data-flows="41"]').waitFor({ timeout: 3_000 });
  assert.match((await page.locator('#fastpath [data-evictions="82"]').textContent()) ?? "", /82 evicted/);
  await page.locator(`tr.avip[data-vip="${WEB}"][data-state="held"]`).waitFor({ timeout: 3_000 });
  assert.equal(await page.locator('tr.avip[data-vip="127.0.1.150"]').getAttribute("data-state"), "withdrawn");
  await page
    .locator(`tr.avip[data-vip="${WEB}"] td[data-wire="duplicate_answer"]`)
    .waitFor({ timeout: 2_000 });
  assert.equal(
    await page.locator('tr.avip[data-vip="127.0.1.150"] td').last().getAttribute("data-wire"),
    "unchecked",
  );
  assert.match((await page.locator('[data-foreign-vrid="3"]').textContent()) ?? "", /192\.0\.2\.9 .* VRID 3/);

  for (const plan of run.plans) {
    const card = page.locator(`.service[data-service="${plan.service}"]`);
    await card.waitFor({ timeout: 5_000 });
    for (const b of plan.backends)
      await card.locator(`tr.node[data-node="${b.node}"]`).waitFor({ timeout: 2_000 });
  }
  const web = page.locator('.service[data-service="shop/web"]');
  await web.locator('tr.node[data-node="node-b"][data-state="healthy"]').waitFor({ timeout: 3_000 });
  assert.equal(await web.locator('tr.node[data-node="node-c"]').getAttribute("data-state"), "excluded");
  assert.equal(await web.locator(".strip").count(), 1, "one Maglev strip per listener");
  const shares = await web.locator("tr.node .pct").allTextContents();
  assert.ok(
    shares.some((s) => s !== "0%"),
    `connection shares shown after 40 requests: ${shares.join(" ")}`,
  );

  const check = run.plans.find((p) => p.service === "shop/web")!.healthChecks[0]!;
  // the prober caps the timeout at the interval
  const boundMs = PROBE_MS * check.unhealthyThreshold + PROBE_MS + 1_000 + 1_500;
  const stoppedAt = Date.now();
  await run.stopAgent("node-b");
  await web.locator('tr.node[data-node="node-b"][data-state="unhealthy"]').waitFor({ timeout: boundMs });
  const tookMs = Date.now() - stoppedAt;
  assert.ok(tookMs <= boundMs, `unhealthy on the page after ${tookMs} ms (bound ${boundMs} ms)`);
  await page.locator('.ev[data-event="backend_state"]').first().waitFor({ timeout: 2_000 });
  await page.locator('.ev[data-event="agent_stopped"]').first().waitFor({ timeout: 2_000 });
  await page.locator('.ev[data-event="health_transition"]').first().waitFor({ timeout: 2_000 });

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, "dashboard.png"), fullPage: true });
  assert.deepEqual(outside, [], "the page loads nothing from elsewhere");
  assert.ok(
    logs.some((l) =>
      /"event":"backend_state","reason":"unhealthy","service":"shop\/web","node":"node-b"/.test(l),
    ),
  );
  const metrics = await obs.metrics.text();
  assert.match(metrics, /passlb_health_transitions_total\{node="node-b",to="unhealthy"\} [1-9]/);
  assert.match(metrics, /passlb_health_probes_total\{node="node-b",result="failure"\} [1-9]/);
  assert.match(metrics, /passlb_connections_total\{service="shop\/web",node="node-a"\} [1-9]/);
  assert.match(metrics, /passlb_service_backends\{service="shop\/web",state="unhealthy"\} 1/);
  t.diagnostic(`node-b unhealthy on the page ${tookMs} ms after its agent stopped (bound ${boundMs} ms)`);
});
