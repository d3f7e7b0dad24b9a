/**
 * New connections on reused source ports (issue 25; docs/dataplane-nftables.md "Flow
 * pinning"): a client binds fixed local ports (SO_REUSEADDR, `tcp_tw_reuse=1`, as a busy
 * client or a NAT gateway does) and opens the same 60 5-tuples three times — with every
 * node in the Service, with node-a2 gone from it, with node-a2 back. The LB host may still
 * hold state of the previous connection on each tuple (conntrack in TIME_WAIT, CLOSE or the
 * one-way "unacknowledged" state); a SYN must take the current table's choice and the rest
 * of its connection must follow it. Every connection must be answered, none by a node that
 * had left. For three paths, IPv4 and IPv6 each:
 *   - replies through the LB host (the LB namespace routes for clients and nodes);
 *   - direct server return on one segment (two LB hosts beside the client);
 *   - VXLAN-GPE to routed nodes (`--forward encap`; replies bypass the LB host).
 * Root, nft and ip needed (skipped with the reason otherwise). Each lab has a name of its
 * own and is removed when its case ends, pass or fail; every loop is bounded (60
 * connections per round and family, 2 s each).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type Lab, labUnavailable, sleep, startLab } from "./lab-harness.ts";

const why = labUnavailable();
const PORTS = 60;
/** above Linux's default ephemeral range (32768–60999): the lab's own probes never hold one */
const BASE_PORT = 62000;
const FAMILIES = ["IPv4", "IPv6"] as const;

interface Reused {
  connections: { port: number; ok: boolean; node?: string; error?: string }[];
}

interface Case {
  readonly name: string;
  readonly fixture: string;
  readonly prefix: string;
  readonly client: string;
  readonly service: string;
  /** the nodes with a ready pod, and the one whose pod leaves and comes back */
  readonly nodes: readonly string[];
  readonly leaving: string;
  readonly pod: (lab: Lab, ready: boolean) => Promise<void>;
  readonly lbArgs?: readonly string[];
  readonly agentArgs?: readonly string[];
}

const podOf = (zone: number, node: number) => async (lab: Lab, ready: boolean) =>
  lab.update((topo) => {
    topo.zones[zone]!.nodes[node]!.pods[0]!.ready = ready;
    return topo;
  });

const CASES: readonly Case[] = [
  {
    name: "replies through the LB host",
    fixture: "test/fixtures/lab/reuse/lb-path.yaml",
    prefix: "rplb",
    client: "client-a",
    service: "reuse/web",
    nodes: ["node-a1", "node-a2"],
    leaving: "node-a2",
    pod: podOf(0, 1),
  },
  {
    name: "direct server return on one segment",
    fixture: "test/fixtures/lab/reuse/dsr.yaml",
    prefix: "rpdsr",
    client: "client-a",
    service: "reuse/web",
    nodes: ["node-a1", "node-a2"],
    leaving: "node-a2",
    pod: podOf(0, 1),
  },
  {
    name: "VXLAN-GPE to routed nodes",
    fixture: "test/fixtures/lab/encap/topology.yaml",
    prefix: "rpenc",
    client: "client-a",
    service: "encap/web",
    nodes: ["node-a1", "node-a2", "node-b1"],
    leaving: "node-a2",
    // node-a2's only pod, a2-1
    pod: podOf(0, 1),
    lbArgs: [
      "--forward=encap",
      "--encap=vxlan-gpe",
      "--direct=198.51.100.0/26",
      "--direct=fd00:198:51:100::/64",
    ],
    agentArgs: ["--decap=vxlan-gpe"],
  },
];

const target = (vip: string) => (vip.includes(":") ? `[${vip}]:80` : `${vip}:80`);

/** Waits until new connections (ephemeral ports) reach exactly `nodes`. */
async function waitForNodes(lab: Lab, c: Case, vip: string, nodes: readonly string[]): Promise<void> {
  const want = [...nodes].sort().join(",");
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await lab.client(c.client, ["--target", target(vip), "--count", "40", "--timeout", "1000"]);
    const got = Object.keys(r.byNode).sort().join(",");
    if (r.failed === 0 && got === want) return;
    assert.ok(
      Date.now() < deadline,
      `${vip}: new connections reach ${got}, not ${want}: ${JSON.stringify(r)}`,
    );
    await sleep(500);
  }
}

async function round(lab: Lab, c: Case, vip: string, family: number): Promise<Reused> {
  return (await lab.client(c.client, [
    "--mode",
    "reuse",
    "--target",
    target(vip),
    "--count",
    String(PORTS),
    "--source-port",
    String(BASE_PORT + family * 100),
    "--concurrency",
    "8",
    "--timeout",
    "2000",
  ])) as unknown as Reused;
}

function summary(r: Reused): string {
  const by: Record<string, number> = {};
  for (const x of r.connections)
    by[x.ok ? x.node! : `failed:${x.error}`] = (by[x.ok ? x.node! : `failed:${x.error}`] ?? 0) + 1;
  return JSON.stringify(by);
}

for (const c of CASES)
  test(`port reuse, ${c.name}: every connection of three rounds on the same 60 source ports answered by a current node`, {
    timeout: 240_000,
  }, async (t) => {
    if (why) return t.skip(why);
    const lab = await startLab(t, c.fixture, {
      prefix: c.prefix,
      lb: true,
      ...(c.lbArgs && { lbArgs: c.lbArgs }),
      ...(c.agentArgs && { agentArgs: c.agentArgs }),
    });
    // a busy client's habit: a new connection may take a 5-tuple its own TIME_WAIT holds
    lab.exec(c.client, ["sysctl", "-q", "-w", "net.ipv4.tcp_tw_reuse=1"]);
    const vips = await Promise.all(FAMILIES.map((f) => lab.vip(c.service, f)));
    const rest = c.nodes.filter((n) => n !== c.leaving);
    const rounds: { label: string; nodes: readonly string[]; before: () => Promise<void> }[] = [
      { label: "all nodes", nodes: c.nodes, before: async () => {} },
      { label: `${c.leaving} left`, nodes: rest, before: () => c.pod(lab, false) },
      { label: `${c.leaving} back`, nodes: c.nodes, before: () => c.pod(lab, true) },
    ];
    const problems: string[] = [];
    for (const r of rounds) {
      await r.before();
      for (const vip of vips) await waitForNodes(lab, c, vip, r.nodes);
      // a second and more after the previous round, so the client's TIME_WAIT may be reused
      await sleep(1100);
      for (const [i, vip] of vips.entries()) {
        const got = await round(lab, c, vip, i);
        t.diagnostic(`${FAMILIES[i]} ${r.label}: ${summary(got)}`);
        assert.equal(got.connections.length, PORTS);
        for (const x of got.connections) {
          if (!x.ok) problems.push(`${FAMILIES[i]} ${r.label}: port ${x.port} failed (${x.error})`);
          else if (!r.nodes.includes(x.node!))
            problems.push(
              `${FAMILIES[i]} ${r.label}: port ${x.port} answered by ${x.node}, not in the table`,
            );
        }
      }
    }
    assert.deepEqual(problems, [], `${problems.length} of ${PORTS * 6} connections went wrong`);
  });
