/**
 * Adapter: `passlb up --dataplane nftables` — the same folder of manifests, run in the
 * network-namespace lab (docs/lab.md) on the kernel data plane. The folder becomes a lab
 * topology and Service manifests (lab-rewrite.ts), written to a scratch folder; the lab
 * runner (src/lab/lab-runner.ts) builds the namespaces and starts the
 * echo pods, `passlb agent --dataplane nftables` per node and `passlb lb --dataplane
 * nftables`. Then this adds what the view needs: a relay from a Unix socket into the LB
 * namespace (src/lab/unix-relay.ts) for the LB's `/api/v1/state` and dashboard, and a
 * counter table per node for the pods' shares (lab-view.ts, lab-counters.ts).
 *
 * The folder is polled: Services and config follow at once; the lab follows pods and nodes
 * added, removed, moved or serving other ports (lab-reload.ts decides, lab-follow.ts
 * builds and tears down), and changed labels and readiness through its manifests; the
 * counter tables follow the pods. `close()` removes the whole lab (namespaces,
 * links, processes: labDown) and the scratch folder, also after a failed start.
 * Deliberately not here: the terminal, signals, the control port (up-command.ts, up-lab.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { manifestSignature } from "../cluster/watch-manifests.ts";
import { writeLayoutManifests, writeManifestFiles } from "../lab/lab-files.ts";
import type { LabLayout } from "../lab/lab-layout.ts";
import { defaultStateRoot, type LabState, labDown, labStatus, labUp } from "../lab/lab-runner.ts";
import type { Finding, LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import type { DashboardService, DashboardState } from "../web/dashboard-state.ts";
import { CounterWindow } from "./counter-window.ts";
import { type FolderSnapshot, readFolderSnapshot, readLabFolderView } from "./folder-snapshot.ts";
import { LabCounters } from "./lab-counters.ts";
import { followLabChange } from "./lab-follow.ts";
import { labReloadLayout } from "./lab-reload.ts";
import { labRewrite } from "./lab-rewrite.ts";
import { labLiveState } from "./lab-view.ts";
import { getJsonOverSocket, startLbRelay } from "./lb-dashboard-relay.ts";
import type { LiveState } from "./live-view.ts";

export interface QuickstartLabOptions {
  readonly dir: string;
  /** the lab's name (namespaces `plb-<name>-*`) */
  readonly name: string;
  /** the passlb checkout the lab's processes run from */
  readonly repoRoot: string;
  readonly stateRoot?: string;
  /** where the LB serves its dashboard inside its namespace */
  readonly lbDashboardPort?: number;
  readonly pollMs?: number;
  readonly sampleMs?: number;
  readonly windowMs?: number;
  /** how long removed pods and nodes keep running after the manifests drop them */
  readonly drainMs?: number;
  readonly log: (line: string) => void;
}

// [::]: /healthz answers on both families (the LB probes dual-stack nodes on each).
// The agents see the lab's folder change within about a second (manifest-folder-source.ts
// polls the files' signature), so a live reload needs no shorter sync period.
const AGENT_ARGS = ["--dataplane=nftables", "--healthz-bind-address=[::]:10256"];

export interface QuickstartLabStart {
  readonly ok: boolean;
  readonly notes: readonly Finding[];
  readonly errors: readonly string[];
}

const MAX_EVENTS = 6;

export class QuickstartLab {
  readonly #o: QuickstartLabOptions;
  readonly #window: CounterWindow;
  readonly #events: string[] = [];
  readonly startedAt = Date.now();
  #scratch: string | undefined;
  #state: LabState | undefined;
  #plans: readonly LoadBalancerPlan[] = [];
  #targets = new Map<string, Set<string>>();
  #podNodes = new Map<string, string>();
  readonly #counters = new LabCounters();
  #lb: DashboardState | undefined;
  #clients = new Map<string, string>();
  #signature = "";
  #timers: ReturnType<typeof setInterval>[] = [];
  #busy: Promise<void> = Promise.resolve();
  #closed = false;
  /** the lab started being built: close() removes it */
  #built = false;
  #sampling = false;

  constructor(options: QuickstartLabOptions) {
    this.#o = options;
    this.#window = new CounterWindow({ windowMs: options.windowMs ?? 10_000 });
  }

  get plans(): readonly LoadBalancerPlan[] {
    return this.#plans;
  }

  get state(): LabState | undefined {
    return this.#state;
  }

  /** whether the lab started being built (and so is removed by close()) */
  get built(): boolean {
    return this.#built;
  }

  /** lab zone → its client host */
  get clients(): ReadonlyMap<string, string> {
    return this.#clients;
  }

  /** the Unix socket that reaches the LB's dashboard */
  get lbSocket(): string | undefined {
    return this.#state ? join(this.#state.stateDir, "lb-dashboard.sock") : undefined;
  }

  get stateRoot(): string {
    return this.#o.stateRoot ?? defaultStateRoot(this.#o.repoRoot);
  }

  async start(): Promise<QuickstartLabStart> {
    const loaded = await this.#load();
    if (!loaded.snapshot) return { ok: false, notes: [], errors: loaded.errors };
    const rw = labRewrite(loaded.snapshot, { name: this.#o.name });
    if (rw.errors.length > 0) return { ok: false, notes: rw.notes, errors: [...rw.errors] };
    // a lab of this name with live processes belongs to someone: never tear it down
    // (namespaces whose processes are all gone are a crash's leftovers: labUp removes them)
    const status = labStatus(this.#o.name, { repoRoot: this.#o.repoRoot, stateRoot: this.stateRoot });
    if (status.namespaces.length > 0 && [...status.alive.values()].some((a) => a))
      return {
        ok: false,
        notes: rw.notes,
        errors: [
          `a lab named ${this.#o.name} is running (${status.namespaces.length} namespaces); choose another --lab-name, or remove it with passlb lab down --name ${this.#o.name}`,
        ],
      };
    this.#clients = new Map(rw.clients);
    this.#built = true;
    this.#scratch = mkdtempSync(join(tmpdir(), "plb-up-"));
    writeManifestFiles(this.#scratch, [["services.yaml", rw.manifests]]);
    writeFileSync(join(this.#scratch, "topology.yaml"), stringify(rw.topology));
    try {
      this.#state = await labUp(join(this.#scratch, "topology.yaml"), {
        repoRoot: this.#o.repoRoot,
        stateRoot: this.stateRoot,
        agentArgs: AGENT_ARGS,
        lbArgs: ["--dataplane=nftables", `--dashboard-address=127.0.0.1:${this.#o.lbDashboardPort ?? 9797}`],
        log: (l) => this.#o.log(`lab: ${l}`),
      });
      await startLbRelay({
        ns: this.#state.layout.lb.ns,
        socketPath: this.lbSocket!,
        to: `127.0.0.1:${this.#o.lbDashboardPort ?? 9797}`,
        repoRoot: this.#o.repoRoot,
        logPath: join(this.#state.stateDir, "logs", "lb.relay.log"),
      });
      this.#counters.install(this.#state.layout);
      await this.#readLabFolder(this.#state.manifestsDir);
    } catch (e) {
      return { ok: false, notes: rw.notes, errors: [(e as Error).message] };
    }
    this.#timers.push(setInterval(() => this.#queue(() => this.#checkFolder()), this.#o.pollMs ?? 1000));
    this.#timers.push(setInterval(() => void this.#sample(), this.#o.sampleMs ?? 1000));
    await this.#sample();
    return { ok: true, notes: rw.notes, errors: [] };
  }

  liveState(): LiveState {
    const lbEvents = (this.#lb?.events ?? []).map((e) => `${e.at.slice(11, 19)} lb: ${e.message}`);
    return labLiveState({
      now: Date.now(),
      startedAt: this.startedAt,
      windowSeconds: Math.round((this.#o.windowMs ?? 10_000) / 1000),
      plans: this.#plans,
      lb: this.#lb?.services as readonly DashboardService[] | undefined,
      recent: this.#window.recent(),
      targets: this.#targets,
      podNodes: this.#podNodes,
      events: [...this.#events, ...lbEvents].sort().slice(-MAX_EVENTS),
    });
  }

  /** Reads the folder again now (the poll does this on changes). */
  reload(): Promise<void> {
    return this.#queue(() => this.#checkFolder(true));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const t of this.#timers) clearInterval(t);
    await this.#busy.catch(() => {});
    if (this.#scratch) rmSync(this.#scratch, { recursive: true, force: true });
    if (!this.#built) return;
    const r = await labDown(this.#o.name, { repoRoot: this.#o.repoRoot, stateRoot: this.stateRoot });
    this.#o.log(`lab: removed ${r.namespaces.length} namespaces, stopped ${r.stopped} processes`);
  }

  #queue(fn: () => Promise<void>): Promise<void> {
    const next = this.#busy.then(() => (this.#closed ? undefined : fn()));
    this.#busy = next.catch((e) => this.#o.log(`error: ${(e as Error).message}`));
    return this.#busy;
  }

  #event(text: string): void {
    this.#events.push(`${new Date().toISOString().slice(11, 19)} ${text}`);
    if (this.#events.length > MAX_EVENTS) this.#events.shift();
  }

  async #sample(): Promise<void> {
    if (this.#closed || !this.#state || this.#sampling) return;
    this.#sampling = true;
    try {
      await this.#sampleNow();
    } finally {
      this.#sampling = false;
    }
  }

  async #sampleNow(): Promise<void> {
    this.#window.record(Date.now(), await this.#counters.sample());
    const state = await getJsonOverSocket(this.lbSocket!, "/api/v1/state");
    if (state) this.#lb = state as DashboardState;
  }

  async #load(): Promise<FolderSnapshot> {
    const loaded = await readFolderSnapshot(this.#o.dir);
    this.#signature = loaded.signature;
    return loaded;
  }

  async #checkFolder(force = false): Promise<void> {
    const state = this.#state;
    if (!state) return;
    const sig = await manifestSignature([this.#o.dir]).catch(() => "");
    if (!force && sig === this.#signature) return;
    const loaded = await this.#load();
    if (!loaded.snapshot) {
      this.#event(`folder has problems; keeping the last good state: ${loaded.errors[0] ?? ""}`);
      this.#o.log(`reload: ${loaded.errors.length} problem(s); keeping the last good state`);
      for (const e of loaded.errors) this.#o.log(`  ${e}`);
      return;
    }
    const rw = labRewrite(loaded.snapshot, {
      name: this.#o.name,
      zones: state.layout.zones.map((z) => z.name),
    });
    if (rw.errors.length > 0) {
      this.#event(`the lab cannot run the changed folder; keeping the last state: ${rw.errors[0]}`);
      this.#o.log(
        `reload: the lab cannot run the changed folder (${rw.errors.join("; ")}); keeping the last state`,
      );
      return;
    }
    const change = labReloadLayout(state.layout, rw.topology);
    const dir = state.manifestsDir;
    const publish = async (layout: LabLayout) => {
      writeLayoutManifests(dir, layout, rw.manifests, rw.services);
      await this.#readLabFolder(dir);
      this.#counters.install(layout);
      this.#clients = new Map(rw.clients);
      this.#event(`reloaded ${this.#o.dir}`);
    };
    try {
      await followLabChange(state, change, {
        repoRoot: this.#o.repoRoot,
        agentArgs: AGENT_ARGS,
        drainMs: this.#o.drainMs ?? 2000,
        publish,
        onState: (s) => {
          this.#state = s;
        },
        event: (text) => {
          this.#event(text);
          this.#o.log(`reload: ${text}`);
        },
      });
    } catch (e) {
      const text = `the lab could not follow the folder (${(e as Error).message}); it runs what it ran before; save the folder again to retry`;
      this.#event(text);
      this.#o.log(`reload: ${text}`);
      return;
    }
    for (const n of rw.notes)
      if (n.severity !== "info") {
        this.#event(`${n.code}: ${n.subject}: ${n.message}`);
        this.#o.log(`reload: ${n.code}: ${n.subject}: ${n.message}`);
      }
  }

  async #readLabFolder(dir: string): Promise<void> {
    ({ plans: this.#plans, targets: this.#targets, podNodes: this.#podNodes } = await readLabFolderView(dir));
  }
}
