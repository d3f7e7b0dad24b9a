/**
 * VRRP hygiene against real keepalived (docs/vip-announce.md "VRRP hygiene"). Topology
 * `wirevrrp`: a bridge namespace, two LB hosts (192.0.2.2, 192.0.2.3) running passlb's
 * keepalived through the driver with `--vrid-range 40-50`, and a foreign router (`rogue`,
 * 192.0.2.9) running a keepalived of its own in multicast mode. Cases:
 *   - every passlb VRID is inside the range;
 *   - the foreign router advertises one of passlb's VRIDs at priority 254: the watch on an
 *     LB host (tcpdump, vrrp-watch.ts) reports it within two of its adverts, with VRID,
 *     address, MAC and priority; `passlb_vrrp_foreign_speaker` is 1 for that VRID;
 *   - the VIPs stay served: every VIP on exactly its elected host throughout (sampled every
 *     50 ms for 5 s) and no VRRP transition on either host (vrrp_check_unicast_src);
 *   - a foreign speaker on a VRID outside the range is not reported;
 *   - the foreign router stops: it leaves the report after the hold time, the gauge goes 0.
 * Root, ip, keepalived, tcpdump needed; skipped with the reason otherwise. Namespaces and
 * processes are removed in t.after.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { AnnouncerEvent } from "../../src/announce/announcer.ts";
import { vipReady } from "../../src/announce/fake-announcer.ts";
import { kernelVipAddresses } from "../../src/announce/vip-addresses.ts";
import { vipOwners } from "../../src/announce/vip-owners.ts";
import type { ForeignSpeaker } from "../../src/announce/vrrp-adverts.ts";
import { VrrpWatch } from "../../src/announce/vrrp-watch.ts";
import { KeepalivedDriver } from "../../src/drivers/keepalived-driver.ts";
import { Metrics } from "../../src/web/metrics.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../netns.ts";

const why =
  kernelSkipReason() ??
  (spawnSync("keepalived", ["--version"]).error ? "keepalived is not installed" : undefined) ??
  (spawnSync("tcpdump", ["--version"]).error ? "tcpdump is not installed" : undefined);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ip = (...args: string[]) => {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
};
const HOSTS = ["lb-a", "lb-b"] as const;
const PEERS = new Map([
  ["lb-a", { IPv4: "192.0.2.2" }],
  ["lb-b", { IPv4: "192.0.2.3" }],
]);
const VIPS = ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"];
const RANGE = { first: 40, last: 50 };

/** a multicast keepalived of a foreign router advertising `vrid` (keepalived.conf(5)) */
const rogueConf = (vrids: readonly number[]) =>
  [
    "global_defs {",
    "  router_id rogue",
    "  vrrp_version 3",
    "}",
    ...vrids.flatMap((vrid) => [
      `vrrp_instance rogue_${vrid} {`,
      "  state MASTER",
      "  interface eth0",
      `  virtual_router_id ${vrid}`,
      "  priority 254",
      "  advert_int 1",
      "  virtual_ipaddress {",
      `    198.51.100.${vrid}/32`,
      "  }",
      "}",
    ]),
    "",
  ].join("\n");

test("VRRP hygiene: passlb's VRIDs in --vrid-range, a foreign speaker on one detected, the VIPs stay served", {
  timeout: 120_000,
}, async (t) => {
  if (why) return t.skip(why);
  const ns = {
    br: createNetns("wirevrrp"),
    "lb-a": createNetns("wirevrrp"),
    "lb-b": createNetns("wirevrrp"),
    rogue: createNetns("wirevrrp"),
  };
  const dir = mkdtempSync(join(tmpdir(), "plbwire-vrrp-"));
  const drivers: KeepalivedDriver[] = [];
  let watch: VrrpWatch | undefined;
  let rogue: ChildProcess | undefined;
  t.after(async () => {
    watch?.stop();
    rogue?.kill("SIGKILL");
    for (const d of drivers) await d.stop({ graceful: false }).catch(() => {});
    for (const n of Object.values(ns)) {
      for (const pid of ip("netns", "pids", n).split("\n").filter(Boolean)) spawnSync("kill", ["-9", pid]);
      deleteNetns(n);
    }
    rmSync(dir, { recursive: true, force: true });
  });
  ip("-n", ns.br, "link", "add", "br0", "type", "bridge");
  ip("-n", ns.br, "link", "set", "br0", "up");
  const attach = (name: keyof typeof ns, v4: string) => {
    ip("link", "add", "eth0", "netns", ns[name], "type", "veth", "peer", "name", `p-${name}`, "netns", ns.br);
    ip("-n", ns.br, "link", "set", `p-${name}`, "master", "br0", "up");
    ip("-n", ns[name], "link", "set", "lo", "up");
    ip("-n", ns[name], "link", "set", "eth0", "up");
    ip("-n", ns[name], "addr", "add", `${v4}/24`, "dev", "eth0");
  };
  attach("lb-a", "192.0.2.2");
  attach("lb-b", "192.0.2.3");
  attach("rogue", "192.0.2.9");
  const transitions: { host: string; at: number; e: AnnouncerEvent }[] = [];
  for (const h of HOSTS)
    drivers.push(
      new KeepalivedDriver({
        self: h,
        interface: "eth0",
        peers: PEERS,
        stateDir: join(dir, h),
        advertMs: 100,
        handoverMs: 1000,
        command: ["ip", "netns", "exec", ns[h], "keepalived"],
        addresses: kernelVipAddresses({ interface: "eth0", netns: ns[h] }),
        vridRange: RANGE,
        onEvent: (e) => {
          if (e.kind === "state") transitions.push({ host: h, at: Date.now(), e });
        },
      }),
    );
  await Promise.all(drivers.map((d) => d.start({ vips: VIPS.map((v) => vipReady(v)), generation: 1 })));
  const instances = drivers[0]!.status().groups;
  const vrids = instances.map((g) => Number(g.name.replace(/^passlb_v4_/, "")));
  for (const v of vrids) assert.ok(v >= RANGE.first && v <= RANGE.last, `VRID ${v} outside 40-50`);
  const owners = vipOwners(HOSTS, VIPS);
  const holders = (vip: string) =>
    HOSTS.filter((h) =>
      (
        JSON.parse(ip("-n", ns[h], "-j", "addr", "show", "dev", "eth0")) as {
          addr_info: { local: string }[];
        }[]
      )
        .flatMap((r) => r.addr_info)
        .some((a) => a.local === vip),
    );
  const asElected = () => VIPS.every((v) => JSON.stringify(holders(v)) === JSON.stringify([owners.get(v)]));
  const deadline = Date.now() + 10_000;
  while (!asElected() && Date.now() < deadline) await sleep(50);
  assert.ok(asElected(), "every VIP on its elected host");

  const foreign: { at: number; s: ForeignSpeaker }[] = [];
  const gone: { at: number; s: ForeignSpeaker }[] = [];
  watch = new VrrpWatch({
    interface: "eth0",
    range: RANGE,
    ours: () => new Set(["192.0.2.2", "192.0.2.3"]),
    prefix: ["ip", "netns", "exec", ns["lb-b"]],
    holdMs: 3000,
    onForeign: (s) => foreign.push({ at: Date.now(), s }),
    onGone: (s) => gone.push({ at: Date.now(), s }),
  });
  watch.start();
  await sleep(1500);
  assert.equal(foreign.length, 0, "passlb's own unicast adverts are not foreign");
  assert.equal(watch.report().watching, true);

  // the foreign router: one of passlb's VRIDs (the instance holding VIPS[0]) and one outside the range
  const clash = Number(
    drivers[0]!
      .status()
      .vips.find((v) => v.vip === VIPS[0])!
      .group!.replace(/^passlb_v4_/, ""),
  );
  mkdirSync(join(dir, "rogue"));
  writeFileSync(join(dir, "rogue", "k.conf"), rogueConf([clash, 200]));
  const since = Date.now();
  const transitionsBefore = transitions.length;
  rogue = spawn(
    "ip",
    [
      "netns",
      "exec",
      ns.rogue,
      "keepalived",
      "--dont-fork",
      "--log-console",
      "--no-syslog",
      "--vrrp",
      "--use-file",
      join(dir, "rogue", "k.conf"),
      "--pid",
      join(dir, "rogue", "k.pid"),
      "--vrrp_pid",
      join(dir, "rogue", "v.pid"),
    ],
    { stdio: "ignore" },
  );
  // sample the holders while the clash lasts
  let wrong = 0;
  const until = Date.now() + 5000;
  while (Date.now() < until) {
    if (!asElected()) wrong++;
    await sleep(50);
  }
  assert.equal(foreign.length, 1, `one foreign speaker reported: ${JSON.stringify(foreign)}`);
  const f = foreign[0]!;
  t.diagnostic(
    `foreign speaker reported ${f.at - since} ms after it started: VRID ${f.s.vrid} from ${f.s.source} (${f.s.mac}) priority ${f.s.priority}`,
  );
  assert.equal(f.s.vrid, clash);
  assert.equal(f.s.source, "192.0.2.9");
  assert.equal(f.s.priority, 254);
  // keepalived starts in BACKUP for 3 × advert_int + skew, then advertises every second
  assert.ok(f.at - since <= 3000 + 2 * 1000 + 1000, `reported after ${f.at - since} ms`);
  assert.equal(wrong, 0, "every VIP stayed on its elected host");
  assert.equal(transitions.length, transitionsBefore, JSON.stringify(transitions.slice(transitionsBefore)));
  const metrics = new Metrics();
  const wire = { checkedAt: null, periodMs: 0, vips: [], errors: [], vrrp: watch.report() };
  metrics.announce({ ...drivers[1]!.status(), wire });
  assert.match(
    await metrics.text(),
    new RegExp(`passlb_vrrp_foreign_speaker\\{interface="eth0",vrid="${clash}"\\} 1`),
  );
  for (const h of HOSTS) {
    const log = readFileSync(join(dir, h, "keepalived.log"), "utf8");
    t.diagnostic(
      `${h} keepalived.log lines naming 192.0.2.9: ${log.split("\n").filter((l) => l.includes("192.0.2.9")).length}`,
    );
  }

  // the foreign router stops: gone after the hold time
  rogue.kill("SIGTERM");
  const stopped = Date.now();
  while (gone.length === 0 && Date.now() < stopped + 8000) await sleep(100);
  assert.equal(gone.length, 1);
  t.diagnostic(`gone ${gone[0]!.at - stopped} ms after the foreign router stopped (hold 3 s)`);
  assert.deepEqual(watch.report().foreign, []);
  metrics.announce({ ...drivers[1]!.status(), wire: { ...wire, vrrp: watch.report() } });
  assert.match(
    await metrics.text(),
    new RegExp(`passlb_vrrp_foreign_speaker\\{interface="eth0",vrid="${clash}"\\} 0`),
  );
});
