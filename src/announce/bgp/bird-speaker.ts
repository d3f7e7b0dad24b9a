/**
 * Adapter: one BIRD 2 process per LB host, configured from `renderBirdConfig` and read back
 * through its control socket (`birdc -s SOCKET`). Everything lives under one state
 * directory — `bird.conf`, `bird.ctl` (socket), `bird.pid`, `bird.log` — so several LB
 * hosts can run on one machine (the lab) without sharing anything.
 *
 * - `start(config)`: checks the text with `bird -p -c` (parse only) and only then puts it in
 *   place (a refused one leaves the last good file), then either
 *   adopts a BIRD that already answers on the socket (a previous passlb's: `birdc
 *   configure` loads the new file; sessions whose settings did not change stay up) or starts
 *   `bird -f -c … -s … -P …` detached, in its own process group, logging to `bird.log`.
 *   Detached on purpose: if passlb crashes, BIRD keeps announcing what the kernel table
 *   holds while the kernel keeps forwarding (docs/vip-announce.md "How a VIP is announced",
 *   "passlb crashes, the host lives"); the next passlb adopts it.
 * - `state()`: `show protocols all` and `show bfd sessions`, parsed by bird-status.ts.
 * - `stop()`: `birdc down` (BIRD closes its sessions with a Cease notification and exits),
 *   then waits for the pid; SIGTERM after 3 s.
 * - `external: true` (`--bgp-speaker external`: BIRD runs in its own container of the pod,
 *   deploy/lb-daemonset.yaml): passlb never starts or stops BIRD. `start` writes and checks
 *   the file as above, waits for the socket (the sidecar starts BIRD once the file exists),
 *   then `configure`s it; `stop` leaves BIRD running (the pod's end stops it).
 * BIRD command line and control commands: CZ-NIC/bird@v2.0.12:doc/bird.sgml ("Running
 * BIRD", "Remote control").
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PasslbError } from "../../errors.ts";
import type { SpeakerState } from "./bgp-types.ts";
import { birdSpeakerState } from "./bird-status.ts";

/** The narrow interface of a BGP speaker process; `fakeSpeaker` in tests. */
export interface BgpSpeaker {
  /** configure and make sure the speaker runs; a refused configuration throws (announce_failed) */
  start(config: string): Promise<void>;
  state(): Promise<SpeakerState>;
  /** close the sessions and end the process; `gracefulRestart`: end it so that graceful-restart
   * peers keep its routes (stale) until the next start (`birdc graceful restart`) */
  stop(options?: { readonly gracefulRestart?: boolean }): Promise<void>;
}

export interface BirdPaths {
  readonly dir: string;
  readonly config: string;
  readonly socket: string;
  readonly pid: string;
  readonly log: string;
}

export function birdPaths(stateDir: string): BirdPaths {
  return {
    dir: stateDir,
    config: join(stateDir, "bird.conf"),
    socket: join(stateDir, "bird.ctl"),
    pid: join(stateDir, "bird.pid"),
    log: join(stateDir, "bird.log"),
  };
}

function run(cmd: string, args: readonly string[], timeoutMs = 3000) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.on("data", (b: Buffer) => {
      stdout += b.toString();
    });
    child.stderr.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    child.on("error", (e) => {
      clearTimeout(timer);
      resolve({ code: null, stdout, stderr: e.message });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function birdSpeaker(options: {
  stateDir: string;
  /** BFD is configured (then every session needs an Up BFD session to count as healthy);
   * a function of the peer addresses with BFD when it follows the configuration (LoadBalancerBGPPeers) */
  bfd: boolean | (() => ReadonlySet<string>);
  /** the peer addresses whose sessions have a TCP MD5 key (for the "why down" finding) */
  md5?: () => ReadonlySet<string>;
  bird?: string;
  birdc?: string;
  /** start BIRD inside this network namespace (`ip netns exec`; tests) */
  netns?: string;
  /** BIRD is someone else's process (a sidecar) on the state directory's socket */
  external?: boolean;
  /** start BIRD in graceful-restart recovery (`bird -R`): after a `stop({ gracefulRestart })`,
   * peers keep the stale routes until BIRD has re-announced (BIRD doc "Running BIRD" -R) */
  recover?: boolean;
  /** external: how long to wait for its socket (default 30 s) */
  externalWaitMs?: number;
}): BgpSpeaker {
  const paths = birdPaths(options.stateDir);
  const bird = options.bird ?? "bird";
  const birdc = options.birdc ?? "birdc";
  const control = async (...command: string[]) => {
    const r = await run(birdc, ["-s", paths.socket, ...command]);
    // birdc prints "Unable to connect to server control socket" and exits non-zero without BIRD
    return r.code === 0 && !/Unable to connect/.test(r.stdout + r.stderr) ? r.stdout : undefined;
  };
  const pid = (): number | undefined => {
    if (!existsSync(paths.pid)) return undefined;
    const n = Number(readFileSync(paths.pid, "utf8").trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  };
  return {
    async start(config) {
      mkdirSync(paths.dir, { recursive: true });
      // checked before it replaces the file: a refused configuration leaves the last good one
      const candidate = `${paths.config}.new`;
      writeFileSync(candidate, config);
      const parsed = await run(bird, ["-p", "-c", candidate]);
      if (parsed.code !== 0)
        throw new PasslbError("announce_failed", `BIRD refused the configuration: ${parsed.stderr.trim()}`, {
          details: { stderr: parsed.stderr, file: candidate },
        });
      renameSync(candidate, paths.config);
      if (options.external) {
        const waitMs = options.externalWaitMs ?? 30_000;
        for (let waited = 0; (await control("show", "status")) === undefined; waited += 200) {
          if (waited >= waitMs)
            throw new PasslbError(
              "announce_failed",
              `no BIRD answers on ${paths.socket} after ${waitMs / 1000} s (--bgp-speaker external: the bird container of the pod starts it once ${paths.config} exists)`,
            );
          await sleep(200);
        }
      }
      if ((await control("show", "status")) !== undefined) {
        const r = await control("configure", `"${paths.config}"`);
        if (r === undefined || /error/i.test(r))
          throw new PasslbError("announce_failed", `birdc configure failed: ${r ?? "no answer"}`);
        return;
      }
      const log = openSync(paths.log, "a");
      const argv = [
        "-f",
        ...(options.recover ? ["-R"] : []),
        "-c",
        paths.config,
        "-s",
        paths.socket,
        "-P",
        paths.pid,
      ];
      const [cmd, args] = options.netns
        ? ["ip", ["netns", "exec", options.netns, bird, ...argv]]
        : [bird, argv];
      const child = spawn(cmd, args, {
        detached: true,
        stdio: ["ignore", log, log],
      });
      closeSync(log);
      child.unref();
      let failed: string | undefined;
      child.on("error", (e) => {
        failed = e.message;
      });
      child.on("exit", (code) => {
        failed ??= `bird exited with ${code} (see ${paths.log})`;
      });
      for (let i = 0; i < 100; i++) {
        if (failed) break;
        if ((await control("show", "status")) !== undefined) return;
        await sleep(50);
      }
      throw new PasslbError(
        "announce_failed",
        `BIRD did not start: ${failed ?? "no control socket after 5 s"}`,
      );
    },
    async state() {
      const bfdOn = typeof options.bfd === "function" ? options.bfd() : options.bfd;
      const any = typeof bfdOn === "boolean" ? bfdOn : bfdOn.size > 0;
      const protocols = await control("show", "protocols", "all");
      const bfd = any && protocols !== undefined ? await control("show", "bfd", "sessions") : undefined;
      return birdSpeakerState(protocols, bfd, bfdOn, options.md5?.());
    },
    async stop(how) {
      if (options.external) return; // the sidecar's BIRD: its container's end stops it
      const p = pid();
      // BIRD doc "Remote control": `graceful restart` shuts down keeping peers' routes as stale
      await (how?.gracefulRestart ? control("graceful", "restart") : control("down"));
      if (p === undefined) return;
      for (let i = 0; i < 60 && alive(p); i++) await sleep(50);
      if (alive(p)) process.kill(p, "SIGTERM");
    },
  };
}

/** Whether BIRD is installed (`bird --version`): the tests parse rendered configs with it. */
export function birdAvailable(bird = "bird"): boolean {
  const r = spawnSync(bird, ["--version"], { encoding: "utf8" });
  return r.status === 0 || /BIRD version/.test(`${r.stdout}${r.stderr}`);
}

/** In-memory stand-in: records configurations, reports the state it is given. */
export function fakeSpeaker(initial: SpeakerState): BgpSpeaker & {
  configs: string[];
  stopped: boolean;
  set(state: SpeakerState): void;
} {
  let current = initial;
  const fake = {
    configs: [] as string[],
    stopped: false,
    async start(config: string) {
      fake.configs.push(config);
      fake.stopped = false;
    },
    async state() {
      return fake.stopped ? { ...current, running: false, health: "down" as const } : current;
    },
    async stop() {
      fake.stopped = true;
    },
    set(state: SpeakerState) {
      current = state;
    },
  };
  return fake;
}
