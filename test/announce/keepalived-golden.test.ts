/**
 * keepalived.conf golden (docs/vip-announce.md "The keepalived engine"): three LB hosts,
 * both families, one VIP not ready here; the track files' contents beside it. When root,
 * the rendered text goes through `keepalived --config-test` in a throwaway namespace with an
 * eth0 (keepalived checks the interface), so the golden cannot drift from what keepalived
 * accepts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { renderKeepalived } from "../../src/announce/keepalived-config.ts";
import { assertGolden } from "../golden.ts";
import { createNetns, deleteNetns } from "../netns.ts";
import { keepalivedInput as input } from "../support/keepalived-input.ts";

const GOLDEN = "test/fixtures/announce";
const keepalivedTest = () =>
  process.getuid?.() !== 0
    ? "keepalived -t needs root (a namespace with the interface it checks): not root"
    : spawnSync("keepalived", ["--version"]).error
      ? "keepalived is not installed"
      : undefined;

test("golden keepalived.conf for three hosts, both families (and keepalived -t accepts it)", (t) => {
  // with the master's periodic gratuitous ARP / NA (`--garp-refresh-s 60`, the default)
  const r = renderKeepalived({ ...input(), garpRefresh: { seconds: 60, repeat: 1 } });
  assertGolden(`${GOLDEN}/keepalived-lb-1.conf`, r.config);
  assertGolden(`${GOLDEN}/keepalived-lb-1.tracks.json`, Object.fromEntries(r.trackFiles));
  assert.deepEqual(r.issues, []);
  const why = keepalivedTest();
  if (why) return t.diagnostic(`keepalived -t skipped: ${why}`);
  // keepalived -t checks the interface: a throwaway namespace with a dummy eth0
  const ns = createNetns("vrrpconf");
  const dir = mkdtempSync(join(tmpdir(), "plbvrrp-conf-"));
  try {
    spawnSync("ip", ["-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1"]);
    const conf = join(dir, "k.conf");
    writeFileSync(conf, r.config);
    const check = spawnSync("ip", ["netns", "exec", ns, "keepalived", "-t", "-f", conf], {
      encoding: "utf8",
    });
    assert.equal(check.status, 0, `keepalived -t: ${check.stdout}${check.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    deleteNetns(ns);
  }
});
