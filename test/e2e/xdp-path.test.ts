/**
 * The nftables path's lab scenarios through `passlb lb --dataplane xdp`, with real packets:
 * the XDP program on the LB's client ports (plbc0, plbc1) forwards VIP packets itself
 * (redirect to the node's bridge port) once the nodes' neighbours are resolved; nftables
 * behind it takes what XDP hands over. Every scenario also asserts that XDP, not nftables,
 * carried the packets (the program's own verdict counters, read from its pinned map).
 * Covered: weights and eTP Local, client address kept, Cluster, zonal and ClientIP affinity,
 * source ranges, UDP, IPv6, long-lived connections across node churn and an LB restart that
 * adopts the pinned maps (IPv4 and IPv6), a client reusing fixed source ports across node
 * changes, drift (a detached program and a flushed map restored), and a dead node's
 * failover. The lab is `xdp<pid>` (its own namespaces), built from the e2e topology and
 * removed when the test ends, pass or fail; the bpffs it pins to is mounted in a temporary
 * directory and unmounted. Root, nft, clang and bpftool needed; skipped with the reason.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { XDP_REASONS } from "../../src/lb-host/xdp/xdp-layout.ts";
import { buildXdpObject } from "../../src/lb-host/xdp/xdp-object.ts";
import { xdpUnavailable } from "../xdp/xdp-harness.ts";
import { type Lab, labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { assertNodeLossBound } from "./node-loss.ts";
import { spreadProblem } from "./stats.ts";

const TOPOLOGY = "test/fixtures/lab/e2e/topology.yaml";
const why =
  labUnavailable() ??
  xdpUnavailable() ??
  (spawnSync("ethtool", ["--version"]).error ? "needs ethtool (Debian package ethtool)" : undefined);

interface Held {
  connections: { ok: boolean; error?: string; node?: string; pings: number }[];
}

function bpftoolJson(args: readonly string[]): unknown {
  const r = spawnSync("bpftool", ["-j", ...args], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`bpftool ${args.join(" ")}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** the program's verdict counters, summed over CPUs */
function reasons(pin: string): Record<string, number> {
  const rows = bpftoolJson(["map", "dump", "pinned", `${pin}/maps/reasons`]) as {
    key: string[];
    values: { value: string[] }[];
  }[];
  const out: Record<string, number> = {};
  for (const r of rows) {
    const i = Number.parseInt(r.key[0]!, 16);
    let n = 0;
    for (const v of r.values)
      n += Number(Buffer.from(v.value.slice(0, 8).map((h) => Number.parseInt(h, 16))).readBigUInt64LE());
    out[XDP_REASONS[i] ?? `r${i}`] = n;
  }
  return out;
}

const forwarded = (r: Record<string, number>) => (r.fwd_tx ?? 0) + (r.fwd_redirect ?? 0);

/** runs `fn` and returns how many packets XDP forwarded and handed to the stack meanwhile */
async function throughXdp<T>(
  pin: string,
  fn: () => Promise<T>,
): Promise<{ result: T; fwd: number; passNode: number }> {
  const before = reasons(pin);
  const result = await fn();
  const after = reasons(pin);
  return {
    result,
    fwd: forwarded(after) - forwarded(before),
    passNode: (after.pass_node ?? 0) - (before.pass_node ?? 0),
  };
}

test("XDP path: the LB scenarios with real packets, on IPv4 and IPv6", { timeout: 300_000 }, async (t) => {
  if (why) return t.skip(why);
  const dir = mkdtempSync(join(tmpdir(), "plb-xdplab-"));
  const bpffs = join(dir, "bpffs");
  mkdirSync(bpffs);
  assert.equal(spawnSync("mount", ["-t", "bpf", "bpf", bpffs]).status, 0, "mount bpffs");
  t.after(() => {
    spawnSync("umount", [bpffs]);
    rmSync(dir, { recursive: true, force: true });
  });
  const object = join(dir, "passlb-xdp.o");
  await buildXdpObject(object);
  const pin = join(bpffs, "passlb");
  const lab = await startLab(t, TOPOLOGY, {
    prefix: "xdp",
    lb: true,
    lbArgs: [
      "--dataplane=xdp",
      "--xdp-interface=plbc0",
      "--xdp-interface=plbc1",
      `--xdp-pin-dir=${pin}`,
      `--xdp-object=${object}`,
      "--drift-check-ms=1000",
      "--counters-ms=1000",
    ],
  });
  await attachPeers(lab, pin);
  const CLIENT_A = lab.host("client-a").ipv4;
  const web = await lab.vip("e2e/web");
  const any6 = await lab.vip("e2e/any", "IPv6");
  const any = await lab.vip("e2e/any");
  // the first packets to a node go through nftables (its neighbour is not resolved yet);
  // within a drift interval the next hops are known and XDP takes over
  await warmUp(lab, pin, [`${web}:80`, `${any}:81`, `[${any6}]:81`]);

  await t.test(
    "weighted Local: nodes 3:1, only nodes with ready pods, client address kept — through XDP",
    async () => {
      const {
        result: r,
        fwd,
        passNode,
      } = await throughXdp(pin, () =>
        lab.client("client-a", ["--target", `${web}:80`, "--count", "2000", "--concurrency", "16"]),
      );
      assert.equal(r.failed, 0, JSON.stringify(r.errors));
      assert.deepEqual(Object.keys(r.byNode).sort(), ["node-a1", "node-a2"]);
      const problem = await spreadProblem(
        ["node-a1", "node-a2"].map((k) => r.byNode[k] ?? 0),
        [3, 1],
        async () => {
          const more = await lab.client("client-a", [
            "--target",
            `${web}:80`,
            "--count",
            "2000",
            "--concurrency",
            "16",
          ]);
          return ["node-a1", "node-a2"].map((k) => more.byNode[k] ?? 0);
        },
      );
      assert.equal(problem, undefined, problem);
      assert.deepEqual(r.clients, { [CLIENT_A]: 2000 }, "Local keeps the client address");
      t.diagnostic(`XDP forwarded ${fwd} packets for 2000 connections; handed ${passNode} to nftables`);
      assert.ok(fwd >= 2000 * 3, `XDP forwarded only ${fwd} packets`);
      assert.equal(passNode, 0, "no packet of a resolved node went to the stack");
    },
  );

  await t.test("Cluster over IPv6, UDP, ClientIP, zonal — through XDP", async () => {
    const { result: v6, fwd: fwd6 } = await throughXdp(pin, () =>
      lab.client("client-a", ["--target", `[${any6}]:81`, "--count", "300", "--concurrency", "8"]),
    );
    assert.equal(v6.failed, 0, JSON.stringify(v6.errors));
    assert.deepEqual(Object.keys(v6.byPod).sort(), ["a1-1", "a1-2", "b1-1"]);
    assert.ok(fwd6 >= 900, `IPv6: XDP forwarded ${fwd6}`);
    const dns = await lab.vip("e2e/dns");
    const { result: u, fwd: fwdU } = await throughXdp(pin, () =>
      lab.client("client-b", ["--target", `${dns}:53`, "--proto", "udp", "--count", "300"]),
    );
    assert.equal(u.failed, 0, JSON.stringify(u.errors));
    assert.deepEqual(Object.keys(u.byPod).sort(), ["a1-1", "b1-1"]);
    assert.ok(fwdU >= 250, `UDP: XDP forwarded ${fwdU}`);
    const sticky = await lab.vip("e2e/sticky");
    for (const client of ["client-a", "client-b"]) {
      const r = await lab.client(client, [
        "--target",
        `${sticky}:82`,
        "--count",
        "100",
        "--concurrency",
        "8",
      ]);
      assert.equal(r.failed, 0, JSON.stringify(r.errors));
      assert.equal(Object.keys(r.byPod).length, 1, `${client}: ${JSON.stringify(r.byPod)}`);
    }
    const zonal = await lab.vip("e2e/zonal");
    const a = await lab.client("client-a", [
      "--target",
      `${zonal}:85`,
      "--count",
      "100",
      "--concurrency",
      "8",
    ]);
    assert.deepEqual(a.byNode, { "node-a1": 100 });
    const b = await lab.client("client-b", [
      "--target",
      `${zonal}:85`,
      "--count",
      "100",
      "--concurrency",
      "8",
    ]);
    assert.deepEqual(b.byNode, { "node-b1": 100 });
  });

  await t.test("loadBalancerSourceRanges: other clients dropped at the driver", async () => {
    const guarded = await lab.vip("e2e/guarded");
    const a = await lab.client("client-a", ["--target", `${guarded}:83`, "--count", "20"]);
    assert.equal(a.ok, 20, JSON.stringify(a.errors));
    const before = reasons(pin).drop_source ?? 0;
    const b = await lab.client("client-b", ["--target", `${guarded}:83`, "--count", "3", "--timeout", "500"]);
    assert.deepEqual(b.errors, { ETIMEDOUT: 3 });
    assert.ok((reasons(pin).drop_source ?? 0) - before >= 3, "XDP dropped the SYNs");
  });

  await t.test(
    "long-lived connections (IPv4 and IPv6) survive node churn and an LB restart that adopts the maps",
    async () => {
      const hold = (target: string) =>
        lab.client("client-a", [
          "--mode",
          "hold",
          "--target",
          target,
          "--connections",
          "16",
          "--duration",
          "10000",
          "--interval",
          "100",
        ]) as unknown as Promise<Held>;
      const held4 = hold(`${web}:80`);
      const held6 = hold(`[${any6}]:81`);
      await sleep(1000);
      const replacedBefore = reasons(pin).flow_replaced ?? 0;
      await lab.update((topo) => {
        topo.zones[1]!.nodes[0]!.pods.find((p) => p.name === "b1-3")!.ready = true;
        return topo;
      });
      await sleep(1000);
      await lab.update((topo) => {
        topo.zones[1]!.nodes[0]!.pods.find((p) => p.name === "b1-3")!.ready = false;
        return topo;
      });
      const progBefore = bpftoolJson(["prog", "show", "pinned", `${pin}/prog/passlb_xdp`]) as { id: number };
      await lab.restart("lb", "lb", false, "SIGKILL");
      const [r4, r6] = await Promise.all([held4, held6]);
      for (const [fam, r] of [
        ["IPv4", r4],
        ["IPv6", r6],
      ] as const) {
        assert.equal(r.connections.length, 16, fam);
        assert.deepEqual(
          r.connections.filter((c) => !c.ok),
          [],
          `${fam}: no connection was reset or stalled`,
        );
        assert.ok(
          r.connections.every((c) => c.pings >= 60),
          `${fam}: ${JSON.stringify(r.connections.map((c) => c.pings))}`,
        );
      }
      // the restarted LB adopted the nodes' generations: no held flow missed its entry
      assert.equal((reasons(pin).flow_replaced ?? 0) - replacedBefore, 0, "no flow entry was re-chosen");
      const progAfter = bpftoolJson(["prog", "show", "pinned", `${pin}/prog/passlb_xdp`]) as { id: number };
      assert.equal(progAfter.id, progBefore.id, "the restarted LB adopted the pinned program (same object)");
    },
  );

  await t.test(
    "a client reusing fixed source ports across node changes: every connection answered",
    async () => {
      // below the ephemeral range (32768–60999): the earlier scenarios' thousands of
      // connections from client-a leave TIME_WAIT at the pods on ephemeral ports, and a SYN
      // that meets one is answered by the pod's TIME_WAIT, not by the LB's choice
      const ports = { first: 20000, count: 40 };
      const round = () => fixedPortRound(lab, `${web}`, 80, ports.first, ports.count);
      // the scenario before this one toggles b1-3 and kills the LB: ordinary connections must
      // all be answered again (the restarted LB has converged) before the reused ports are tried
      await settled(lab, `${web}:80`);
      const before = await round();
      assert.deepEqual(before.failed, [], "before the change");
      // node-b1 joins web: about a third of the slots move; the same 5-tuples come back as new SYNs
      await lab.update((topo) => {
        topo.zones[1]!.nodes[0]!.pods.find((p) => p.name === "b1-3")!.ready = true;
        return topo;
      });
      await servedBy(lab, `${web}:80`, "node-b1", true);
      const during = await round();
      assert.deepEqual(during.failed, [], "after node-b1 joined");
      const moved = Object.keys(during.byPort).filter((p) => during.byPort[p] !== before.byPort[p]).length;
      t.diagnostic(
        `${moved} of ${ports.count} reused 5-tuples moved to another node (SYN took the new choice)`,
      );
      assert.ok(moved > 0, "some reused tuples follow the new table");
      await lab.update((topo) => {
        topo.zones[1]!.nodes[0]!.pods.find((p) => p.name === "b1-3")!.ready = false;
        return topo;
      });
      await servedBy(lab, `${web}:80`, "node-b1", false);
      const after = await round();
      assert.deepEqual(after.failed, [], "after node-b1 left");
      assert.ok(!Object.values(after.byPort).includes("node-b1"), "none reaches the node that left");
    },
  );

  await t.test("drift: a detached program and a flushed map are restored within one interval", async () => {
    const lbNs = lab.state.layout.lb.ns;
    assert.equal(spawnSync("ip", ["-n", lbNs, "link", "set", "dev", "plbc0", "xdpdrv", "off"]).status, 0);
    const vips = bpftoolJson(["map", "dump", "pinned", `${pin}/maps/vips`]) as { key: string[] }[];
    assert.ok(vips.length > 0);
    for (const v of vips)
      spawnSync("bpftool", [
        "map",
        "delete",
        "pinned",
        `${pin}/maps/vips`,
        "key",
        "hex",
        ...v.key.map((h) => h.slice(2)),
      ]);
    await sleep(2500); // drift interval 1 s, plus a loaded machine's slack
    const link = JSON.parse(
      spawnSync("ip", ["-n", lbNs, "-j", "link", "show", "dev", "plbc0"], { encoding: "utf8" }).stdout,
    ) as {
      xdp?: { prog?: { id: number } };
    }[];
    const lbLog = () =>
      readFileSync(lab.state.processes.find((p) => p.role === "lb")!.log, "utf8").slice(-3000);
    assert.ok(link[0]?.xdp?.prog?.id, `attached again; LB log:\n${lbLog()}`);
    const again = bpftoolJson(["map", "dump", "pinned", `${pin}/maps/vips`]) as unknown[];
    assert.equal(again.length, vips.length, `vips restored; LB log:\n${lbLog()}`);
    const { result: r, fwd } = await throughXdp(pin, () =>
      lab.client("client-a", ["--target", `${web}:80`, "--count", "200", "--concurrency", "8"]),
    );
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    assert.ok(fwd >= 600, `XDP forwards again: ${fwd}`);
  });

  await t.test(
    "a dead node stops getting new connections in time (XDP keeps forwarding the rest)",
    async () => {
      await assertNodeLossBound(t, lab, {
        what: "link goes down",
        client: "client-a",
        target: `${web}:80`,
        node: "node-a2",
        boundMs: 8000,
        fail: async () => lab.link("node-a2", false),
      });
    },
  );
});

/** the nodes' ends of the veths XDP redirects into: a veth drops frames redirected to it unless
 * its peer runs an XDP program (drivers/net/veth.c veth_xdp_xmit: NAPI needed) */
async function attachPeers(lab: Lab, pin: string): Promise<void> {
  // a client's veth hands TCP/UDP checksums to "hardware" (CHECKSUM_PARTIAL); a frame XDP
  // redirects loses that state and arrives with the checksum never filled in. A NIC's
  // frames are complete on the wire; in the lab the clients compute them (docs/dataplane-xdp.md)
  for (const c of lab.state.layout.clients) {
    const r = spawnSync("ip", ["netns", "exec", c.ns, "ethtool", "-K", "eth0", "tx", "off"], {
      encoding: "utf8",
    });
    assert.equal(r.status, 0, `${c.name}: ethtool: ${r.stderr}`);
  }
  const pass = `${pin}/prog/passlb_xdp_pass`;
  for (let i = 0; !existsSync(pass); i++) {
    assert.ok(i < 100, `the LB did not pin ${pass}`);
    await sleep(200);
  }
  for (const n of lab.state.layout.nodes) {
    const r = spawnSync("ip", ["-n", n.ns, "link", "set", "dev", "eth0", "xdpdrv", "pinned", pass], {
      encoding: "utf8",
    });
    assert.equal(r.status, 0, `${n.name}: ${r.stderr}`);
  }
}

async function warmUp(lab: Lab, pin: string, targets: readonly string[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    let all = true;
    for (const target of targets) {
      const { result, passNode, fwd } = await throughXdp(pin, () =>
        lab.client("client-a", ["--target", target, "--count", "40", "--timeout", "1000"]),
      );
      if (result.failed > 0 || passNode > 0 || fwd === 0) all = false;
    }
    if (all) return;
    if (Date.now() >= deadline) {
      const log = readFileSync(lab.state.processes.find((p) => p.role === "lb")!.log, "utf8");
      assert.fail(
        `XDP never took over from nftables: ${JSON.stringify(reasons(pin))}\nLB log:\n${log.slice(-4000)}`,
      );
    }
    await sleep(500);
  }
}

/** waits (bounded, 20 s) until a round of ordinary new connections to `target` all succeed */
async function settled(lab: Lab, target: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await lab.client("client-a", ["--target", target, "--count", "40", "--concurrency", "8"]);
    if (r.failed === 0) return;
    assert.ok(Date.now() < deadline, `new connections to ${target} still fail: ${JSON.stringify(r.errors)}`);
    await sleep(500);
  }
}

/** waits (bounded) until new connections to `target` reach `node` — or no longer do */
async function servedBy(lab: Lab, target: string, node: string, reached: boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await lab.client("client-a", ["--target", target, "--count", "40", "--concurrency", "8"]);
    if (node in r.byNode === reached && r.failed === 0) return;
    assert.ok(Date.now() < deadline, `${target}: ${node} ${reached ? "never reached" : "still reached"}`);
    await sleep(300);
  }
}

/** one connection from each fixed source port, closed with a RST (no TIME_WAIT: the port is
 * reused at once, as a NAT gateway reuses it): which node answered, and which ports failed */
async function fixedPortRound(
  lab: Lab,
  vip: string,
  port: number,
  first: number,
  count: number,
): Promise<{ byPort: Record<string, string>; failed: number[] }> {
  const script = `
const net = require("node:net");
(async () => {
  const out = { byPort: {}, failed: [] };
  for (let p = ${first}; p < ${first + count}; p++) {
    await new Promise((done) => {
      const s = net.connect({ host: "${vip}", port: ${port}, localPort: p });
      const timer = setTimeout(() => { out.failed.push(p); s.destroy(); done(); }, 2000);
      let buf = "";
      s.on("data", (d) => {
        buf += d;
        const m = /node=(\\S*)/.exec(buf);
        if (m && buf.includes("\\n")) { clearTimeout(timer); out.byPort[p] = m[1]; s.resetAndDestroy(); done(); }
      });
      s.on("error", () => { clearTimeout(timer); out.failed.push(p); done(); });
    });
  }
  process.stdout.write(JSON.stringify(out));
})();`;
  const r = spawnSync("ip", ["netns", "exec", lab.host("client-a").ns, process.execPath, "-e", script], {
    encoding: "utf8",
    timeout: 120_000,
  });
  if (r.status !== 0) throw new Error(`fixed-port client: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
