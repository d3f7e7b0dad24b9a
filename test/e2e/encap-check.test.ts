/**
 * The tunnel check (issue 21, `passlb lb --forward encap --encap-check`): the LB host probes
 * each routed node through the same VXLAN-GPE tunnel its VIP traffic takes (a TCP connect
 * from a reserved local port range, steered by `ip rule … ipproto tcp sport RANGE` into a
 * table of lightweight-tunnel routes: src/lb-host/routing/encap-check.ts). The routed lab of
 * encap-path.test.ts: zones a and b behind a router, zone c on the LB host's segment.
 *
 * - with a working decap the check passes through the tunnel (the node counts decapsulated
 *   SYNs to its health port on plbvg0) and every routed node serves;
 * - UDP 4790 dropped on a node (its decap broken, its own address still reachable): the
 *   node leaves the Service within the health bound (interval × unhealthyThreshold +
 *   timeout + 1 s) while its plain health check keeps passing, and the LB says why
 *   (`tunnel_check_failed` in the dashboard state, the event log and
 *   `passlb_tunnel_check_up`); unblocked, it comes back within interval × healthyThreshold
 *   + timeout + 1 s.
 *
 * Root only; otherwise skipped with the reason. Packets go only to addresses inside the lab
 * (docs/lab.md), and the lab is removed when the test ends, pass or fail.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { test } from "node:test";
import { parse } from "yaml";
import { ENCAP_CHECK_TABLE } from "../../src/lb-host/routing/encap-check.ts";
import { planSnapshot } from "../../src/plan/planner.ts";
import { type Lab, labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { assertNodeLossBound } from "./node-loss.ts";

const TOPOLOGY = "test/fixtures/lab/encap/topology.yaml";
const why = labUnavailable();
const DIRECT = ["--direct=198.51.100.0/26", "--direct=fd00:198:51:100::/64"];
const ROUTED_NODES = ["node-a1", "node-a2", "node-b1"];

const ns = (lab: Lab, host: string) => lab.host(host).ns;
const sh = (lab: Lab, host: string, argv: string[]) => {
  const r = spawnSync("ip", ["netns", "exec", ns(lab, host), ...argv], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${host}: ${argv.join(" ")}: ${r.stderr}`);
  return r.stdout;
};
/** HTTP GET from inside a namespace with Node's fetch: prints the status, then the body */
const FETCH = `fetch(process.argv[1], { signal: AbortSignal.timeout(Number(process.argv[2])) })
  .then(async (r) => process.stdout.write(r.status + "\\n" + (await r.text())))
  .catch((e) => { process.stderr.write(String(e)); process.exit(1); })`;
const httpGet = (netns: string, url: string, timeoutMs = 3000) => {
  const r = spawnSync("ip", ["netns", "exec", netns, process.execPath, "-e", FETCH, url, String(timeoutMs)], {
    encoding: "utf8",
  });
  const nl = r.stdout.indexOf("\n");
  return r.status === 0 ? { status: Number(r.stdout.slice(0, nl)), body: r.stdout.slice(nl + 1) } : undefined;
};
/** the LB's dashboard and metrics, inside its namespace (127.0.0.1:9797 there) */
const lbGet = (lab: Lab, path: string) => {
  const r = httpGet(ns(lab, "lb"), `http://127.0.0.1:9797${path}`);
  if (r?.status !== 200) throw new Error(`the LB's ${path}: ${JSON.stringify(r)}`);
  return r.body;
};
const lbLog = (lab: Lab) => readFileSync(lab.state.processes.find((p) => p.role === "lb")!.log, "utf8");

/** node-a2's row in encap/web on the dashboard */
function webRow(lab: Lab, node: string): { state: string; reason: string; path?: string } {
  const state = JSON.parse(lbGet(lab, "/api/v1/state")) as {
    services: { service: string; nodes: { node: string; state: string; reason: string; path?: string }[] }[];
  };
  const row = state.services.find((s) => s.service === "encap/web")?.nodes.find((n) => n.node === node);
  if (!row) throw new Error(`no ${node} in encap/web on the dashboard`);
  return row;
}

/** decapsulated SYNs to a port, counted on the node (iif plbvg0) */
function countDecapSyns(lab: Lab, node: string, port: number): () => number {
  spawnSync("ip", ["netns", "exec", ns(lab, node), "nft", "-f", "-"], {
    input: [
      "table inet plbencheckwatch {",
      "  counter syns {}",
      "  chain pre {",
      "    type filter hook prerouting priority raw; policy accept;",
      `    iifname "plbvg0" tcp dport ${port} tcp flags & (syn | ack) == syn counter name syns`,
      "  }",
      "}",
      "",
    ].join("\n"),
  });
  return () =>
    Number(
      /packets (\d+)/.exec(sh(lab, node, ["nft", "list", "counter", "inet", "plbencheckwatch", "syns"]))?.[1],
    );
}

const block = (lab: Lab, node: string) =>
  spawnSync("ip", ["netns", "exec", ns(lab, node), "nft", "-f", "-"], {
    input: [
      "table inet plbencheckblock {",
      "  chain in {",
      "    type filter hook input priority -300; policy accept;",
      "    udp dport 4790 drop",
      "  }",
      "}",
      "",
    ].join("\n"),
  });
const unblock = (lab: Lab, node: string) =>
  spawnSync("ip", ["netns", "exec", ns(lab, node), "nft", "delete", "table", "inet", "plbencheckblock"]);

test("encap check (VXLAN-GPE): passes through the tunnel; a broken decap takes the node out, a plain check does not hide it", {
  timeout: 240_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, {
    prefix: "encheck",
    lb: true,
    lbArgs: ["--forward=encap", "--encap=vxlan-gpe", ...DIRECT, "--encap-check"],
    agentArgs: ["--decap=vxlan-gpe"],
  });
  const web4 = await lab.vip("encap/web");
  const plan = planSnapshot(await lab.snapshot()).plans.find((p) => p.service === "encap/web")!;
  const check = plan.healthChecks[0]!;
  const downMs = (check.intervalSeconds * check.unhealthyThreshold + check.timeoutSeconds + 1) * 1000;
  const upMs = (check.intervalSeconds * check.healthyThreshold + check.timeoutSeconds + 1) * 1000;
  t.diagnostic(`web's check: ${JSON.stringify(check)}; bounds ${downMs} ms out, ${upMs} ms back`);

  const warm = Date.now();
  for (;;) {
    const r = await lab.client("client-a", ["--target", `${web4}:80`, "--count", "60", "--timeout", "1000"]);
    if (r.failed === 0 && Object.keys(r.byNode).length === 3) break;
    assert.ok(
      Date.now() - warm < 30_000,
      `web does not answer from all three routed nodes: ${JSON.stringify(r)}`,
    );
    await sleep(500);
  }

  await t.test("the LB host's rule and check tables: the routed nodes only, fail closed", () => {
    for (const fam of [4, 6] as const) {
      const rules = sh(lab, "lb", ["ip", `-${fam}`, "rule", "show", "pref", "3090"]);
      assert.match(
        rules,
        new RegExp(`iif lo ipproto tcp sport 61000-61255 lookup ${ENCAP_CHECK_TABLE[fam]}`),
        rules,
      );
      const table = sh(lab, "lb", [
        "ip",
        `-${fam}`,
        "route",
        "show",
        "table",
        String(ENCAP_CHECK_TABLE[fam]),
      ]);
      for (const node of ROUTED_NODES) {
        const a = fam === 4 ? lab.host(node).ipv4 : lab.host(node).ipv6;
        assert.match(
          table,
          new RegExp(
            `^${a.replaceAll(".", "\\.")} +encap ip6? id 0 .*dst ${a.replaceAll(".", "\\.")} .*dev plbvg0`,
            "m",
          ),
          table,
        );
      }
      const c1 = fam === 4 ? lab.host("node-c1").ipv4 : lab.host("node-c1").ipv6;
      assert.doesNotMatch(
        table,
        new RegExp(`^${c1.replaceAll(".", "\\.")} `, "m"),
        "node-c1 is routed directly: no check",
      );
      assert.match(table, /^unreachable default/m, table);
    }
  });

  await t.test("with a working decap the check goes through the tunnel and passes", async () => {
    // web's port (its check runs every intervalSeconds; `any`'s :10256 less often)
    const syns = countDecapSyns(lab, "node-a1", check.port);
    const before = syns();
    await sleep(check.intervalSeconds * 1000 * 2 + 500);
    const seen = syns() - before;
    assert.ok(seen >= 2, `node-a1 decapsulated ${seen} check SYNs to :${check.port} in two intervals`);
    sh(lab, "node-a1", ["nft", "delete", "table", "inet", "plbencheckwatch"]);
    for (const node of ROUTED_NODES) assert.equal(webRow(lab, node).state, "healthy", node);
    const metrics = lbGet(lab, "/metrics");
    for (const node of ROUTED_NODES)
      for (const fam of ["IPv4", "IPv6"])
        assert.match(
          metrics,
          new RegExp(`passlb_tunnel_check_up\\{node="${node}",family="${fam}"\\} 1`),
          `${node} ${fam}`,
        );
    assert.match(webRow(lab, "node-a1").path ?? "", /encap vxlan-gpe:4790, tunnel-checked/);
  });

  await t.test(
    "UDP 4790 dropped on node-a2: it leaves web in the bound, its plain check still passes",
    async (st) => {
      t.after(() => unblock(lab, "node-a2"));
      const logBefore = lbLog(lab).length;
      await assertNodeLossBound(st, lab, {
        what: "decap blocked",
        client: "client-a",
        target: `${web4}:80`,
        node: "node-a2",
        boundMs: downMs,
        fail: async () => {
          const r = block(lab, "node-a2");
          assert.equal(r.status, 0, String(r.stderr));
        },
      });
      const row = webRow(lab, "node-a2");
      assert.deepEqual([row.state, row.reason], ["unhealthy", "tunnel_check_failed"]);
      const metrics = lbGet(lab, "/metrics");
      assert.match(metrics, /passlb_tunnel_check_up\{node="node-a2",family="IPv4"\} 0/);
      assert.match(metrics, /passlb_tunnel_check_up\{node="node-a1",family="IPv4"\} 1/);
      const events = lbLog(lab)
        .slice(logBefore)
        .split("\n")
        .filter((l) => l.includes('"health_transition"') && l.includes('"node-a2"'));
      assert.ok(
        events.some((l) => l.includes('"tunnel_check_failed"')),
        `no tunnel_check_failed event for node-a2:\n${events.join("\n")}`,
      );
      // web's own check (HTTP :32110 on both families) never failed (`any`'s IPv6 :10256
      // is refused in this lab from the start — the agent's healthz listens on 0.0.0.0 —
      // and is not the subject)
      assert.deepEqual(
        events.filter((l) => l.includes('"probe_failures"') && l.includes(`:${check.port}/`)),
        [],
        "node-a2's plain health check of web stayed healthy",
      );
      // and its own address answers its health server from the LB host, outside the tunnel
      const plain = httpGet(ns(lab, "lb"), `http://${lab.host("node-a2").ipv4}:32110/healthz`, 2000);
      assert.equal(plain?.status, 200);
    },
  );

  await t.test(
    "unblocked, node-a2 comes back within interval × healthyThreshold + timeout + 1 s",
    async () => {
      unblock(lab, "node-a2");
      const start = Date.now();
      for (;;) {
        const r = await lab.client("client-a", [
          "--target",
          `${web4}:80`,
          "--count",
          "30",
          "--timeout",
          "1000",
        ]);
        if ((r.byNode["node-a2"] ?? 0) > 0) break;
        assert.ok(
          Date.now() - start < upMs,
          `node-a2 took no connection ${Date.now() - start} ms after the unblock`,
        );
        await sleep(200);
      }
      t.diagnostic(`node-a2 back after ${Date.now() - start} ms (bound ${upMs} ms)`);
      assert.equal(webRow(lab, "node-a2").state, "healthy");
    },
  );
});

test("the decap DaemonSet's command (agent --decap alone) in a namespace: device, sysctls through --proc-sys, repair", {
  timeout: 60_000,
}, async (t) => {
  if (why) return t.skip(why);
  const name = `plbencheckag${process.pid % 100000}`;
  const dir = `/tmp/${name}`;
  spawnSync("ip", ["netns", "add", name]);
  let child: ReturnType<typeof spawn> | undefined;
  t.after(() => {
    child?.kill("SIGKILL");
    spawnSync("ip", ["netns", "del", name]);
    rmSync(dir, { recursive: true, force: true });
  });
  const inNs = (argv: string[]) => spawnSync("ip", ["netns", "exec", name, ...argv], { encoding: "utf8" });
  inNs(["ip", "link", "set", "lo", "up"]);
  inNs(["sh", "-c", "echo 1 > /proc/sys/net/ipv4/conf/all/rp_filter"]); // strict: the agent must loosen it
  // the manifest's own args, with the pod's env filled in; a shorter period for the test
  const manifest = parse(readFileSync("deploy/components/decap-vxlan-gpe/decap-daemonset.yaml", "utf8")) as {
    spec: { template: { spec: { containers: { args: string[] }[] } } };
  };
  const args = manifest.spec.template.spec.containers[0]!.args.map((a) =>
    a.replace("$(NODE_NAME)", "node-x").replace("$(HOST_IP)", "127.0.0.1"),
  );
  const procSys = args.find((a) => a.startsWith("--proc-sys="))!.split("=")[1]!;
  // the kubelet's hostPath mount, inside `ip netns exec`'s own mount namespace
  const script = [
    `mkdir -p ${dir}${procSys}/net/ipv4/conf`,
    `mount --bind /proc/sys/net/ipv4/conf ${dir}${procSys}/net/ipv4/conf`,
    `exec ${process.execPath} bin/passlb.js ${args.map((a) => `'${a.replace(`--proc-sys=${procSys}`, `--proc-sys=${dir}${procSys}`)}'`).join(" ")} --sync-period=1`,
  ].join(" && ");
  child = spawn("ip", ["netns", "exec", name, "sh", "-c", script], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    log += d;
  });
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    log += d;
  });
  const until = async (what: string, ok: () => boolean, ms: number) => {
    const end = Date.now() + ms;
    while (!ok()) {
      assert.ok(Date.now() < end, `${what} (log:\n${log})`);
      await sleep(200);
    }
  };
  await until("plbvg0 was not created", () => inNs(["ip", "link", "show", "plbvg0"]).status === 0, 30_000);
  await until(
    "/healthz on the manifest's dashboard port did not answer",
    () => httpGet(name, "http://127.0.0.1:9798/healthz", 1000)?.status === 200,
    15_000,
  );
  assert.match(inNs(["ip", "-d", "link", "show", "plbvg0"]).stdout, /vxlan external .*dstport 4790 .*gpe/);
  assert.equal(inNs(["cat", "/proc/sys/net/ipv4/conf/plbvg0/rp_filter"]).stdout.trim(), "0");
  assert.equal(inNs(["cat", "/proc/sys/net/ipv4/conf/all/rp_filter"]).stdout.trim(), "2", "strict loosened");
  assert.match(inNs(["ip", "addr", "show", "plbvg0"]).stdout, /inet 127\.0\.0\.42\/32/);
  assert.equal(
    inNs(["ss", "-ltnH", "sport", "=", ":10256"]).stdout.trim(),
    "",
    "no health server of its own",
  );
  inNs(["ip", "link", "del", "plbvg0"]);
  await until(
    "plbvg0 did not come back within 2 periods",
    () => inNs(["ip", "link", "show", "plbvg0"]).status === 0,
    2500,
  );
  await until("no repair logged", () => log.includes('"reason":"repaired"'), 2000);
});
