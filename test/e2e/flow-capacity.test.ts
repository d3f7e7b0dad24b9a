/**
 * The TCP flow table's capacity (issue 25's maps; issue 29's PasslbFlowTableNearFull;
 * docs/dataplane-nftables.md "Flow pinning"), in the lab as root with the real kernel: the
 * LB host's flow maps are sized 64 (`--flow-table-size=64`) and held connections, each
 * sending a line every 100 ms, go through it on both families:
 *   - 40 per family (below the size): each map holds one entry per live connection;
 *   - 60 more per family, 100 in all (above it): each map is full (at least 90 % of its
 *     size), and every connection still works (past the size, by conntrack mark).
 * Each time `passlb lb`'s /metrics (`passlb_flow_table_entries` /
 * `passlb_flow_table_capacity`, read every second here) agrees with the kernel's listing,
 * and the ratio PasslbFlowTableNearFull reads (deploy/components/monitoring/passlb-rules.yaml:
 * entries / capacity > 0.9) is below 0.9, then above it.
 *
 * The defect it catches: writing every packet as `delete` + `add` leaves one dead element
 * per packet that counts against the size until the set's GC frees it
 * (net/netfilter/nft_set_hash.c `nft_rhash_delete`), so the map was full of garbage while
 * holding only some of the live flows. Root only; otherwise skipped with the reason. The lab
 * (`fcap<pid>`) is removed when the test ends, pass or fail; every loop is bounded.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { type Lab, labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { type HeldRun, holdLoad, waitServing } from "./under-load.ts";

const why = labUnavailable();
const SIZE = 64;
const BELOW = 40;
const MORE = 60;
/** entries a map may hold beyond its live connections: none is expected (the maps are
 * flushed first); 2 allow for a probe the lab itself makes */
const MARGIN = 2;

const MAPS = [
  { family: "IPv4", map: "flows4" },
  { family: "IPv6", map: "flows6" },
] as const;

function kernelEntries(lab: Lab, map: string): number {
  return (lab.exec("lb", ["nft", "list", "map", "inet", "passlb-flows", map]).match(/ expires /g) ?? [])
    .length;
}

/** passlb lb's /metrics, from inside the LB namespace */
function metricsText(lab: Lab): string {
  const js = `fetch("http://127.0.0.1:9797/metrics").then((r) => r.text()).then((t) => process.stdout.write(t))`;
  return spawnSync("ip", ["netns", "exec", lab.host("lb").ns, process.execPath, "-e", js], {
    encoding: "utf8",
    timeout: 10_000,
  }).stdout;
}

function sample(text: string, name: string, family: string): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) || !line.includes(`family="${family}"`)) continue;
    if (!line.includes('dataplane="nftables"')) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

interface Reading {
  readonly family: string;
  readonly kernel: number;
  readonly entries: number | undefined;
  readonly capacity: number | undefined;
}

/** The kernel's count and the metrics per family, once the metrics have caught up with the
 * kernel (±MARGIN) or after `limitMs`. */
async function readings(lab: Lab, limitMs: number): Promise<Reading[]> {
  const start = Date.now();
  for (;;) {
    const text = metricsText(lab);
    const out = MAPS.map(({ family, map }) => ({
      family,
      kernel: kernelEntries(lab, map),
      entries: sample(text, "passlb_flow_table_entries", family),
      capacity: sample(text, "passlb_flow_table_capacity", family),
    }));
    const agree = out.every((r) => r.entries !== undefined && Math.abs(r.entries - r.kernel) <= MARGIN);
    if (agree || Date.now() - start > limitMs) return out;
    await sleep(250);
  }
}

/** the value of PasslbFlowTableNearFull's expression for one series */
const ratio = (r: Reading) => (r.entries ?? Number.NaN) / (r.capacity ?? Number.NaN);

function hold(lab: Lab, vips: readonly string[], ms: number, n: number): Promise<HeldRun>[] {
  return vips.map((target) => holdLoad(lab, { client: "client-a", target }, ms, n));
}

test("flow table capacity: one entry per live connection below the size, full above it, and the metrics say so", {
  timeout: 240_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, "test/fixtures/lab/reuse/lb-path.yaml", {
    prefix: "fcap",
    lb: true,
    lbArgs: [`--flow-table-size=${SIZE}`, "--counters-ms=1000"],
  });
  const vips = [`${await lab.vip("reuse/web")}:80`, `[${await lab.vip("reuse/web", "IPv6")}]:80`];
  await waitServing(
    lab,
    vips.map((target) => ({ client: "client-a", target })),
  );
  // the probes' entries would idle out only after 300 s
  for (const { map } of MAPS) lab.exec("lb", ["nft", "flush", "map", "inet", "passlb-flows", map]);

  const first = hold(lab, vips, 30_000, BELOW);
  await sleep(6000);
  const below = await readings(lab, 8000);
  t.diagnostic(`${BELOW} live connections per family, size ${SIZE}: ${JSON.stringify(below)}`);
  for (const r of below) {
    assert.ok(
      r.kernel >= BELOW && r.kernel <= BELOW + MARGIN,
      `${r.family}: ${r.kernel} entries for ${BELOW} flows`,
    );
    assert.ok(
      r.entries !== undefined && Math.abs(r.entries - r.kernel) <= MARGIN,
      `${r.family}: metric agrees`,
    );
    assert.equal(r.capacity, SIZE, `${r.family}: the capacity metric is the map's size`);
    assert.ok(ratio(r) <= 0.9, `${r.family}: PasslbFlowTableNearFull's ratio ${ratio(r)} stays below 0.9`);
  }

  const second = hold(lab, vips, 16_000, MORE);
  await sleep(6000);
  const above = await readings(lab, 8000);
  t.diagnostic(`${BELOW + MORE} live connections per family, size ${SIZE}: ${JSON.stringify(above)}`);
  for (const r of above) {
    assert.ok(r.kernel >= 0.9 * SIZE && r.kernel <= SIZE, `${r.family}: ${r.kernel} entries, size ${SIZE}`);
    assert.ok(
      r.entries !== undefined && Math.abs(r.entries - r.kernel) <= MARGIN,
      `${r.family}: metric agrees`,
    );
    assert.ok(ratio(r) > 0.9, `${r.family}: PasslbFlowTableNearFull's ratio ${ratio(r)} is above 0.9`);
  }

  const runs = await Promise.all([...first, ...second]);
  const broken = runs.flatMap((r) => r.connections.filter((c) => !c.ok));
  t.diagnostic(`connections: ${runs.reduce((n, r) => n + r.connections.length, 0)}, broken ${broken.length}`);
  assert.equal(
    runs.reduce((n, r) => n + r.connections.length, 0),
    2 * (BELOW + MORE),
  );
  assert.deepEqual(broken, [], "every connection works, also those past the map's size (conntrack mark)");
});
