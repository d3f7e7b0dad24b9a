/**
 * Conntrack sizing (issue 16 §2): the pure check, the /proc adapter (on a folder standing
 * in for /proc/sys/net/netfilter, and as root on the real one, including the kernel's
 * refusal to write nf_conntrack_max from a non-initial namespace), and `passlb lb` wired
 * with a fake applier and fake sysctls: the warning at start, `--conntrack-max` written,
 * a refused write ending the command with exit 1.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { type NftLbFlags, runNftablesLb } from "../src/cli/lb-nftables.ts";
import { type ConntrackSysctl, createConntrackSysctl } from "../src/drivers/conntrack-sysctl.ts";
import { FakeNft } from "../src/drivers/fake-nft.ts";
import { PasslbError } from "../src/errors.ts";
import { conntrackSizing } from "../src/lb-host/conntrack-sizing.ts";
import { fakeLbHostDrivers } from "../src/lb-host/nftables-host/fake-drivers.ts";
import { kernelSkipReason, withNetns } from "./netns.ts";

test("sizing: the default relation passes; max below the bucket count is a warning naming both", () => {
  assert.deepEqual(conntrackSizing({ max: 262144, buckets: 262144 }), { findings: [] });
  assert.deepEqual(conntrackSizing({ max: 524288, buckets: 262144 }), { findings: [] });
  const low = conntrackSizing({ max: 1000, buckets: 262144 });
  assert.equal(low.write, undefined);
  assert.deepEqual(
    low.findings.map((f) => [f.code, f.severity]),
    [["conntrack_max_below_buckets", "warning"]],
  );
  assert.match(low.findings[0]!.message, /nf_conntrack_max 1000 is below nf_conntrack_buckets 262144/);
  assert.match(low.findings[0]!.message, /--conntrack-max 262144/);
});

test("sizing: --conntrack-max is written when it differs, and warned about when it is too low", () => {
  assert.deepEqual(conntrackSizing({ max: 1000, buckets: 262144 }, 262144), { write: 262144, findings: [] });
  assert.deepEqual(conntrackSizing({ max: 262144, buckets: 262144 }, 262144), { findings: [] });
  const asked = conntrackSizing({ max: 262144, buckets: 262144 }, 5000);
  assert.equal(asked.write, 5000);
  assert.match(asked.findings[0]!.message, /5000 \(--conntrack-max\) is below nf_conntrack_buckets 262144/);
  const absent = conntrackSizing(undefined);
  assert.deepEqual(
    absent.findings.map((f) => f.code),
    ["conntrack_not_loaded"],
  );
});

test("sysctl adapter on a folder: reads both sizes, writes the max, no files = not loaded", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "plb-ct-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const ct = createConntrackSysctl(dir);
  assert.equal(await ct.read(), undefined);
  writeFileSync(join(dir, "nf_conntrack_max"), "1000\n");
  writeFileSync(join(dir, "nf_conntrack_buckets"), "4096\n");
  assert.deepEqual(await ct.read(), { max: 1000, buckets: 4096 });
  await ct.writeMax(4096);
  assert.equal(readFileSync(join(dir, "nf_conntrack_max"), "utf8"), "4096\n");
  await assert.rejects(createConntrackSysctl(join(dir, "nosuch")).writeMax(1), (e: unknown) => {
    assert.ok(e instanceof PasslbError);
    assert.equal(e.code, "conntrack_sysctl_failed");
    return true;
  });
});

const skip = kernelSkipReason();

test("sysctl adapter on the real kernel: sizes read; a write from a non-initial namespace is refused", async (t) => {
  if (skip) return t.skip(skip);
  const sizes = await createConntrackSysctl().read();
  if (!sizes) return t.skip("nf_conntrack is not loaded on this host");
  assert.ok(sizes.max > 0 && sizes.buckets > 0, JSON.stringify(sizes));
  await withNetns("ct", async (ns) => {
    // the same value back: nothing would change even if the kernel allowed it
    const script = `import { createConntrackSysctl } from ${JSON.stringify(`${process.cwd()}/src/drivers/conntrack-sysctl.ts`)};
      const ct = createConntrackSysctl();
      const s = await ct.read();
      try { await ct.writeMax(s.max); console.log("written"); } catch (e) { console.log(e.code, e.message); }`;
    const r = spawnSync(
      "ip",
      ["netns", "exec", ns, process.execPath, "--import", "tsx", "--input-type=module", "-e", script],
      { encoding: "utf8" },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(
      r.stdout,
      /^conntrack_sysctl_failed cannot set .*nf_conntrack_max.*initial network namespace/,
    );
  });
});

const FLAGS: NftLbFlags = {
  filename: ["test/fixtures/nft/_base", "test/fixtures/nft/cluster-ranges/input.yaml"],
  manifests: [],
  table: "passlb",
  seed: "1",
  maxTableSize: "4093",
  routes: false,
  probe: false,
  once: true,
  pollMs: "1000",
  driftCheckMs: "0",
  announce: "none",
  peers: [],
  handoverMs: "1000",
};

class FakeConntrack implements ConntrackSysctl {
  written: number[] = [];
  refuse = false;
  constructor(public sizes: { max: number; buckets: number } | undefined) {}
  async read() {
    return this.sizes;
  }
  async writeMax(value: number) {
    if (this.refuse) throw new PasslbError("conntrack_sysctl_failed", "cannot set nf_conntrack_max: EACCES");
    this.written.push(value);
  }
}

async function lb(flags: Partial<NftLbFlags>, conntrack: FakeConntrack) {
  let stderr = "";
  const io = {
    stdout: () => {},
    stderr: (s: string) => {
      stderr += s;
    },
    readStdin: async () => "",
  };
  const stop = new AbortController();
  const code = await runNftablesLb({ ...FLAGS, ...flags }, io, () => stop.signal, undefined, undefined, {
    drivers: fakeLbHostDrivers({ nft: new FakeNft(), conntrackSysctl: conntrack }),
  });
  return { code, stderr };
}

test("passlb lb: warns at start when nf_conntrack_max is below the buckets; --conntrack-max sets it", async () => {
  const low = new FakeConntrack({ max: 1000, buckets: 262144 });
  const warned = await lb({}, low);
  assert.equal(warned.code, 0, warned.stderr);
  assert.match(
    warned.stderr,
    /passlb lb: warning conntrack_max_below_buckets: nf_conntrack_max 1000 is below/,
  );
  assert.deepEqual(low.written, []);
  const set = await lb({ conntrackMax: "262144" }, low);
  assert.equal(set.code, 0, set.stderr);
  assert.deepEqual(low.written, [262144]);
  assert.match(set.stderr, /nf_conntrack_max set to 262144 \(was 1000\)/);
  assert.doesNotMatch(set.stderr, /conntrack_max_below_buckets/);
  const fine = await lb({}, new FakeConntrack({ max: 262144, buckets: 262144 }));
  assert.doesNotMatch(fine.stderr, /conntrack/);
  const refused = new FakeConntrack({ max: 1000, buckets: 262144 });
  refused.refuse = true;
  const failed = await lb({ conntrackMax: "262144" }, refused);
  assert.equal(failed.code, 1);
  assert.match(failed.stderr, /error: --conntrack-max: cannot set nf_conntrack_max/);
  const bad = await lb({ conntrackMax: "lots" }, low);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--conntrack-max must be a positive integer, got lots/);
});
