/**
 * The BGP engine's adapters against the real thing: one contract for the VIP route table,
 * run on the fake and on the kernel (a throwaway network namespace), and the BIRD speaker
 * started, adopted, refused and stopped inside a namespace (no peer answers there, so its
 * sessions stay down). Root, ip and bird needed for the real halves; they say why they skip.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parseAllDocuments } from "yaml";
import { createNetns, deleteNetns, kernelSkipReason } from "../../../test/netns.ts";
import { PasslbError } from "../../errors.ts";
import { renderBirdConfig } from "./bird-config.ts";
import { birdAvailable, birdSpeaker } from "./bird-speaker.ts";
import { fakeVipRoutes, kernelVipRoutes, type VipRouteTable } from "./kernel-vip-routes.ts";

/** the bird container's shell command, as deploy/components/announce-bgp/lb-bgp.yaml runs it */
const SIDECAR_SCRIPT = (() => {
  const ops = parseAllDocuments(
    readFileSync("deploy/components/announce-bgp/lb-bgp.yaml", "utf8"),
  )[0]?.toJS() as {
    path: string;
    value?: { name?: string; args?: string[] };
  }[];
  const bird = ops.find((o) => o.path === "/spec/template/spec/containers/-" && o.value?.name === "bird");
  if (!bird?.value?.args?.[0])
    throw new Error("the announce-bgp component has no bird container with a shell command");
  return bird.value.args[0];
})();

async function contract(routes: VipRouteTable): Promise<void> {
  assert.deepEqual(await routes.list(), []);
  await routes.add("203.0.113.10");
  await routes.add("203.0.113.10"); // idempotent
  await routes.add("fd00:10::10");
  assert.deepEqual((await routes.list()).sort(), ["203.0.113.10", "fd00:10::10"]);
  await routes.remove("203.0.113.10");
  await routes.remove("203.0.113.10"); // a missing route is no error
  assert.deepEqual(await routes.list(), ["fd00:10::10"]);
  await routes.remove("fd00:10::10");
  assert.deepEqual(await routes.list(), []);
}

test("VIP route table contract: the fake", async () => {
  await contract(fakeVipRoutes());
});

test("VIP route table contract: the kernel (table 4242 in a namespace)", async (t) => {
  const why = kernelSkipReason();
  if (why) return t.skip(why);
  const ns = createNetns("bgprt");
  t.after(() => deleteNetns(ns));
  spawnSync("ip", ["-n", ns, "link", "set", "lo", "up"]);
  const routes = kernelVipRoutes({ table: 4242, netns: ns });
  await contract(routes);
  // a route someone else put there (not `proto static` on lo) is not passlb's
  spawnSync("ip", ["-n", ns, "route", "add", "203.0.113.99/32", "dev", "lo", "table", "4242"]);
  assert.deepEqual(await routes.list(), []);
  await routes.add("203.0.113.11");
  const main = spawnSync("ip", ["-n", ns, "route", "show", "table", "main"], { encoding: "utf8" }).stdout;
  assert.doesNotMatch(main, /203\.0\.113\.11/, "the host's own routing is untouched");
});

test("BIRD speaker: starts under its state dir, is adopted by the next start, refuses bad config, stops", async (t) => {
  const why =
    kernelSkipReason() ?? (birdAvailable() ? undefined : "bird (Debian package bird2) is not installed");
  if (why) return t.skip(why);
  const ns = createNetns("bgpbird");
  const dir = mkdtempSync(join(tmpdir(), "plb-bird-"));
  t.after(() => {
    const pid = existsSync(join(dir, "bird.pid")) ? Number(readFileSync(join(dir, "bird.pid"), "utf8")) : 0;
    if (pid > 0) spawnSync("kill", ["-9", String(pid)]);
    deleteNetns(ns);
    rmSync(dir, { recursive: true, force: true });
  });
  spawnSync("ip", ["-n", ns, "link", "set", "lo", "up"]);
  spawnSync("ip", ["-n", ns, "addr", "add", "198.51.100.2/24", "dev", "lo"]);
  const config = renderBirdConfig({
    asn: 64512,
    peers: [{ address: "198.51.100.1", asn: 64500, family: "IPv4" }],
    routerId: "198.51.100.2",
    kernelTable: 4242,
    bfd: { intervalMs: 100, multiplier: 3 },
    holdSeconds: 9,
    connectRetrySeconds: 1,
    communities: [],
  });
  const speaker = birdSpeaker({ stateDir: dir, bfd: true, netns: ns });
  await speaker.start(config);
  const pid = Number(readFileSync(join(dir, "bird.pid"), "utf8"));
  const state = await speaker.state();
  assert.equal(state.running, true);
  assert.equal(state.health, "down", "no router answers in the namespace");
  assert.deepEqual(
    state.sessions.map((s) => [s.name, s.peer, s.established]),
    [["peer1", "198.51.100.1", false]],
  );
  // a second start (the next passlb) adopts the running BIRD and reloads its file
  await birdSpeaker({ stateDir: dir, bfd: true, netns: ns }).start(
    config.replace("hold time 9", "hold time 12"),
  );
  assert.equal(Number(readFileSync(join(dir, "bird.pid"), "utf8")), pid, "the same BIRD");
  assert.match(readFileSync(join(dir, "bird.conf"), "utf8"), /hold time 12/);
  await assert.rejects(
    speaker.start("protocol bgp { nonsense; }\n"),
    (e) => e instanceof PasslbError && e.code === "announce_failed" && /BIRD refused/.test(e.message),
  );
  assert.match(readFileSync(join(dir, "bird.conf"), "utf8"), /hold time 12/, "the last good file stays");
  await speaker.stop();
  const gone = spawnSync("kill", ["-0", String(pid)]).status !== 0;
  assert.ok(gone, "BIRD exited");
  assert.equal((await speaker.state()).running, false);
});

test("BIRD as the pod's sidecar (--bgp-speaker external): passlb waits for it, configures it, never starts or stops it", async (t) => {
  const why =
    kernelSkipReason() ?? (birdAvailable() ? undefined : "bird (Debian package bird2) is not installed");
  if (why) return t.skip(why);
  const ns = createNetns("bgpcrdside");
  const dir = mkdtempSync(join(tmpdir(), "plb-bird-side-"));
  let sidecar: ReturnType<typeof spawn> | undefined;
  t.after(() => {
    sidecar?.kill("SIGKILL");
    deleteNetns(ns);
    rmSync(dir, { recursive: true, force: true });
  });
  spawnSync("ip", ["-n", ns, "link", "set", "lo", "up"]);
  // no peer at all (no LoadBalancerBGPPeer selects the host yet): BIRD sends nothing anywhere
  const config = renderBirdConfig({
    asn: 64512,
    peers: [],
    routerId: "198.51.100.2",
    kernelTable: 4242,
    bfd: undefined,
    holdSeconds: 9,
    connectRetrySeconds: 1,
    communities: [],
  });
  const speaker = birdSpeaker({
    stateDir: dir,
    bfd: false,
    netns: ns,
    external: true,
    externalWaitMs: 10_000,
  });
  // no sidecar yet: a clear error after the wait, and passlb started no BIRD of its own
  await assert.rejects(
    birdSpeaker({ stateDir: dir, bfd: false, external: true, externalWaitMs: 400 }).start(config),
    (e) => e instanceof PasslbError && /no BIRD answers on .*bird\.ctl after 0\.4 s/.test(e.message),
  );
  assert.equal(existsSync(join(dir, "bird.pid")), false, "passlb started no BIRD");
  // the sidecar's command (deploy/lb-daemonset.yaml): wait for the file, then BIRD in the foreground
  const starting = speaker.start(config);
  sidecar = spawn(
    "ip",
    ["netns", "exec", ns, "sh", "-c", SIDECAR_SCRIPT.replaceAll("/run/passlb/bgp", dir)],
    { stdio: "ignore" },
  );
  await starting;
  const state = await speaker.state();
  assert.equal(state.running, true, "passlb talks to the sidecar's BIRD");
  assert.match(readFileSync(join(dir, "bird.conf"), "utf8"), /router id 198\.51\.100\.2;/);
  await speaker.start(config.replace("router id 198.51.100.2", "router id 198.51.100.3"));
  await speaker.stop();
  assert.equal(sidecar.exitCode, null, "stop() leaves the sidecar's BIRD running");
  assert.equal((await speaker.state()).running, true);
});
