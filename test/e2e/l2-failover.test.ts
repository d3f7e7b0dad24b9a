/**
 * Two LB hosts on the clients' segment (docs/vip-announce.md, docs/lab.md "Several LB
 * hosts"): every VIP is held by exactly the host the election names; when the holder dies
 * (its `passlb lb` SIGKILLed and its links down: no goodbye) new connections to its VIP
 * work again through the other host within 3 s; when only its process dies, the VIPs leave
 * its interface by themselves (address lifetimes); a graceful stop hands over faster; and an
 * LB host that also runs a node's DNAT (`passlb agent`, playing kube-proxy) still forwards
 * VIP traffic unchanged thanks to the NAT claim — and does not without it.
 * Root, nft, ip and arping (iputils-arping) needed; skipped with the reason otherwise. The
 * lab is removed when the test ends, pass or fail; every traffic loop is bounded.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { test } from "node:test";
import { vipOwners } from "../../src/announce/vip-owners.ts";
import { natClaimRuleset } from "../../src/dataplane/render/nat-claim.ts";
import { type Lab, labUnavailable, REPO_ROOT, sleep, startLab } from "./lab-harness.ts";

const TOPOLOGY = "test/fixtures/lab/l2/topology.yaml";
const SERVICES = ["l2/web-local", "l2/web-cluster", "l2/web-3"] as const;
const why =
  labUnavailable() ??
  (spawnSync("arping", ["-V"]).error ? "arping (iputils-arping) is not installed" : undefined);

interface StreamEvent {
  t: number;
  ok: boolean;
  node?: string;
  client?: string;
  error?: string;
}

/** VIP → LB hosts that hold it now (read from their interfaces). */
function holders(lab: Lab, vips: readonly string[]): Map<string, string[]> {
  const out = new Map<string, string[]>(vips.map((v) => [v, []]));
  for (const h of lab.state.layout.lbHosts) {
    const r = spawnSync("ip", ["-n", h.ns, "-j", "addr", "show", "dev", "eth0"], { encoding: "utf8" });
    const rows = JSON.parse(r.stdout || "[]") as { addr_info?: { local?: string }[] }[];
    for (const a of rows.flatMap((x) => x.addr_info ?? [])) out.get(a.local ?? "")?.push(h.name);
  }
  return out;
}

async function waitForOwners(lab: Lab, expected: ReadonlyMap<string, string>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  let seen = "";
  while (Date.now() < deadline) {
    const now = holders(lab, [...expected.keys()]);
    seen = JSON.stringify([...now]);
    if ([...expected].every(([v, h]) => JSON.stringify(now.get(v)) === JSON.stringify([h]))) return;
    await sleep(100);
  }
  throw new Error(`VIPs not held as elected ${JSON.stringify([...expected])}; seen ${seen}`);
}

/** The longest stretch without a successful new connection, from the first failure on. */
function gapMs(events: readonly StreamEvent[]): { gap: number; failed: number } {
  const failed = events.filter((e) => !e.ok).length;
  const firstFail = events.find((e) => !e.ok);
  if (!firstFail) return { gap: 0, failed };
  const lastOkBefore = [...events].reverse().find((e) => e.ok && e.t < firstFail.t);
  const firstOkAfter = events.find((e) => e.ok && e.t > firstFail.t);
  if (!firstOkAfter) return { gap: Number.POSITIVE_INFINITY, failed };
  return { gap: firstOkAfter.t - (lastOkBefore?.t ?? firstFail.t), failed };
}

function ipn(ns: string, ...args: string[]): void {
  const r = spawnSync("ip", ["-n", ns, ...args], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip -n ${ns} ${args.join(" ")}: ${r.stderr}`);
}

test("L2: election, failover within 3 s, graceful hand-over, kube-proxy coexistence", {
  timeout: 180_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "l2", lb: true });
  const hosts = lab.state.layout.lbHosts.map((h) => h.name);
  const vips = [...(await Promise.all(SERVICES.map((s) => lab.vip(s)))), await lab.vip("l2/web-6", "IPv6")];
  const elected = vipOwners(hosts, vips);
  const stream = (vip: string) =>
    lab.client("client-a", [
      "--mode",
      "stream",
      "--target",
      `${vip.includes(":") ? `[${vip}]` : vip}:80`,
      "--interval",
      "20",
      "--duration",
      "6000",
      // shorter than TCP's first SYN retransmission (1 s): a connection started during the
      // outage fails instead of quietly succeeding later
      "--timeout",
      "300",
    ]) as unknown as Promise<{ events: StreamEvent[] }>;
  const lbPid = (host: string) => lab.state.processes.find((p) => p.role === "lb" && p.host === host)!.pid;

  await t.test("each VIP is held by exactly the elected host, and both hosts hold some", async () => {
    await waitForOwners(lab, elected);
    assert.equal(new Set(elected.values()).size, 2, "the four VIPs spread over both hosts");
    for (const vip of vips) {
      const r = await lab.client("client-a", [
        "--target",
        `${vip.includes(":") ? `[${vip}]` : vip}:80`,
        "--count",
        "40",
      ]);
      assert.equal(r.failed, 0, `${vip}: ${JSON.stringify(r.errors)}`);
    }
  });

  const vip = await lab.vip("l2/web-cluster");
  const holder = elected.get(vip)!;
  const other = hosts.find((h) => h !== holder)!;
  const holderNs = lab.host(holder).ns;

  await t.test("the holder dies (SIGKILL, links down): the other host serves within 3 s", async () => {
    const running = stream(vip);
    await sleep(1500);
    process.kill(lbPid(holder), "SIGKILL");
    ipn(holderNs, "link", "set", "eth0", "down");
    ipn(holderNs, "link", "set", "eth1", "down");
    const { events } = await running;
    const { gap, failed } = gapMs(events);
    t.diagnostic(`hard failover: ${failed} of ${events.length} new connections failed, gap ${gap} ms`);
    assert.ok(failed > 0, "the outage was visible (the holder really carried the VIP)");
    assert.ok(gap <= 3000, `traffic resumed after ${gap} ms`);
    assert.ok(
      events.slice(-20).every((e) => e.ok),
      "the last connections all succeed",
    );
    // the dead host's interface still carries the address (nobody removed it), but its link is down
    assert.ok(holders(lab, [vip]).get(vip)?.includes(other), `${other} holds ${vip}`);
  });

  await t.test("the host comes back and takes its VIPs again (minimal movement)", async () => {
    ipn(holderNs, "link", "set", "eth0", "up");
    ipn(holderNs, "link", "set", "eth1", "up");
    await lab.restart("lb", holder);
    await waitForOwners(lab, elected);
  });

  await t.test(
    "only the process dies (SIGKILL, links up): its VIPs leave its interface by themselves",
    async () => {
      const t0 = Date.now();
      process.kill(lbPid(holder), "SIGKILL");
      // the peer takes over after the dead time; the killed process's address lifetime
      // (3 s after its last renewal) then removes the VIP from the holder's interface
      let seen = holders(lab, [vip]).get(vip) ?? [];
      while (Date.now() - t0 < 6000 && JSON.stringify(seen) !== JSON.stringify([other])) {
        await sleep(100);
        seen = holders(lab, [vip]).get(vip) ?? [];
      }
      t.diagnostic(`${vip} held by ${JSON.stringify(seen)} ${Date.now() - t0} ms after the kill`);
      assert.deepEqual(seen, [other], `only ${other} holds ${vip} within 6 s`);
      const r = await lab.client("client-a", ["--target", `${vip}:80`, "--count", "20"]);
      assert.equal(r.failed, 0, JSON.stringify(r.errors));
      await lab.restart("lb", holder);
      await waitForOwners(lab, elected);
    },
  );

  await t.test("a graceful stop hands over faster", async () => {
    const running = stream(vip);
    await sleep(1500);
    await lab.restart("lb", holder, true); // SIGTERM: goodbye, hand-over, release
    const { events } = await running;
    const { gap, failed } = gapMs(events);
    t.diagnostic(`graceful hand-over: ${failed} of ${events.length} new connections failed, gap ${gap} ms`);
    assert.ok(gap <= 1000, `graceful gap ${gap} ms`);
    assert.deepEqual(holders(lab, [vip]).get(vip), [other]);
    await lab.restart("lb", holder);
    await waitForOwners(lab, elected);
  });

  await t.test("kube-proxy's DNAT on the LB host (the agent) does not take the VIP traffic", async () => {
    const local = await lab.vip("l2/web-local");
    const lbHost = elected.get(local)!;
    const ns = lab.host(lbHost).ns;
    const agent = spawn(
      "ip",
      [
        "netns",
        "exec",
        ns,
        process.execPath,
        "bin/passlb.js",
        "agent",
        `--node=${lbHost}`,
        `--manifests=${lab.state.manifestsDir}`,
        "--dataplane=nftables",
      ],
      { cwd: REPO_ROOT, stdio: "ignore" },
    );
    t.after(() => {
      if (agent.exitCode === null) agent.kill("SIGKILL");
    });
    const deadline = Date.now() + 30_000;
    while (
      spawnSync("ip", ["netns", "exec", ns, "nft", "list", "table", "inet", "passlb-agent"]).status !== 0
    ) {
      assert.ok(Date.now() < deadline, "the agent on the LB host programmed no table");
      await sleep(200);
    }
    const count = (target: string) => lab.client("client-a", ["--target", `${target}:80`, "--count", "60"]);
    const clientIp = lab.host("client-a").ipv4;
    const withClaim = await count(local);
    assert.equal(withClaim.failed, 0, JSON.stringify(withClaim.errors));
    assert.deepEqual(Object.keys(withClaim.clients), [clientIp], "Local keeps the client address");
    assert.deepEqual(Object.keys(withClaim.byNode).sort(), ["node-a1", "node-a2"]);
    // without the claim the agent's DNAT runs first on new flows: an LB host without local
    // endpoints drops eTP Local traffic, as kube-proxy does
    spawnSync("ip", ["netns", "exec", ns, "nft", "delete", "table", "inet", "passlb-claim"]);
    const without = await count(local);
    t.diagnostic(`without the NAT claim: ${without.failed} of 60 failed (${JSON.stringify(without.errors)})`);
    assert.equal(without.ok, 0, "the agent's DNAT took over (control: the claim is what matters)");
    const r = spawnSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], { input: natClaimRuleset("passlb") });
    assert.equal(r.status, 0, String(r.stderr));
    const again = await count(local);
    assert.equal(again.failed, 0, JSON.stringify(again.errors));
    agent.kill("SIGTERM");
  });
});
