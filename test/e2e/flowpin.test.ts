/**
 * TCP flow pinning on the LB host under direct server return (docs/dataplane-nftables.md
 * "Pinning flows when replies bypass the LB host"): two LB hosts on the clients' segment,
 * so a node's replies go to the client through the router and never through the LB host.
 * The LB's conntrack sees only the client's packets, and would judge the ACK after the SYN
 * invalid (no mark: re-hashed on every packet) if the LB host did not leave the SYN
 * untracked. Long-lived connections exchange data while the Service's Maglev table changes
 * — a node joins the Service, then another node leaves it — and every connection whose node
 * stays healthy must survive. Root, nft, ip, arping and conntrack needed; skipped with the
 * reason otherwise. The lab (`flowpin<digit>`) is removed when the test ends, pass or fail;
 * every traffic loop is bounded (30 connections, 10 s).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { labUnavailable, sleep, startLab } from "./lab-harness.ts";

const TOPOLOGY = "test/fixtures/lab/flowpin/topology.yaml";
const why =
  labUnavailable() ??
  (spawnSync("arping", ["-V"]).error ? "arping (iputils-arping) is not installed" : undefined) ??
  (spawnSync("conntrack", ["--version"]).error
    ? "conntrack (Debian package conntrack) is not installed"
    : undefined);

interface Held {
  connections: { ok: boolean; error?: string; node?: string; pod?: string; pings: number }[];
}

/**
 * Established TCP entries to `vip`:80 that carry a node mark, on every LB host, summed: the
 * pins. They exist only because the LB host leaves a VIP's SYN untracked, so the client's
 * first ACK starts the entry (without that, the ACK after an unseen SYN-ACK is invalid for
 * conntrack and no entry ever holds a mark).
 */
function pinnedFlows(ns: readonly string[], vip: string): number {
  let n = 0;
  for (const name of ns) {
    const r = spawnSync(
      "ip",
      ["netns", "exec", name, "conntrack", "-L", "-p", "tcp", "--orig-dst", vip, "--dport", "80"],
      { encoding: "utf8" },
    );
    if (r.status !== 0) continue;
    n += r.stdout.split("\n").filter((l) => /\bESTABLISHED\b/.test(l) && /\bmark=[1-9]/.test(l)).length;
  }
  return n;
}

test("flow pinning under DSR: TCP connections stay on their healthy node while the Maglev table changes", {
  timeout: 150_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "flowpin", lb: true });
  const vip = await lab.vip("flowpin/web");
  const lbNs = lab.state.layout.lbHosts.map((h) => h.ns);
  // the VIP answers (its holder has won the election and programmed the table)
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await lab.client("client-a", ["--target", `${vip}:80`, "--count", "20", "--timeout", "1000"]);
    if (r.failed === 0 && Object.keys(r.byNode).length === 2) break;
    assert.ok(Date.now() < deadline, `the VIP does not serve over node-a1 and node-a2: ${JSON.stringify(r)}`);
    await sleep(500);
  }
  const held = lab.client("client-a", [
    "--mode",
    "hold",
    "--target",
    `${vip}:80`,
    "--connections",
    "30",
    "--duration",
    "10000",
    "--interval",
    "100",
  ]) as unknown as Promise<Held>;
  await sleep(1500);
  const pinned = pinnedFlows(lbNs, vip);
  // node-a3 joins the Service (its pod turns ready): about a third of the slots move to it
  await lab.update((topo) => {
    topo.zones[0]!.nodes[2]!.pods[0]!.ready = true;
    return topo;
  });
  await sleep(1500);
  // node-a2 leaves it (its only pod turns unready): its slots move to node-a1 and node-a3
  await lab.update((topo) => {
    topo.zones[0]!.nodes[1]!.pods[0]!.ready = false;
    return topo;
  });
  const r = await held;
  assert.equal(r.connections.length, 30);
  const byNode = (n: string) => r.connections.filter((c) => c.node === n);
  t.diagnostic(
    `connections: node-a1 ${byNode("node-a1").length}, node-a2 ${byNode("node-a2").length}; ` +
      `failed: ${JSON.stringify(r.connections.filter((c) => !c.ok).map((c) => [c.node, c.error]))}`,
  );
  assert.ok(
    byNode("node-a1").length >= 5,
    `too few connections on node-a1 to judge: ${byNode("node-a1").length}`,
  );
  assert.equal(byNode("node-a3").length, 0, "node-a3 had no ready pod when the connections opened");
  // node-a1 stays healthy throughout: each of its connections survives both changes
  const broken = byNode("node-a1").filter((c) => !c.ok || c.pings < 50);
  assert.deepEqual(broken, [], "a connection on node-a1 (healthy throughout) broke or stalled");
  // node-a2 was healthy through the first change (until ≈ 4.5 s; 100 ms per ping): its
  // connections outlived it; what happens after node-a2 left the Service is not asserted
  for (const c of byNode("node-a2"))
    assert.ok(c.ok || c.pings >= 35, `node-a2 connection cut during the first change: ${JSON.stringify(c)}`);
  // the holder's conntrack pinned every connection to its node (only the holder sees them)
  assert.ok(pinned >= 30, `the holder's conntrack pins the 30 connections: ${pinned} marked entries`);
});
