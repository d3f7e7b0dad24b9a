/**
 * Two LB hosts on the clients' segment, announcing through VRRP with real keepalived
 * (docs/vip-announce.md, docs/lab.md "Several LB hosts"), the cases of issue 20 §2:
 *   - every VIP is held by exactly the host the rendezvous ranking puts first;
 *   - the holder dies (`passlb lb` and keepalived SIGKILLed, links down): new connections
 *     work again through the other host within 500 ms;
 *   - the holder comes back and takes its VIPs again (and only those);
 *   - only `passlb lb` dies (links up): keepalived and the kernel keep serving, no gap
 *     > 500 ms, and the restarted process adopts the running keepalived (same pid);
 *   - only keepalived dies: passlb removes the addresses it left, the peer takes over
 *     within 500 ms, keepalived is restarted and takes its VIPs back; no VIP stays on both
 *     hosts for long;
 *   - a graceful stop hands over with 0 failed connections;
 *   - a partition between the LB hosts (VRRP dropped both ways): both answer every VIP,
 *     clients are served; healed, each VIP is back on its first host;
 *   - an LB host that also runs a node's DNAT (`passlb agent`, playing kube-proxy) still
 *     forwards VIP traffic unchanged thanks to the NAT claim — and does not without it.
 * Root, nft, ip, arping and keepalived needed; skipped with the reason otherwise. The lab is
 * removed when the test ends, pass or fail (its namespaces' processes, keepalived included,
 * are stopped); every traffic loop is bounded.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { vipOwners } from "../../src/announce/vip-owners.ts";
import { nftScript } from "../../src/drivers/nft-transaction.ts";
import { natClaimTransaction } from "../../src/lb-host/nftables/render/nat-claim.ts";
import { type Lab, labUnavailable, REPO_ROOT, sleep, startLab } from "./lab-harness.ts";

const TOPOLOGY = "test/fixtures/lab/l2/topology.yaml";
const SERVICES = ["l2/web-local", "l2/web-cluster", "l2/web-3"] as const;
const why =
  labUnavailable() ??
  (spawnSync("arping", ["-V"]).error ? "arping (iputils-arping) is not installed" : undefined) ??
  (spawnSync("keepalived", ["--version"]).error ? "keepalived is not installed" : undefined);

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

/** Samples who holds `vip` every 25 ms while `during` runs: the longest stretch on both hosts. */
async function doubleHeld(lab: Lab, vip: string, during: Promise<unknown>): Promise<number> {
  let done = false;
  void during.finally(() => {
    done = true;
  });
  let since: number | undefined;
  let longest = 0;
  while (!done) {
    const n = holders(lab, [vip]).get(vip)?.length ?? 0;
    const now = Date.now();
    if (n > 1) since ??= now;
    else if (since !== undefined) {
      longest = Math.max(longest, now - since);
      since = undefined;
    }
    await sleep(25);
  }
  return since === undefined ? longest : Math.max(longest, Date.now() - since);
}

function ipn(ns: string, ...args: string[]): void {
  const r = spawnSync("ip", ["-n", ns, ...args], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip -n ${ns} ${args.join(" ")}: ${r.stderr}`);
}

test("L2 on keepalived: election, failovers ≤ 500 ms, adoption, graceful hand-over, partition, kube-proxy coexistence", {
  timeout: 300_000,
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
  const kaDir = (host: string) => join(lab.state.stateDir, `keepalived-${host}`);
  const kaPids = (host: string) =>
    ["keepalived.pid", "keepalived-vrrp.pid"].map((f) => Number(readFileSync(join(kaDir(host), f), "utf8")));
  // SIGKILL to keepalived's process group (parent and VRRP child at once, as the OOM killer
  // or a container's end would): killing the parent alone lets the child stop in order
  // (parent-death signal: priority-0 adverts, addresses removed)
  const killKeepalived = (host: string) => {
    try {
      process.kill(-kaPids(host)[0]!, "SIGKILL");
    } catch {}
  };
  const lbLog = (host: string) =>
    readFileSync(lab.state.processes.find((p) => p.role === "lb" && p.host === host)!.log, "utf8");

  await t.test("each VIP is held by exactly the elected host, and both hosts hold some", async () => {
    await waitForOwners(lab, elected);
    assert.equal(new Set(elected.values()).size, 2, "the four VIPs spread over both hosts");
    // every LB host asked the segment (arping / ndisc6, docs/vip-announce.md "Checked from
    // the wire") and found each VIP answered by one LB host's MAC
    for (const h of hosts) {
      const deadline = Date.now() + 15_000;
      while (!/wire: first check/.test(lbLog(h)) && Date.now() < deadline) await sleep(200);
      const line = lbLog(h).match(/wire: first check: .*/)?.[0] ?? "no first wire check in the log";
      t.diagnostic(`${h}: ${line}`);
      const wireLog = lbLog(h)
        .split("\n")
        .filter((l) => l.includes("wire:"))
        .join("\n");
      assert.match(line, /first check: 4 VIPs asked on eth\d, each answered by one LB host/, wireLog);
      assert.doesNotMatch(lbLog(h), /wire: .*(duplicate_answer|foreign_mac|no_answer|answers:)/);
    }
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

  await t.test(
    "the holder dies (passlb and keepalived SIGKILLed, links down): the other host serves within 500 ms",
    async () => {
      const running = stream(vip);
      await sleep(1500);
      process.kill(lbPid(holder), "SIGKILL");
      killKeepalived(holder);
      ipn(holderNs, "link", "set", "eth0", "down");
      ipn(holderNs, "link", "set", "eth1", "down");
      const { events } = await running;
      const { gap, failed } = gapMs(events);
      t.diagnostic(`hard failover: ${failed} of ${events.length} new connections failed, gap ${gap} ms`);
      assert.ok(failed > 0, "the outage was visible (the holder really carried the VIP)");
      assert.ok(gap <= 500, `traffic resumed after ${gap} ms`);
      assert.ok(
        events.slice(-20).every((e) => e.ok),
        "the last connections all succeed",
      );
      // the dead host's interface may still carry the address (nobody removed it), but its link is down
      assert.ok(holders(lab, [vip]).get(vip)?.includes(other), `${other} holds ${vip}`);
    },
  );

  await t.test("the host comes back and takes its VIPs again (minimal movement)", async () => {
    ipn(holderNs, "link", "set", "eth0", "up");
    ipn(holderNs, "link", "set", "eth1", "up");
    await lab.restart("lb", holder);
    await waitForOwners(lab, elected);
  });

  await t.test(
    "only passlb dies (SIGKILL, links up): keepalived keeps serving; the restart adopts it",
    async () => {
      const before = kaPids(holder)[0];
      const running = stream(vip);
      await sleep(1500);
      process.kill(lbPid(holder), "SIGKILL");
      const { events } = await running;
      const { gap, failed } = gapMs(events);
      t.diagnostic(`passlb killed: ${failed} of ${events.length} new connections failed, gap ${gap} ms`);
      assert.ok(gap <= 500, `gap ${gap} ms`);
      assert.deepEqual(holders(lab, [vip]).get(vip), [holder], "keepalived on the holder still holds it");
      await lab.restart("lb", holder);
      const deadline = Date.now() + 15_000;
      while (!/adopted keepalived/.test(lbLog(holder)) && Date.now() < deadline) await sleep(100);
      assert.match(lbLog(holder), /adopted keepalived/);
      assert.equal(kaPids(holder)[0], before, "the same keepalived runs on");
      await waitForOwners(lab, elected);
    },
  );

  await t.test(
    "only keepalived dies: its leftovers go, the peer serves within 500 ms, it comes back",
    async () => {
      const running = stream(vip);
      await sleep(1500);
      killKeepalived(holder);
      const both = await doubleHeld(lab, vip, running);
      const { events } = await running;
      const { gap, failed } = gapMs(events);
      t.diagnostic(
        `keepalived killed: ${failed} of ${events.length} new connections failed, gap ${gap} ms, on both hosts for ${both} ms at most`,
      );
      assert.ok(gap <= 500, `gap ${gap} ms`);
      assert.ok(both <= 500, `${vip} on both hosts for ${both} ms`);
      assert.match(
        lbLog(holder),
        /removed VIP addresses keepalived left behind \((adopted )?keepalived exited( \(SIGKILL\))?\)/,
      );
      await waitForOwners(lab, elected);
    },
  );

  await t.test("a graceful stop hands over with 0 failed connections", async () => {
    const running = stream(vip);
    await sleep(1500);
    await lab.restart("lb", holder, true); // SIGTERM: priority drop, hand-over, keepalived stops
    const { events } = await running;
    const { gap, failed } = gapMs(events);
    t.diagnostic(`graceful hand-over: ${failed} of ${events.length} new connections failed, gap ${gap} ms`);
    assert.equal(failed, 0, `graceful hand-over: ${failed} failed`);
    assert.deepEqual(holders(lab, [vip]).get(vip), [other]);
    await lab.restart("lb", holder);
    await waitForOwners(lab, elected);
  });

  await t.test(
    "partition between the LB hosts: both answer every VIP, clients are served; healed, back as elected",
    async () => {
      // VRRP (IP protocol 112) dropped on input on both LB hosts, both families: only they
      // speak VRRP on the segment, so this cuts exactly the link between them
      const drop = (host: string) => {
        const r = spawnSync("ip", ["netns", "exec", lab.host(host).ns, "nft", "-f", "-"], {
          input:
            "table inet plbvrrp-partition {\n chain in { type filter hook input priority -10; meta l4proto vrrp drop; }\n}\n",
          encoding: "utf8",
        });
        assert.equal(r.status, 0, r.stderr);
      };
      const heal = () => {
        for (const h of hosts)
          spawnSync("ip", [
            "netns",
            "exec",
            lab.host(h).ns,
            "nft",
            "delete",
            "table",
            "inet",
            "plbvrrp-partition",
          ]);
      };
      t.after(heal);
      drop(holder);
      drop(other);
      const deadline = Date.now() + 5000;
      let seen = holders(lab, vips);
      while (![...seen.values()].every((hs) => hs.length === 2) && Date.now() < deadline) {
        await sleep(100);
        seen = holders(lab, vips);
      }
      t.diagnostic(`partitioned: ${JSON.stringify([...seen])}`);
      assert.ok(
        [...seen.values()].every((hs) => hs.length === 2),
        "both hosts are master for every VIP",
      );
      for (const v of vips) {
        const r = await lab.client("client-a", [
          "--target",
          `${v.includes(":") ? `[${v}]` : v}:80`,
          "--count",
          "40",
        ]);
        assert.equal(r.failed, 0, `${v} while partitioned: ${JSON.stringify(r.errors)}`);
      }
      heal();
      await waitForOwners(lab, elected);
      for (const v of vips) {
        const r = await lab.client("client-a", [
          "--target",
          `${v.includes(":") ? `[${v}]` : v}:80`,
          "--count",
          "20",
        ]);
        assert.equal(r.failed, 0, `${v} after the partition: ${JSON.stringify(r.errors)}`);
      }
    },
  );

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
    const r = spawnSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], {
      input: nftScript(natClaimTransaction("passlb")),
    });
    assert.equal(r.status, 0, String(r.stderr));
    const again = await count(local);
    assert.equal(again.failed, 0, JSON.stringify(again.errors));
    agent.kill("SIGTERM");
  });
});
