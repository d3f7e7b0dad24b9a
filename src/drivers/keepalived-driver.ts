/**
 * Adapter: the keepalived engine behind the `Announcer` interface (announcer.ts;
 * docs/vip-announce.md "The keepalived engine", "Supervision"). It renders the
 * configuration (keepalived-config.ts, pure), writes it and the track files under
 * `stateDir`, runs keepalived in the foreground with its own pid files, reloads it with
 * SIGHUP only when the rendered configuration changed, reads its state transitions from
 * the notify FIFO (parsed by keepalived-state.ts) and supervises it:
 *
 *   - keepalived dies (SIGKILL, OOM): it leaves its VIP addresses on the interface, where the
 *     kernel would go on answering ARP beside the peer that takes over. The driver removes
 *     them at once, then starts keepalived again (1 s, doubling to 30 s while it keeps dying);
 *     the restarted keepalived starts in BACKUP and takes its instances back by preemption.
 *   - this process dies and keepalived runs on: keepalived keeps answering, the kernel keeps
 *     forwarding with the last table (the same on every LB host), so nothing moves. The next
 *     `passlb lb` adopts it (pid file + /proc cmdline naming our configuration), re-renders,
 *     and reloads only if something changed.
 *   - graceful stop: every track file gets the not-ready penalty, so each peer that is ready
 *     outranks this host and preempts; once no instance here is MASTER (or `handoverMs`
 *     passed) keepalived gets SIGTERM, which sends priority-0 adverts for what it still held
 *     (RFC 5798 §6.4.3) and removes its addresses.
 *
 * Does not decide readiness or priorities; files and processes only.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { rename, writeFile } from "node:fs/promises";
import { Socket } from "node:net";
import { join } from "node:path";
import type {
  AnnounceInput,
  Announcer,
  AnnouncerEvent,
  AnnouncerStatus,
  EngineState,
  PeerAddresses,
  VipReadiness,
} from "../announce/announcer.ts";
import {
  type KeepalivedInput,
  type KeepalivedInstance,
  NOT_READY_PENALTY,
  renderKeepalived,
} from "../announce/keepalived-config.ts";
import {
  announcerStatus,
  type InstanceState,
  parseNotifyLine,
  stateFromAddresses,
} from "../announce/keepalived-state.ts";
import type { VipAddresses } from "../announce/vip-addresses.ts";

export interface KeepalivedDriverOptions {
  readonly self: string;
  readonly interface: string;
  /** the configured LB hosts (`--peers`); an input's `peers` replaces them */
  readonly peers: PeerAddresses;
  readonly stateDir: string;
  readonly advertMs: number;
  /** graceful stop: the longest wait for the peers to take over before keepalived stops */
  readonly handoverMs: number;
  /** how to run keepalived (default `["keepalived"]`; tests: `["ip", "netns", "exec", NS, "keepalived"]`) */
  readonly command?: readonly string[];
  readonly addresses: VipAddresses;
  readonly onEvent?: (e: AnnouncerEvent) => void;
  /** `--vrid-range` and `--garp-refresh-s`/`--garp-refresh-repeat` (keepalived-config.ts) */
  readonly vridRange?: KeepalivedInput["vridRange"];
  readonly garpRefresh?: KeepalivedInput["garpRefresh"];
}

export interface KeepalivedPaths {
  readonly config: string;
  readonly pid: string;
  readonly vrrpPid: string;
  readonly fifo: string;
  readonly trackDir: string;
  readonly log: string;
}

export function keepalivedPaths(stateDir: string): KeepalivedPaths {
  return {
    config: join(stateDir, "keepalived.conf"),
    pid: join(stateDir, "keepalived.pid"),
    vrrpPid: join(stateDir, "keepalived-vrrp.pid"),
    fifo: join(stateDir, "notify.fifo"),
    trackDir: join(stateDir, "track"),
    log: join(stateDir, "keepalived.log"),
  };
}

/** the process exists and is not a zombie (an adopted keepalived's parent, the dead passlb,
 * is gone, and whoever inherited it may reap it late: kill(pid, 0) succeeds on a zombie) */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    // /proc/PID/stat: "pid (comm) S …", the state after the last ')'
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MAX_BACKOFF_MS = 30_000;

export class KeepalivedDriver implements Announcer {
  readonly #o: KeepalivedDriverOptions;
  readonly #paths: KeepalivedPaths;
  #peers: PeerAddresses;
  #input: AnnounceInput = { vips: [], generation: 0 };
  #instances: readonly KeepalivedInstance[] = [];
  #config = "";
  #tracks = new Map<string, string>();
  readonly #states = new Map<string, InstanceState>();
  #engine: EngineState = "stopped";
  #detail: string | undefined;
  #pid: number | undefined;
  #child: ChildProcess | undefined;
  #watch: ReturnType<typeof setInterval> | undefined;
  #restart: ReturnType<typeof setTimeout> | undefined;
  #backoffMs = 1000;
  #spawnedAt = 0;
  #fifo: Socket | undefined;
  #stopping = false;
  #serial: Promise<unknown> = Promise.resolve();
  #lastIssues = "";

  constructor(options: KeepalivedDriverOptions) {
    this.#o = options;
    this.#paths = keepalivedPaths(options.stateDir);
    this.#peers = options.peers;
  }

  get paths(): KeepalivedPaths {
    return this.#paths;
  }

  async start(input: AnnounceInput): Promise<void> {
    const [cmd, ...pre] = this.#o.command ?? ["keepalived"];
    const version = spawnSync(cmd!, [...pre, "--version"], { encoding: "utf8" });
    if (version.error || version.status !== 0)
      throw new Error(
        `${[cmd, ...pre].join(" ")} cannot run (${version.error?.message ?? version.stderr.trim()}): install Debian's keepalived package or pass --keepalived PATH`,
      );
    mkdirSync(this.#paths.trackDir, { recursive: true });
    await this.#o.addresses.prepare();
    this.#engine = "starting";
    await this.#render(input);
    const problem = this.#configTest(this.#config);
    if (problem) throw new Error(`keepalived refuses the rendered configuration: ${problem}`);
    await this.#openFifo();
    const adopted = this.#adoptable();
    if (adopted !== undefined) {
      this.#pid = adopted;
      const on = await this.#o.addresses.onInterface();
      for (const [name, s] of stateFromAddresses(this.#instances, on)) this.#states.set(name, s);
      this.#setEngine("running", `adopted keepalived ${adopted}`);
      const previous = existsSync(this.#paths.config) ? readFileSync(this.#paths.config, "utf8") : "";
      if (previous !== this.#config) await this.#writeConfigAndReload(previous);
      this.#watchAdopted(adopted);
    } else {
      await this.#writeConfig();
      await this.#spawn();
    }
  }

  update(input: AnnounceInput): Promise<void> {
    const next = this.#serial.then(async () => {
      if (this.#stopping) return;
      const previous = this.#config;
      const before = new Map(this.#instances.flatMap((i) => i.vips.map((v) => [v, i.name] as const)));
      await this.#render(input);
      if (previous === this.#config) return;
      // VIPs that change instance (the host list changed, so every order did) need two steps
      const moved = this.#instances.flatMap((i) =>
        i.vips.filter((v) => before.has(v) && before.get(v) !== i.name),
      );
      if (moved.length > 0 && this.#pid !== undefined) await this.#reloadMoving(previous, moved);
      else await this.#writeConfigAndReload(previous);
    });
    this.#serial = next.catch((error) => this.#o.onEvent?.({ kind: "failed", error }));
    return this.#serial as Promise<void>;
  }

  status(): AnnouncerStatus {
    return announcerStatus({
      host: this.#o.self,
      engine: this.#engine,
      ...(this.#detail === undefined ? {} : { detail: this.#detail }),
      ...(this.#pid === undefined ? {} : { pid: this.#pid }),
      generation: this.#input.generation,
      instances: this.#instances,
      states: this.#states,
      readiness: this.#input.vips,
    });
  }

  async stop(options: { readonly graceful: boolean }): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    await this.#serial;
    if (this.#restart) clearTimeout(this.#restart);
    if (this.#watch) clearInterval(this.#watch);
    if (!options.graceful) {
      // keepalived runs on; the next process adopts it
      this.#child?.removeAllListeners("exit");
      this.#closeFifo();
      return;
    }
    this.#setEngine("stopping");
    const stoppingVips: VipReadiness[] = this.#input.vips.map((v) => ({
      ...v,
      ready: false,
      reason: "stopping",
      detail: "passlb lb is stopping",
    }));
    this.#input = { ...this.#input, vips: stoppingVips };
    await Promise.all(
      this.#instances.map((i) => this.#writeTrack(i.trackFile, `${NOT_READY_PENALTY}\n`, true)),
    );
    const deadline = Date.now() + this.#o.handoverMs;
    while (Date.now() < deadline && [...this.#states.values()].some((s) => s.state === "MASTER"))
      await sleep(20);
    const pid = this.#pid;
    if (pid !== undefined && alive(pid)) {
      process.kill(pid, "SIGTERM");
      const until = Date.now() + 5000;
      while (alive(pid) && Date.now() < until) await sleep(20);
      if (alive(pid)) process.kill(pid, "SIGKILL");
    }
    await this.#cleanAddresses("keepalived stopped");
    this.#setEngine("stopped");
    this.#closeFifo();
  }

  // ---- rendering and files ----

  async #render(input: AnnounceInput): Promise<void> {
    if (input.peers) this.#peers = input.peers;
    this.#input = input;
    const r = renderKeepalived(this.#renderInput());
    const issues = r.issues.map((i) => `${i.code}: ${i.message}`).join("; ");
    if (issues !== this.#lastIssues) {
      this.#lastIssues = issues;
      if (issues) this.#o.onEvent?.({ kind: "failed", error: new Error(issues) });
    }
    this.#instances = r.instances;
    this.#config = r.config;
    for (const [path, content] of r.trackFiles) await this.#writeTrack(path, content);
  }

  #renderInput(): KeepalivedInput {
    return {
      self: this.#o.self,
      interface: this.#o.interface,
      peers: this.#peers,
      vips: this.#input.vips,
      advertMs: this.#o.advertMs,
      fifo: this.#paths.fifo,
      trackDir: this.#paths.trackDir,
      ...(this.#o.vridRange && { vridRange: this.#o.vridRange }),
      ...(this.#o.garpRefresh && { garpRefresh: this.#o.garpRefresh }),
    };
  }

  /** write-then-rename, so keepalived (inotify) never reads a half-written number */
  async #writeTrack(path: string, content: string, force = false): Promise<void> {
    if (!force && this.#tracks.get(path) === content && existsSync(path)) return;
    await writeFile(`${path}.tmp`, content);
    await rename(`${path}.tmp`, path);
    this.#tracks.set(path, content);
  }

  async #writeConfig(): Promise<void> {
    await writeFile(`${this.#paths.config}.tmp`, this.#config);
    await rename(`${this.#paths.config}.tmp`, this.#paths.config);
  }

  /** `keepalived --config-test` on a text; the problem, or undefined when it passes */
  #configTest(text: string): string | undefined {
    const [cmd, ...pre] = this.#o.command ?? ["keepalived"];
    const file = `${this.#paths.config}.test`;
    writeFileSync(file, text);
    const r = spawnSync(cmd!, [...pre, "--config-test", "--use-file", file], { encoding: "utf8" });
    rmSync(file, { force: true });
    return r.status === 0 ? undefined : `${r.stdout}${r.stderr}`.trim().slice(0, 2000) || `exit ${r.status}`;
  }

  async #writeConfigAndReload(previous: string): Promise<void> {
    // a configuration keepalived refuses is not applied: the running one stays
    const problem = this.#configTest(this.#config);
    if (problem) {
      this.#o.onEvent?.({
        kind: "failed",
        error: new Error(`keepalived refuses the new configuration, kept the running one: ${problem}`),
      });
      this.#config = previous;
      return;
    }
    await this.#writeConfig();
    const names = (text: string) =>
      new Set([...text.matchAll(/^vrrp_instance (\S+) \{/gm)].map((m) => m[1]!));
    const before = names(previous);
    const after = names(this.#config);
    for (const n of before) if (!after.has(n)) this.#states.delete(n);
    const block = (text: string, n: string) =>
      new RegExp(`^vrrp_instance ${n} \\{[\\s\\S]*?^\\}`, "m").exec(text)?.[0] ?? "";
    this.#o.onEvent?.({
      kind: "reloaded",
      added: [...after].filter((n) => !before.has(n)).length,
      removed: [...before].filter((n) => !after.has(n)).length,
      changed: [...after].filter((n) => before.has(n) && block(previous, n) !== block(this.#config, n))
        .length,
    });
    if (this.#pid !== undefined && alive(this.#pid)) process.kill(this.#pid, "SIGHUP");
  }

  // ---- the process ----

  /**
   * A reload in two steps for VIPs that change instance: first a configuration without
   * them (keepalived removes them with their old instances), then, once they are off the
   * interface, the full one (keepalived adds them to their new instances). Done in one
   * step, keepalived 2.2.7 may add a moved VIP to its new, already-master instance and then
   * remove it with the old one, leaving a master without its address.
   */
  async #reloadMoving(previous: string, moved: readonly string[]): Promise<void> {
    const interim = renderKeepalived({
      ...this.#renderInput(),
      vips: this.#input.vips.filter((v) => !moved.includes(v.vip)),
    }).config;
    const full = this.#config;
    this.#config = interim;
    await this.#writeConfigAndReload(previous);
    const until = Date.now() + 1000;
    while (Date.now() < until) {
      const on = await this.#o.addresses.onInterface();
      if (!moved.some((v) => on.has(v))) break;
      await sleep(10);
    }
    this.#config = full;
    await this.#writeConfigAndReload(interim);
  }

  /** a keepalived left running by an earlier passlb with our configuration */
  #adoptable(): number | undefined {
    try {
      const pid = Number(readFileSync(this.#paths.pid, "utf8").trim());
      if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      return cmdline.some((a) => a.endsWith("keepalived")) && cmdline.includes(this.#paths.config)
        ? pid
        : undefined;
    } catch {
      return undefined;
    }
  }

  async #spawn(): Promise<void> {
    // whatever an earlier keepalived left on the interface goes first: the new one starts
    // in BACKUP and must not have the kernel answer for VIPs a peer holds
    await this.#cleanAddresses("keepalived was not running");
    this.#states.clear();
    // a SIGKILLed keepalived leaves its pid files; while its zombie is not reaped yet,
    // keepalived takes the pid for a running daemon and exits at once ("already running")
    for (const f of [this.#paths.pid, this.#paths.vrrpPid]) rmSync(f, { force: true });
    const log = openSync(this.#paths.log, "a");
    const [cmd, ...pre] = this.#o.command ?? ["keepalived"];
    const child = spawn(
      cmd!,
      [
        ...pre,
        "--dont-fork",
        "--log-console",
        "--log-detail",
        "--no-syslog",
        "--vrrp",
        // a dead VRRP child ends keepalived (no respawn by its parent): passlb, the one
        // supervisor, sees the exit, removes the addresses the child left and restarts it
        "--dont-respawn",
        "--use-file",
        this.#paths.config,
        "--pid",
        this.#paths.pid,
        "--vrrp_pid",
        this.#paths.vrrpPid,
      ],
      // its own process group and its output in a file: it outlives this process
      { detached: true, stdio: ["ignore", log, log] },
    );
    closeSync(log);
    child.unref();
    this.#child = child;
    this.#spawnedAt = Date.now();
    child.on("error", (e) => this.#exited(`could not start keepalived: ${e.message}`));
    child.on("exit", (code, signal) => this.#exited(`keepalived exited (${signal ?? `code ${code}`})`));
    if (child.pid !== undefined) {
      this.#pid = child.pid;
      this.#setEngine("running");
    }
  }

  #watchAdopted(pid: number): void {
    this.#watch = setInterval(() => {
      if (alive(pid)) return;
      clearInterval(this.#watch);
      this.#watch = undefined;
      this.#exited("adopted keepalived exited");
    }, 100);
    this.#watch.unref();
  }

  #exited(why: string): void {
    this.#child = undefined;
    this.#pid = undefined;
    if (this.#stopping) return;
    this.#setEngine("restarting", why);
    for (const n of this.#states.keys()) this.#states.set(n, { state: "DOWN", priority: 0, source: "none" });
    // a keepalived that ran for a minute starts the backoff again from 1 s
    if (Date.now() - this.#spawnedAt > 60_000) this.#backoffMs = 1000;
    const wait = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, MAX_BACKOFF_MS);
    void this.#cleanAddresses(why).finally(() => {
      this.#restart = setTimeout(() => {
        this.#restart = undefined;
        if (this.#stopping) return;
        this.#serial = this.#serial
          .then(() => this.#writeConfig())
          .then(() => this.#spawn())
          .catch((error) => this.#o.onEvent?.({ kind: "failed", error }));
      }, wait);
    });
  }

  /** removes every VIP of our instances still on the interface (keepalived is not running) */
  async #cleanAddresses(why: string): Promise<void> {
    try {
      const on = await this.#o.addresses.onInterface();
      const vips = this.#input.vips.map((v) => v.vip).filter((v) => on.has(v));
      for (const v of vips) await this.#o.addresses.remove(v);
      if (vips.length > 0) this.#o.onEvent?.({ kind: "cleaned", vips, why });
    } catch (error) {
      this.#o.onEvent?.({ kind: "failed", error });
    }
  }

  #setEngine(state: EngineState, detail?: string): void {
    this.#engine = state;
    if (detail !== undefined) this.#detail = detail;
    this.#o.onEvent?.({
      kind: "engine",
      state,
      ...(detail === undefined ? {} : { detail }),
      ...(this.#pid === undefined ? {} : { pid: this.#pid }),
    });
  }

  // ---- the notify FIFO ----

  async #openFifo(): Promise<void> {
    if (!existsSync(this.#paths.fifo)) {
      const r = spawnSync("mkfifo", ["-m", "0600", this.#paths.fifo], { encoding: "utf8" });
      if (r.status !== 0) throw new Error(`mkfifo ${this.#paths.fifo}: ${r.stderr || r.error?.message}`);
    }
    // read-write and non-blocking: the open never waits for a writer and the read end never
    // sees end-of-file when keepalived restarts
    const fd = openSync(this.#paths.fifo, constants.O_RDWR | constants.O_NONBLOCK);
    const socket = new Socket({ fd, readable: true, writable: false });
    let buffered = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      buffered += chunk;
      let nl = buffered.indexOf("\n");
      while (nl >= 0) {
        this.#notified(buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
        nl = buffered.indexOf("\n");
      }
    });
    socket.on("error", (error) => this.#o.onEvent?.({ kind: "failed", error }));
    socket.unref();
    this.#fifo = socket;
  }

  #closeFifo(): void {
    this.#fifo?.destroy();
    this.#fifo = undefined;
  }

  #notified(line: string): void {
    const n = parseNotifyLine(line);
    if (n?.kind !== "INSTANCE") return;
    const instance = this.#instances.find((i) => i.name === n.name);
    // an event, not a state: the master heard a lower-priority master (a healed partition)
    if (n.state !== "MASTER_RX_LOWER_PRI")
      this.#states.set(n.name, { state: n.state, priority: n.priority, source: "fifo" });
    this.#o.onEvent?.({ kind: "state", group: n.name, state: n.state, vips: instance?.vips ?? [] });
  }
}
