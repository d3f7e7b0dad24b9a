/**
 * The keepalived driver against the real keepalived (Debian's package) in two throwaway
 * network namespaces joined by a veth pair (192.0.2.0/24, fd00:192::/64): the first host of
 * each VIP's ranking holds it; a reload that adds a VIP does not flap the instances that
 * did not change (no state transition, their addresses never leave the interface); a
 * change of the host list (every instance renamed) converges with every VIP on its first
 * host again; a VIP this host cannot serve moves to the peer through the track file and
 * comes back; a graceful stop hands everything to the peer. Root and keepalived needed; skipped with the
 * reason otherwise. Namespaces and keepalived processes are removed in t.after.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { AnnounceInput, AnnouncerEvent } from "../../src/announce/announcer.ts";
import { vipReady } from "../../src/announce/fake-announcer.ts";
import { kernelVipAddresses } from "../../src/announce/vip-addresses.ts";
import { vipOwners } from "../../src/announce/vip-owners.ts";
import { KeepalivedDriver } from "../../src/drivers/keepalived-driver.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../netns.ts";

const why =
  kernelSkipReason() ??
  (spawnSync("keepalived", ["--version"]).error ? "keepalived is not installed" : undefined);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ip = (...args: string[]) => {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
};
const HOSTS = ["lb-a", "lb-b"] as const;
const PEERS = new Map([
  ["lb-a", { IPv4: "192.0.2.2", IPv6: "fd00:192::2" }],
  ["lb-b", { IPv4: "192.0.2.3", IPv6: "fd00:192::3" }],
]);
const VIPS = ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4", "203.0.113.5", "fd00:10::1"];
const input = (vips: readonly string[], notReady: readonly string[] = []): AnnounceInput => ({
  vips: vips.map((vip) => vipReady(vip, notReady.includes(vip) ? "no_healthy_backend" : "ok")),
  generation: 1,
});

test("keepalived driver: election, reload without flapping, readiness moves a VIP, graceful stop", {
  timeout: 90_000,
}, async (t) => {
  if (why) return t.skip(why);
  const ns = { "lb-a": createNetns("vrrpdrv"), "lb-b": createNetns("vrrpdrv") };
  const dir = mkdtempSync(join(tmpdir(), "plbvrrp-driver-"));
  const drivers: KeepalivedDriver[] = [];
  t.after(async () => {
    for (const d of drivers) await d.stop({ graceful: true }).catch(() => {});
    for (const n of Object.values(ns)) {
      for (const pid of ip("netns", "pids", n).split("\n").filter(Boolean)) spawnSync("kill", ["-9", pid]);
      deleteNetns(n);
    }
    rmSync(dir, { recursive: true, force: true });
  });
  ip("link", "add", "eth0", "netns", ns["lb-a"], "type", "veth", "peer", "name", "eth0", "netns", ns["lb-b"]);
  for (const h of HOSTS) {
    const a = PEERS.get(h)!;
    ip("-n", ns[h], "link", "set", "lo", "up");
    ip("-n", ns[h], "link", "set", "eth0", "up");
    ip("-n", ns[h], "addr", "add", `${a.IPv4}/24`, "dev", "eth0");
    ip("-n", ns[h], "addr", "add", `${a.IPv6}/64`, "dev", "eth0", "nodad");
  }
  const events = new Map<string, AnnouncerEvent[]>(HOSTS.map((h) => [h, []]));
  for (const h of HOSTS) {
    const d = new KeepalivedDriver({
      self: h,
      interface: "eth0",
      peers: PEERS,
      stateDir: join(dir, h),
      advertMs: 100,
      handoverMs: 1500,
      command: ["ip", "netns", "exec", ns[h], "keepalived"],
      addresses: kernelVipAddresses({ interface: "eth0", netns: ns[h] }),
      onEvent: (e) => events.get(h)!.push(e),
    });
    drivers.push(d);
  }
  const on = (h: (typeof HOSTS)[number]) =>
    new Set(
      (
        JSON.parse(ip("-n", ns[h], "-j", "addr", "show", "dev", "eth0")) as {
          addr_info: { local: string }[];
        }[]
      )
        .flatMap((r) => r.addr_info)
        .map((a) => a.local),
    );
  const holdersOf = (vip: string) => HOSTS.filter((h) => on(h).has(vip));
  const waitFor = async (what: string, ok: () => boolean, ms = 5000) => {
    const deadline = Date.now() + ms;
    while (!ok()) {
      if (Date.now() > deadline) {
        const log = HOSTS.map(
          (h) =>
            `${h}: ${JSON.stringify(drivers[HOSTS.indexOf(h)]!.status().groups)} addresses ${[...on(h)].join(" ")}`,
        );
        throw new Error(`${what} not within ${ms} ms; ${log.join("; ")}`);
      }
      await sleep(50);
    }
  };
  const asElected =
    (vips: readonly string[], owners = vipOwners(HOSTS, vips)) =>
    () =>
      vips.every((v) => JSON.stringify(holdersOf(v)) === JSON.stringify([owners.get(v)]));

  // what keepalived cannot run or refuses is an error at start, naming the cause
  const broken = (over: Partial<ConstructorParameters<typeof KeepalivedDriver>[0]>) =>
    new KeepalivedDriver({
      self: "lb-a",
      interface: "eth0",
      peers: PEERS,
      stateDir: join(dir, "broken"),
      advertMs: 100,
      handoverMs: 100,
      command: ["ip", "netns", "exec", ns["lb-a"], "keepalived"],
      addresses: kernelVipAddresses({ interface: "eth0", netns: ns["lb-a"] }),
      ...over,
    }).start(input(VIPS));
  await assert.rejects(broken({ command: ["/nonexistent/keepalived"] }), /cannot run.*--keepalived PATH/);
  await assert.rejects(
    broken({
      interface: "nosuch0",
      addresses: kernelVipAddresses({ interface: "nosuch0", netns: ns["lb-a"] }),
    }),
    /keepalived refuses the rendered configuration/,
  );

  await Promise.all(drivers.map((d) => d.start(input(VIPS))));
  await waitFor("every VIP on its first host", asElected(VIPS));
  // the FIFO reports the transitions a moment after the addresses appear
  const expected = () =>
    drivers[0]!.status().vips.every((v) => v.state === (v.preferredHolder === "lb-a" ? "held" : "backup"));
  await waitFor("lb-a's status: held where it is first, backup elsewhere", expected, 2000);
  const a = drivers[0]!.status();
  assert.equal(a.engine, "keepalived");
  assert.equal(a.state, "running");
  assert.equal(a.vips.length, VIPS.length);

  await t.test("a reload that adds a VIP leaves the other instances alone", async () => {
    const more = [...VIPS, "203.0.113.6"];
    const before = drivers.map((d) => d.status().groups.map((g) => g.name));
    const marks = HOSTS.map((h) => events.get(h)!.length);
    let lost = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        if (!asElected(VIPS)()) lost++;
        await sleep(20);
      }
    })();
    await Promise.all(drivers.map((d) => d.update(input(more))));
    await waitFor("the new VIP on its first host", asElected(more));
    await sleep(1500);
    sampling = false;
    await sampler;
    assert.equal(lost, 0, "an unchanged VIP left its host during the reload");
    const touched = drivers[0]!.status().vips.find((v) => v.vip === "203.0.113.6")!.group!;
    for (const [i, h] of HOSTS.entries()) {
      const after = events.get(h)!.slice(marks[i]);
      const reload = after.find((e) => e.kind === "reloaded");
      assert.ok(reload, `${h} reloaded`);
      const flapped = after.filter(
        (e) => e.kind === "state" && e.group !== touched && before[i]!.includes(e.group),
      );
      assert.deepEqual(flapped, [], `${h}: unchanged instances changed state`);
    }
    // the same input again: nothing to reload
    const n = events.get("lb-a")!.length;
    await drivers[0]!.update(input(more));
    assert.equal(
      events
        .get("lb-a")!
        .slice(n)
        .filter((e) => e.kind === "reloaded").length,
      0,
    );
  });

  await t.test("a VIP its holder cannot serve moves to the peer, and comes back", async () => {
    const vips = [...VIPS, "203.0.113.6"];
    const owners = vipOwners(HOSTS, vips);
    const vip = vips.find((v) => owners.get(v) === "lb-a")!;
    await drivers[0]!.update(input(vips, [vip]));
    await waitFor(`${vip} on lb-b`, () => JSON.stringify(holdersOf(vip)) === '["lb-b"]', 2000);
    const s = drivers[0]!.status().vips.find((v) => v.vip === vip)!;
    assert.match(s.reason, /not_ready:no_healthy_backend/);
    await drivers[0]!.update(input(vips));
    await waitFor(`${vip} back on lb-a`, asElected(vips), 2000);
  });

  await t.test("keepalived killed: its leftover addresses go at once, it is started again", async () => {
    const vips = [...VIPS, "203.0.113.6"];
    const mark = events.get("lb-a")!.length;
    const pid = drivers[0]!.status().pid!;
    process.kill(-pid, "SIGKILL");
    await waitFor(
      "the leftovers removed",
      () =>
        events
          .get("lb-a")!
          .slice(mark)
          .some((e) => e.kind === "cleaned"),
      2000,
    );
    await waitFor("keepalived back, every VIP on its first host", asElected(vips), 8000);
    const after = events.get("lb-a")!.slice(mark);
    const restarts = after.filter((e) => e.kind === "engine" && e.state === "restarting");
    t.diagnostic(`after the kill: ${JSON.stringify(restarts)}`);
    if (restarts.length > 1)
      t.diagnostic(
        readFileSync(join(dir, "lb-a", "keepalived.log"), "utf8")
          .split("\n")
          .slice(-30)
          .join("\n"),
      );
    assert.notEqual(drivers[0]!.status().pid, pid);
  });

  await t.test("a peer change renames the instances; no VIP goes unanswered for long", async () => {
    const vips = [...VIPS, "203.0.113.6"];
    // a third LB host that does not exist (yet): it ranks first for some VIPs, which stay
    // with the second of their order
    const three = new Map([...PEERS, ["lb-c", { IPv4: "192.0.2.4", IPv6: "fd00:192::4" }]]);
    let longest = 0;
    const since = new Map<string, number>();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const now = Date.now();
        for (const v of vips) {
          if (holdersOf(v).length === 0) {
            if (!since.has(v)) since.set(v, now);
          } else if (since.has(v)) {
            longest = Math.max(longest, now - since.get(v)!);
            since.delete(v);
          }
        }
        await sleep(20);
      }
    })();
    await Promise.all(drivers.map((d) => d.update({ ...input(vips), peers: three })));
    const owners = new Map(vips.map((v) => [v, vipOwners(HOSTS, [v]).get(v)!]));
    await waitFor("every VIP on its first present host", asElected(vips, owners), 5000);
    await sleep(1000);
    sampling = false;
    await sampler;
    for (const [, t0] of since) longest = Math.max(longest, Date.now() - t0);
    t.diagnostic(`peer change: the longest a VIP was on no host: ${longest} ms`);
    // renamed instances re-elect (one master-down interval, ~306 ms, plus the two-step
    // reload; measured 348–1127 ms on the loaded CI machine): a sanity bound, not a target
    assert.ok(longest <= 2000, `a VIP was unanswered for ${longest} ms`);
    await Promise.all(drivers.map((d) => d.update({ ...input(vips), peers: PEERS })));
    await waitFor("back to two hosts", asElected(vips), 5000);
  });

  await t.test("a graceful stop hands every VIP to the peer, then keepalived stops", async () => {
    const vips = [...VIPS, "203.0.113.6"];
    const pid = drivers[0]!.status().pid!;
    const mark = events.get("lb-a")!.length;
    const t0 = Date.now();
    await drivers[0]!.stop({ graceful: true });
    t.diagnostic(
      `graceful stop took ${Date.now() - t0} ms: ${JSON.stringify(events.get("lb-a")!.slice(mark))}`,
    );
    assert.ok(
      vips.every((v) => JSON.stringify(holdersOf(v)) === '["lb-b"]'),
      "lb-b holds all, lb-a none",
    );
    assert.throws(() => process.kill(pid, 0), "keepalived is gone");
    assert.equal(drivers[0]!.status().state, "stopped");
  });
});
