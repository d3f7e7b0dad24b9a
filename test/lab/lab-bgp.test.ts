/**
 * The BGP lab's pure parts (src/lab/lab-bgp.ts): the build steps of the fixture topology
 * (golden: no on-link VIP routes on the clients, txrehash off, no redirects), the router's
 * FRR files (golden, and read by FRR's own `-C` dry run when FRR is installed: FRR exits 0
 * even on an unknown line, so the test reads its log for "No such command"), the LB hosts'
 * flags (accepted by the CLI's own validation), and the topology's check.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { bgpAnnounceConfig } from "../../src/cli/lb-announce-bgp.ts";
import { frrRouterFiles, labBgpLbArgs } from "../../src/lab/lab-bgp.ts";
import { labLayout } from "../../src/lab/lab-layout.ts";
import { parseTopology } from "../../src/lab/topology.ts";
import { assertGolden } from "../golden.ts";

const FIX = "test/fixtures/lab/bgp";
const read = parseTopology(readFileSync(join(FIX, "topology.yaml"), "utf8"));
if (!read.ok) throw new Error(read.problems.join("; "));
const layout = labLayout(read.topology);

test("the BGP lab's build steps: golden; clients route VIPs through the router", () => {
  assertGolden(join(FIX, "commands.golden.txt"), `${layout.commands.map((c) => c.join(" ")).join("\n")}\n`);
  const text = layout.commands.map((c) => c.join(" "));
  assert.ok(!text.some((c) => c.includes("203.0.113.0/26")), "no on-link VIP route on any client");
  assert.ok(text.some((c) => c.includes("plb-bgp-client-a") && c.includes("/proc/sys/net/core/txrehash")));
  assert.ok(text.some((c) => c.includes("plb-bgp-lb ") && c.includes("fib_multipath_hash_policy")));
  assert.equal(layout.lbHosts.length, 3);
});

test("the router's FRR files: golden, and FRR's dry run reads every line", (t) => {
  const files = frrRouterFiles(layout.lbHosts, layout.bgp!);
  for (const [name, text] of Object.entries(files)) assertGolden(join(FIX, `frr-${name}`), text);
  if (!existsSync("/usr/lib/frr/bgpd")) return t.diagnostic("FRR is not installed: golden files only");
  const dir = mkdtempSync(join(tmpdir(), "plb-frr-"));
  chmodSync(dir, 0o755); // the daemons drop to the frr user
  try {
    for (const daemon of ["bgpd", "bfdd"] as const) {
      const path = join(dir, `${daemon}.conf`);
      writeFileSync(path, files[`${daemon}.conf`], { mode: 0o644 });
      const r = spawnSync(`/usr/lib/frr/${daemon}`, ["-C", "-f", path, "-u", "frr", "-g", "frr"], {
        encoding: "utf8",
      });
      assert.equal(r.status, 0, `${daemon} -C: ${r.stderr}`);
      assert.doesNotMatch(`${r.stdout}${r.stderr}`, /No such command|Unknown command|error/i, daemon);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("each LB host's flags pass passlb lb's validation", () => {
  for (const h of layout.lbHosts) {
    const args = labBgpLbArgs(h, layout.bgp!, "/run/x");
    const get = (flag: string) => args.filter((a) => a.startsWith(`--${flag}=`)).map((a) => a.split("=")[1]!);
    const config = bgpAnnounceConfig({
      announce: get("announce")[0]!,
      bgpAsn: get("bgp-asn")[0]!,
      bgpPeer: get("bgp-peer"),
      bgpRouterId: get("bgp-router-id")[0]!,
      bfdIntervalMs: get("bfd-interval-ms")[0]!,
      bfdMultiplier: get("bfd-multiplier")[0]!,
      bgpHoldS: get("bgp-hold-s")[0]!,
      bgpConvergeMs: get("bgp-converge-ms")[0]!,
      stateDir: get("state-dir")[0]!,
    });
    assert.ok(config && typeof config !== "string", String(config));
    assert.deepEqual(
      config.settings?.peers.map((p) => `${p.address} ${p.asn}`),
      ["198.51.100.1 64500", "fd00:198:51:100::1 64500"],
    );
    assert.equal(config.settings?.routerId, h.nodeIpv4);
  }
});

test("bgp needs several LB hosts", () => {
  const r = parseTopology("name: x\nservices: [s.yaml]\nbgp: {}\nzones:\n  - name: z\n");
  assert.deepEqual(r, {
    ok: false,
    problems: ["bgp: needs lbHosts 2 or more (the LB hosts that peer with the router)"],
  });
  const typo = parseTopology(
    "name: x\nservices: [s.yaml]\nlbHosts: 2\nbgp: { routerAsm: 1 }\nzones:\n  - name: z\n",
  );
  assert.equal(typo.ok, false);
  if (!typo.ok) assert.match(typo.problems.join(";"), /^bgp: .*routerAsm/);
});
