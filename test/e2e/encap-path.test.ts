/**
 * End to end through a routed network (issue 21): client → `passlb lb --forward encap`
 * (nftables, Maglev, lightweight-tunnel routes into `vxlan gpe external`) → the router →
 * a node in another subnet, whose `passlb agent --decap vxlan-gpe` unwraps the packet and
 * DNATs it to a pod; the reply goes node → router → client, never through the LB host.
 * Zones a and b are routed, zone c sits on the LB host's segment and is routed directly
 * (`--direct`): a mixed site. Both families, with IPv6 outer headers too.
 *
 * IPIP, GRE and GUE run the same checks where the kernel can create their devices; this
 * CI kernel cannot (docs/dataplane-nftables.md "Routed networks") and the test says so
 * when it skips.
 *
 * Root only; otherwise skipped with the reason. Packets go only to addresses inside the
 * lab (docs/lab.md), and the lab is removed when the test ends, pass or fail.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { test } from "node:test";
import { planSnapshot } from "../../src/plan/planner.ts";
import { type Lab, labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { assertNodeLossBound } from "./node-loss.ts";
import { spreadProblem } from "./stats.ts";

const TOPOLOGY = "test/fixtures/lab/encap/topology.yaml";
const why = labUnavailable();
const DIRECT = ["--direct=198.51.100.0/26", "--direct=fd00:198:51:100::/64"];
const ROUTED_NODES = ["node-a1", "node-a2", "node-b1"];
const ALL_HOSTS = ["client-a", "client-b", "lb", "encap-router", "node-a1", "node-a2", "node-b1", "node-c1"];

const ns = (lab: Lab, host: string) => lab.host(host).ns;
const sh = (lab: Lab, host: string, argv: string[]) => {
  const r = spawnSync("ip", ["netns", "exec", ns(lab, host), ...argv], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${host}: ${argv.join(" ")}: ${r.stderr}`);
  return r.stdout;
};

/** The kernel's IP counters of a namespace (/proc/net/snmp "Ip:"/"Icmp:", /proc/net/snmp6). */
function counters(lab: Lab, host: string): Record<string, number> {
  const out: Record<string, number> = {};
  const lines = sh(lab, host, ["cat", "/proc/net/snmp"]).split("\n");
  for (let i = 0; i + 1 < lines.length; i += 2) {
    const keys = lines[i]!.split(/\s+/);
    const values = lines[i + 1]!.split(/\s+/);
    const group = keys[0]!.replace(":", "");
    keys.slice(1).forEach((k, j) => {
      out[`${group}${k}`] = Number(values[j + 1]);
    });
  }
  for (const line of sh(lab, host, ["cat", "/proc/net/snmp6"]).split("\n")) {
    const [k, v] = line.trim().split(/\s+/);
    if (k) out[k] = Number(v);
  }
  return out;
}

function snapshotAll(lab: Lab, keys: readonly string[]): Map<string, Record<string, number>> {
  const all = new Map<string, Record<string, number>>();
  for (const h of ALL_HOSTS) {
    const c = counters(lab, h);
    all.set(h, Object.fromEntries(keys.map((k) => [k, c[k] ?? 0])));
  }
  return all;
}

function deltas(before: Map<string, Record<string, number>>, after: Map<string, Record<string, number>>) {
  const out: Record<string, Record<string, number>> = {};
  for (const [h, b] of before) {
    const a = after.get(h)!;
    const d: Record<string, number> = {};
    for (const k of Object.keys(b)) if (a[k]! - b[k]! !== 0) d[k] = a[k]! - b[k]!;
    if (Object.keys(d).length > 0) out[h] = d;
  }
  return out;
}

/** The MSS option of the first SYN-ACK the client receives while `connect` runs. */
async function synAckMss(lab: Lab, client: string, connect: () => Promise<unknown>, v6: boolean) {
  const filter = v6
    ? "ip6 and tcp and ip6[53] & 0x12 == 0x12"
    : "tcp[tcpflags] & (tcp-syn|tcp-ack) == (tcp-syn|tcp-ack)";
  const dump = spawn(
    "ip",
    ["netns", "exec", ns(lab, client), "timeout", "8", "tcpdump", "-nli", "eth0", "-c", "1", filter],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  let err = "";
  dump.stdout.setEncoding("utf8").on("data", (d: string) => {
    out += d;
  });
  dump.stderr.setEncoding("utf8").on("data", (d: string) => {
    err += d;
  });
  const closed = new Promise((r) => dump.on("close", r));
  // tcpdump says "listening on" once the capture is open
  for (let i = 0; i < 100 && !err.includes("listening on"); i++) await sleep(20);
  await connect();
  await closed;
  const m = /mss (\d+)/.exec(out);
  return m ? Number(m[1]) : undefined;
}

test("encap path (VXLAN-GPE): per-node paths, Local and Cluster, DSR, MTU, churn, node loss", {
  timeout: 240_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, {
    prefix: "en",
    lb: true,
    lbArgs: ["--forward=encap", "--encap=vxlan-gpe", ...DIRECT],
    agentArgs: ["--decap=vxlan-gpe"],
  });
  const web4 = await lab.vip("encap/web");
  const web6 = await lab.vip("encap/web", "IPv6");
  const any4 = await lab.vip("encap/any");
  const any6 = await lab.vip("encap/any", "IPv6");
  const CLIENT_A = lab.host("client-a");
  // the lab is up once the processes run; the LB's first probes of the routed nodes take a
  // few seconds more (startup, not the subject here): wait until web answers every time
  const warm = Date.now();
  for (;;) {
    const r = await lab.client("client-a", ["--target", `${web4}:80`, "--count", "60", "--timeout", "1000"]);
    if (r.failed === 0 && Object.keys(r.byNode).length === 3) break;
    assert.ok(
      Date.now() - warm < 20_000,
      `web does not answer from all three routed nodes: ${JSON.stringify(r)}`,
    );
    await sleep(500);
  }
  t.diagnostic(`web answered from every routed node ${Date.now() - warm} ms after the lab was up`);

  await t.test(
    "the LB host's node tables: VIP routes through plbvg0 for routed nodes, a default for c1",
    () => {
      for (const node of ROUTED_NODES) {
        const route = sh(lab, "lb", ["ip", "route", "get", web4, "mark", markOf(lab, node, 4)]);
        assert.match(
          route,
          new RegExp(`encap ip id 0 .*dst ${lab.host(node).ipv4.replaceAll(".", "\\.")} .*dev plbvg0`),
          route,
        );
        const table = sh(lab, "lb", ["ip", "route", "show", "table", String(Number(markOf(lab, node, 4)))]);
        assert.doesNotMatch(
          table,
          /^default/m,
          `${node}'s table holds only VIP routes (the outer packet keeps the mark)`,
        );
      }
      const c1 = sh(lab, "lb", ["ip", "route", "show", "table", String(Number(markOf(lab, "node-c1", 4)))]);
      assert.match(c1, /^default via 198\.51\.100\.31 dev plbnodes/m);
      // no L2 path: the routed nodes are not neighbours of the LB host
      const neigh = sh(lab, "lb", ["ip", "neigh", "show"]);
      for (const node of ROUTED_NODES)
        assert.doesNotMatch(neigh, new RegExp(`^${lab.host(node).ipv4} `, "m"));
    },
  );

  await t.test("the decap side: device, rp_filter 0 on it, loose `all` kept with an address", () => {
    for (const node of ROUTED_NODES) {
      assert.match(
        sh(lab, node, ["ip", "-d", "link", "show", "plbvg0"]),
        /vxlan external .*dstport 4790 .*gpe/,
      );
      assert.equal(sh(lab, node, ["cat", "/proc/sys/net/ipv4/conf/plbvg0/rp_filter"]).trim(), "0");
      assert.equal(sh(lab, node, ["cat", "/proc/sys/net/ipv4/conf/all/rp_filter"]).trim(), "2");
      assert.match(sh(lab, node, ["ip", "addr", "show", "plbvg0"]), /inet 127\.0\.0\.42\/32/);
    }
  });

  await t.test(
    "Local, both families: every node with pods gets its Maglev share; pods see the client",
    async () => {
      for (const [vip, client] of [
        [`${web4}:80`, CLIENT_A.ipv4],
        [`[${web6}]:80`, CLIENT_A.ipv6],
      ] as const) {
        const args = ["--target", vip, "--count", "1500", "--concurrency", "16"];
        const r = await lab.client("client-a", args);
        assert.equal(r.failed, 0, `${vip}: ${JSON.stringify(r.errors)}`);
        assert.deepEqual(r.clients, { [client]: 1500 }, `${vip}: Local keeps the client address`);
        const problem = await spreadProblem(
          ROUTED_NODES.map((n) => r.byNode[n] ?? 0),
          [1, 1, 1],
          async () => {
            const again = await lab.client("client-a", args);
            return ROUTED_NODES.map((n) => again.byNode[n] ?? 0);
          },
        );
        assert.equal(problem, undefined, `${vip}: nodes ${JSON.stringify(r.byNode)}: ${problem}`);
      }
    },
  );

  await t.test("Cluster, both families: routed nodes through the tunnel, node-c1 directly", async () => {
    for (const [vip, fam] of [
      [`${any4}:81`, "ipv4"],
      [`[${any6}]:81`, "ipv6"],
    ] as const) {
      const r = await lab.client("client-b", ["--target", vip, "--count", "800", "--concurrency", "16"]);
      assert.equal(r.failed, 0, `${vip}: ${JSON.stringify(r.errors)}`);
      // a pod sees the client when it sits on the receiving node, else that node's address
      for (const node of [...ROUTED_NODES, "node-c1"])
        assert.ok(
          (r.clients[lab.host(node)[fam]] ?? 0) > 0,
          `${vip}: ${node} forwarded none: ${JSON.stringify(r.clients)}`,
        );
      assert.ok((r.clients[lab.host("client-b")[fam]] ?? 0) > 0, JSON.stringify(r.clients));
    }
  });

  await t.test("replies bypass the LB host: it sees only client → node packets", async () => {
    // a table of the test's own in the LB host and the router: packets with a VIP as source
    // a table of the test's own in the LB host and the router: packets with a VIP as source
    // (`fromvip`), and those of them that came from the router's side (`fromrouter`)
    for (const host of ["lb", "encap-router"])
      spawnSync("ip", ["netns", "exec", ns(lab, host), "nft", "-f", "-"], {
        input: [
          "table inet plbencapwatch {",
          "  counter fromvip {}",
          "  counter fromrouter {}",
          "  chain pre {",
          "    type filter hook prerouting priority raw; policy accept;",
          `    ip saddr { ${web4}, ${any4} } counter name fromvip`,
          `    ip6 saddr { ${web6}, ${any6} } counter name fromvip`,
          `    iifname "plbrt" ip saddr { ${web4}, ${any4} } counter name fromrouter`,
          `    iifname "plbrt" ip6 saddr { ${web6}, ${any6} } counter name fromrouter`,
          "  }",
          "}",
          "",
        ].join("\n"),
      });
    const nodeCounters = () => {
      const j = JSON.parse(sh(lab, "lb", ["nft", "-j", "list", "counters", "table", "inet", "passlb"])) as {
        nftables: { counter?: { name: string; packets: number } }[];
      };
      return j.nftables
        .flatMap((o) => (o.counter?.name.startsWith("node_") ? [o.counter.packets] : []))
        .reduce((a, b) => a + b, 0);
    };
    const count = (host: string, name: string) =>
      Number(
        /packets (\d+)/.exec(sh(lab, host, ["nft", "list", "counter", "inet", "plbencapwatch", name]))?.[1],
      );
    // the previous subtests' last packets (FINs of node-c1's connections, through this host)
    // settle first
    await sleep(1000);
    for (const host of ["lb", "encap-router"])
      sh(lab, host, ["nft", "reset", "counters", "table", "inet", "plbencapwatch"]);
    let before = nodeCounters();
    // Local: only routed nodes serve web; none of their replies may reach the LB host
    for (const target of [`${web4}:80`, `[${web6}]:80`]) {
      const r = await lab.client("client-a", ["--target", target, "--count", "200", "--concurrency", "8"]);
      assert.equal(r.failed, 0, JSON.stringify(r.errors));
    }
    let forwarded = nodeCounters() - before;
    assert.ok(
      forwarded >= 400 * 3,
      `the LB host counted ${forwarded} client → node packets (≥ 3 per connection)`,
    );
    assert.equal(count("lb", "fromvip"), 0, "no packet with a VIP as source passed the LB host");
    assert.ok(
      count("encap-router", "fromvip") >= 400 * 2,
      `the router carried the replies: ${count("encap-router", "fromvip")}`,
    );
    // Cluster: node-c1 shares the LB host's segment and, in this lab, routes through it (its
    // replies pass the LB host as a plain router); the routed nodes' replies still do not
    before = nodeCounters();
    const r = await lab.client("client-a", [
      "--target",
      `${any4}:81`,
      "--count",
      "200",
      "--concurrency",
      "8",
    ]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    forwarded = nodeCounters() - before;
    assert.ok(forwarded >= 200 * 3, `${forwarded}`);
    assert.equal(count("lb", "fromrouter"), 0, "no reply of a routed node came back through the LB host");
    for (const host of ["lb", "encap-router"])
      sh(lab, host, ["nft", "delete", "table", "inet", "plbencapwatch"]);
  });

  await t.test(
    "20 MB each way, both families: no IP fragments anywhere; SYN-ACKs carry the clamped MSS",
    async () => {
      const keys = ["IpFragCreates", "Ip6FragCreates", "IpReasmReqds", "Ip6ReasmReqds"];
      for (const [target, mss, v6] of [
        [`${web4}:80`, 1424, false],
        [`[${web6}]:80`, 1384, true],
      ] as const) {
        const seen = await synAckMss(
          lab,
          "client-a",
          () => lab.client("client-a", ["--target", target, "--count", "1"]),
          v6,
        );
        assert.equal(seen, mss, `${target}: the client saw MSS ${seen}`);
        const before = snapshotAll(lab, keys);
        const r = (await lab.client("client-a", [
          "--mode",
          "bulk",
          "--target",
          target,
          "--bytes",
          String(20 * 1024 * 1024),
        ])) as unknown as {
          ok: boolean;
          received: number;
          error?: string;
        };
        assert.equal(r.ok, true, `${target}: ${r.error}`);
        assert.equal(r.received, 20 * 1024 * 1024);
        assert.deepEqual(
          deltas(before, snapshotAll(lab, keys)),
          {},
          `${target}: fragments were created or reassembled`,
        );
      }
    },
  );

  await t.test(
    "UDP: 1,400-byte (IPv4) and 1,380-byte (IPv6) payloads echo whole, with no fragments",
    async () => {
      const keys = ["IpFragCreates", "Ip6FragCreates"];
      for (const [target, size] of [
        [`${any4}:53`, 1400],
        [`[${any6}]:53`, 1380],
      ] as const) {
        const before = snapshotAll(lab, keys);
        const r = (await lab.client("client-a", [
          "--mode",
          "udp-size",
          "--target",
          target,
          "--size",
          String(size),
          "--count",
          "30",
        ])) as unknown as {
          received: number;
          sizes: Record<string, number>;
        };
        assert.equal(r.received, 30, `${target}: ${JSON.stringify(r)}`);
        assert.deepEqual(r.sizes, { [String(size)]: 30 });
        assert.deepEqual(deltas(before, snapshotAll(lab, keys)), {}, target);
      }
    },
  );

  await t.test(
    "UDP too big for the tunnel (1,472 B IPv4, 1,400 B IPv6): the LB host answers ICMP, the client fragments",
    async () => {
      // 1,472 B + 28 = a 1,500-byte packet > the node route's MTU 1,464 (1,500 − 36 for
      // VXLAN-GPE); IPv6 1,400 B + 48 = 1,448 > 1,444 (1,500 − 56). The DF packet is dropped
      // with "fragmentation needed" / "packet too big"; the client's kernel learns the path
      // MTU and fragments the following datagrams; the fragments pass the tunnel.
      const keys = ["IpFragCreates", "Ip6FragCreates", "IcmpInDestUnreachs", "Icmp6InPktTooBigs"];
      for (const [target, size, frag, icmp] of [
        // `web`: only routed nodes serve it, so the datagram always takes the tunnel (on
        // `any` a flow hashed to node-c1, routed directly, fits and draws no ICMP)
        [`${web4}:53`, 1472, "IpFragCreates", "IcmpInDestUnreachs"],
        [`[${web6}]:53`, 1400, "Ip6FragCreates", "Icmp6InPktTooBigs"],
      ] as const) {
        const before = snapshotAll(lab, keys);
        const r = (await lab.client("client-b", [
          "--mode",
          "udp-size",
          "--target",
          target,
          "--size",
          String(size),
          "--count",
          "20",
          "--timeout",
          "1000",
        ])) as unknown as {
          received: number;
          sizes: Record<string, number>;
        };
        const d = deltas(before, snapshotAll(lab, keys));
        assert.ok(r.received >= 19, `${target}: ${JSON.stringify(r)}`);
        assert.deepEqual(Object.keys(r.sizes), [String(size)]);
        assert.ok(
          (d["client-b"]?.[icmp] ?? 0) >= 1,
          `${target}: the client got no ICMP: ${JSON.stringify(d)}`,
        );
        assert.ok((d["client-b"]?.[frag] ?? 0) >= 2 * (r.received - 1), `${target}: ${JSON.stringify(d)}`);
      }
    },
  );

  await t.test("long-lived connections survive a node joining and leaving and an LB restart", async () => {
    const held = lab.client("client-a", [
      "--mode",
      "hold",
      "--target",
      `${web4}:80`,
      "--connections",
      "16",
      "--duration",
      "9000",
      "--interval",
      "100",
    ]);
    await sleep(1000);
    // node-c1 (routed directly) joins web (a ready pod), then leaves again
    const c1 = (ready: boolean) =>
      lab.update((topo) => {
        topo.zones[2]!.nodes[0]!.pods.find((p) => p.name === "c1-2")!.ready = ready;
        return topo;
      });
    await c1(true);
    await sleep(1000);
    await c1(false);
    await lab.restart("lb", "lb");
    const r = (await held) as unknown as { connections: { ok: boolean; pings: number }[] };
    assert.equal(r.connections.length, 16);
    assert.deepEqual(
      r.connections.filter((c) => !c.ok),
      [],
      "no connection was reset or stalled",
    );
    assert.ok(
      r.connections.every((c) => c.pings >= 50),
      JSON.stringify(r.connections.map((c) => c.pings)),
    );
  });

  await t.test("a deleted decap device comes back within two sync periods", async () => {
    sh(lab, "node-b1", ["ip", "link", "del", "plbvg0"]);
    const deadline = Date.now() + 11_000;
    // back means usable: the agent adds the device, raises it, then sets its rp_filter and
    // loose-mode address (decap-device.ts); a connection sent in between is dropped by the
    // reverse-path filter and, on a loaded machine, times out
    const ready = () =>
      /inet 127\.0\.0\.42\/32/.test(
        spawnSync("ip", ["-n", ns(lab, "node-b1"), "addr", "show", "dev", "plbvg0"], { encoding: "utf8" })
          .stdout ?? "",
      );
    while (!ready()) {
      assert.ok(Date.now() < deadline, "plbvg0 did not come back within 2 × --sync-period");
      await sleep(250);
    }
    const r = await lab.client("client-a", [
      "--target",
      `${web4}:80`,
      "--count",
      "300",
      "--concurrency",
      "8",
    ]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    assert.ok((r.byNode["node-b1"] ?? 0) > 0, JSON.stringify(r.byNode));
  });

  await t.test("a routed node whose link or agent goes stops getting new connections in time", async (st) => {
    const plan = planSnapshot(await lab.snapshot()).plans.find((p) => p.service === "encap/web")!;
    const check = plan.healthChecks[0]!;
    const boundMs = (check.intervalSeconds * check.unhealthyThreshold + check.timeoutSeconds + 1) * 1000;
    await assertNodeLossBound(st, lab, {
      what: "link goes down",
      client: "client-a",
      target: `${web4}:80`,
      node: "node-a2",
      boundMs,
      fail: async () => lab.link("node-a2", false),
    });
    lab.link("node-a2", true);
    await assertNodeLossBound(st, lab, {
      what: "agent dies",
      client: "client-a",
      target: `${web4}:80`,
      node: "node-a2",
      boundMs,
      fail: async () => void (await lab.restart("agent", "node-a2", true)),
    });
  });
});

/** the node's mark, read back from the LB host's `nexthops` map */
function markOf(lab: Lab, node: string, fam: 4 | 6): string {
  const j = JSON.parse(sh(lab, "lb", ["nft", "-j", "list", "map", "inet", "passlb", `nexthops${fam}`])) as {
    nftables: { map?: { elem?: [number, string][] } }[];
  };
  const address = fam === 4 ? lab.host(node).ipv4 : lab.host(node).ipv6;
  const elem = j.nftables.flatMap((o) => o.map?.elem ?? []).find(([, a]) => a === address);
  if (!elem) throw new Error(`no mark for ${node}`);
  return `0x${elem[0].toString(16)}`;
}

/** Why the kernel cannot run a kind's lab: the `ip` command that failed and its answer. */
function kindUnavailable(kind: "ipip" | "gre" | "gue"): string | undefined {
  const probe = `plbencprobe${process.pid}`;
  spawnSync("ip", ["netns", "add", probe]);
  try {
    const steps: string[][] =
      kind === "gre"
        ? [
            ["link", "add", "plbp0", "type", "gre", "external"],
            ["link", "add", "plbp1", "type", "ip6gre", "external"],
          ]
        : [
            ["link", "add", "plbp0", "type", "ipip", "external"],
            ["link", "add", "plbp1", "type", "ip6tnl", "mode", "ip6ip6", "external"],
            ...(kind === "gue" ? [["fou", "add", "port", "6080", "gue"]] : []),
          ];
    for (const s of steps) {
      const r = spawnSync("ip", ["-n", probe, ...s], { encoding: "utf8" });
      if (r.status !== 0)
        return `this kernel cannot run ${kind}: \`ip ${s.join(" ")}\` failed (${r.stderr.trim().split("\n")[0]}); its commands are golden-tested in src/lb-host/routing/encap.test.ts`;
    }
    return undefined;
  } finally {
    spawnSync("ip", ["netns", "del", probe]);
  }
}

for (const kind of ["ipip", "gre", "gue"] as const) {
  test(`encap path (${kind}): Local, both families, through the tunnel`, { timeout: 120_000 }, async (t) => {
    if (why) return t.skip(why);
    const cannot = kindUnavailable(kind);
    if (cannot) return t.skip(cannot);
    const lab = await startLab(t, TOPOLOGY, {
      prefix: `e${kind.slice(0, 2)}`,
      lb: true,
      lbArgs: ["--forward=encap", `--encap=${kind}`, ...DIRECT],
      agentArgs: [`--decap=${kind}`],
    });
    for (const [vip, client] of [
      [`${await lab.vip("encap/web")}:80`, lab.host("client-a").ipv4],
      [`[${await lab.vip("encap/web", "IPv6")}]:80`, lab.host("client-a").ipv6],
    ] as const) {
      const r = await lab.client("client-a", ["--target", vip, "--count", "600", "--concurrency", "16"]);
      assert.equal(r.failed, 0, `${vip}: ${JSON.stringify(r.errors)}`);
      assert.deepEqual(Object.keys(r.byNode).sort(), ROUTED_NODES);
      assert.deepEqual(r.clients, { [client]: 600 });
    }
  });
}
