/**
 * The pure core stays pure: besides Biome's import bans (biome.json), no pure module reads
 * the clock, randomness, the process or timers. A failing line names the file and the call.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

const PURE = ["src/k8s", "src/endpoints", "src/plan", "src/migrate", "src/providers", "src/net"];
const PURE_FILES = [
  /^src\/dataplane\/maglev[^/]*\.ts$/,
  /^src\/dataplane\/forwarding-state[^/]*\.ts$/,
  /^src\/dataplane\/render\//,
  /^src\/announce\/(vip-owners|lb-peers|announcer|announce-plan|keepalived-config|keepalived-state)[^/]*\.ts$/,
  /^src\/announce\/bgp\/(bgp-decision|bgp-types|bgp-peer-config|bird-config|bird-status)[^/]*\.ts$/,
  /^src\/health\/state[^/]*\.ts$/,
  /^src\/web\/(dashboard-state|backend-states|health-lookup|pool-usage)[^/]*\.ts$/,
  /^src\/controller\/(conditions|controller-events|controller-writes|pool-status|service-writes|leader-election|passlb-slices)[^/]*\.ts$/,
];
const FORBIDDEN = [
  /\bDate\.now\(/,
  /new Date\(\)/,
  /\bMath\.random\(/,
  /\bprocess\./,
  /\bset(Timeout|Interval|Immediate)\(/,
  /\bperformance\.now\(/,
];

function walk(dir: string, out: string[] = []): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (name.endsWith(".ts") && !name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}

test("pure-core modules use no clock, randomness, process or timers", () => {
  const files = [
    ...PURE.flatMap((d) => walk(d)),
    ...walk("src").filter((f) => PURE_FILES.some((r) => r.test(f))),
  ];
  assert.ok(files.length > 10, "the pure core was not found");
  const offences: string[] = [];
  for (const file of files) {
    const lines = readFileSync(file, "utf8").split("\n");
    lines.forEach((line, i) => {
      if (line.trim().startsWith("*") || line.trim().startsWith("//")) return;
      for (const re of FORBIDDEN) if (re.test(line)) offences.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(offences, []);
});
