// The dashboard in a real headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core; .ci/run installs it as root). It loads the page of a running stack,
// checks every Service and node is shown, stops one node's agent and waits for the page to
// show that node unhealthy within the health bound (interval × unhealthyThreshold +
// timeout, plus the page's 1 s poll and a margin), then saves a screenshot to
// test-artifacts/dashboard.png.
//
// The stack is test/web/mini-stack.ts (real agent health servers, real prober, real
// dashboard server, no data plane) until `passlb up` is available to this branch.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { MiniStack } from "./mini-stack.ts";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = new URL("../../test-artifacts/", import.meta.url);
const INTERVAL_MS = 300;
const TIMEOUT_MS = 300;

test("dashboard: every Service and node shown; a stopped agent turns its node unhealthy", async (t) => {
  if (!existsSync(CHROMIUM)) {
    t.skip(`needs ${CHROMIUM} (apt-get install chromium; .ci/run does this as root)`);
    return;
  }
  const { chromium } = await import("playwright-core");
  const prefix = `127.${90 + (process.pid % 10)}.${(process.pid >> 4) % 250}.`;
  const logs: string[] = [];
  const stack = new MiniStack({
    prefix,
    intervalMs: INTERVAL_MS,
    timeoutMs: TIMEOUT_MS,
    log: (l) => logs.push(l),
  });
  t.after(() => stack.close());
  const url = await stack.start();

  const profile = mkdtempSync(join(tmpdir(), "plb-chromium-"));
  t.after(() => rmSync(profile, { recursive: true, force: true }));
  const context = await chromium.launchPersistentContext(profile, {
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
  });
  t.after(() => context.close());
  const page = context.pages()[0] ?? (await context.newPage());
  const outside: string[] = [];
  page.on("request", (r) => {
    if (!r.url().startsWith(url.replace(/\/$/, ""))) outside.push(r.url());
  });
  await page.goto(url, { timeout: 10_000 });

  // every Service and every node of each Service
  for (const plan of stack.plans) {
    const card = page.locator(`.service[data-service="${plan.service}"]`);
    await card.waitFor({ timeout: 5_000 });
    for (const b of plan.backends)
      await card.locator(`tr.node[data-node="${b.node}"]`).waitFor({ timeout: 2_000 });
  }
  const web = page.locator('.service[data-service="default/web"]');
  // the Maglev strip is drawn for both listeners
  assert.equal(await web.locator(".strip").count(), 2);

  // node-b probed healthy first
  await web.locator('tr.node[data-node="node-b"][data-state="healthy"]').waitFor({ timeout: 5_000 });

  const check = stack.plans.find((p) => p.service === "default/web")!.healthChecks[0]!;
  const boundMs = INTERVAL_MS * check.unhealthyThreshold + TIMEOUT_MS + 1_000 + 1_500;
  const stoppedAt = Date.now();
  await stack.stopAgent("node-b");
  await web.locator('tr.node[data-node="node-b"][data-state="unhealthy"]').waitFor({ timeout: boundMs });
  const tookMs = Date.now() - stoppedAt;
  assert.ok(tookMs <= boundMs, `unhealthy on the page after ${tookMs} ms (bound ${boundMs} ms)`);
  await page.locator('.ev[data-event="health_transition"]').first().waitFor({ timeout: 2_000 });
  // excluded node-c is listed as such
  assert.equal(await web.locator('tr.node[data-node="node-c"]').getAttribute("data-state"), "excluded");

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: new URL("dashboard.png", ARTIFACTS).pathname, fullPage: true });
  assert.deepEqual(outside, [], "the page loads nothing from elsewhere");
  t.diagnostic(`node-b unhealthy on the page ${tookMs} ms after its agent stopped (bound ${boundMs} ms)`);
  assert.ok(logs.some((l) => /"event":"health_transition"/.test(l) && /"node":"node-b"/.test(l)));
});
