/**
 * Adapter: everything `passlb up` runs in one process, for a folder of manifests — the
 * echo pods, one node agent per node (quickstart-agent.ts: a NodeAgent with the userspace
 * node proxy and kube-proxy-compatible health servers: /healthz, /livez, healthCheckNodePorts),
 * and the LB: the userspace LB host (quickstart-lb.ts over lb-host/build-userspace-lb-host.ts:
 * proxy, prober, input, reporter as one `LbHost`) whose input is a `PushedSource` (cluster/pushed-source.ts)
 * — all after the loopback rewrite (loopback-rewrite.ts). The folder is polled: when a file
 * changes, the whole folder is read again and every part is brought to the new desired
 * state (level-triggered); input with problems keeps the last good state running.
 *
 * Flow: snapshot → echo pods; snapshot → nodePortRoutes(node) → each node proxy;
 * snapshot → pushed to the LB host (planSnapshot(ipMode Proxy) → serviceForwarding(plan,
 * prober) → proxy, lb-host/userspace-lb-sync.ts). Stopped in one order: the LB host, the
 * agents, the pods. Deliberately not here: the terminal, signals, the lock — up-command.ts
 * does those; the LB host's own lines (up-command.ts prints passlb up's).
 */
import { PushedSource } from "../cluster/pushed-source.ts";
import { manifestSignature } from "../cluster/watch-manifests.ts";
import { serviceForwarding } from "../forwarding/forwarding-state.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { TcpPlumbingChoice } from "../lb-host/userspace/tcp-plumbing.ts";
import type { LbEvent } from "../lb-host/userspace/userspace-lb.ts";
import type { UserspaceLbHost } from "../lb-host/userspace-host/build-userspace-lb-host.ts";
import { cidrContains, parseCidr, parseIp } from "../net/ip.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import type { Observer } from "../web/observer.ts";
import { EchoPods, echoPodSpecs } from "./echo-pods.ts";
import { readFolderSnapshot } from "./folder-snapshot.ts";
import type { LiveService, LiveState } from "./live-view.ts";
import { loopbackSnapshot, type RewriteNote } from "./loopback-rewrite.ts";
import { QuickstartAgent } from "./quickstart-agent.ts";
import { quickstartLb } from "./quickstart-lb.ts";
import { RecentConnections } from "./recent-connections.ts";

export interface QuickstartOptions {
  readonly dir: string;
  readonly seed?: number;
  /** health probe interval override (default 1000 ms) */
  readonly probeIntervalMs?: number;
  /** folder poll period (default 1000 ms) */
  readonly pollMs?: number;
  readonly windowMs?: number;
  readonly udpIdleMs?: number;
  readonly now?: () => number;
  /** progress and problems, one line each */
  readonly log: (line: string) => void;
  /** metrics, JSON logs and the dashboard (src/web/observer.ts) */
  readonly observer?: Observer;
  /** the LB's TCP plumbing (tcp-plumbing.ts): node:net unless the experimental one is asked for */
  readonly tcp?: TcpPlumbingChoice;
}

export interface QuickstartStart {
  readonly ok: boolean;
  readonly notes: readonly RewriteNote[];
  readonly errors: readonly string[];
}

const MAX_EVENTS = 6;
/** the agents' health answers go stale (503) this long after the folder was last applied,
 * as kube-proxy's do after 2 × its sync period; the folder poll refreshes them */
const HEALTH_TIMEOUT_MS = 60_000;

export class QuickstartRun {
  readonly #o: QuickstartOptions;
  readonly #now: () => number;
  readonly #seed: number;
  /** the LB: the userspace LB host, fed what this run pushes */
  readonly #lb: UserspaceLbHost;
  readonly #lbInput = new PushedSource();
  readonly #pods = new EchoPods();
  readonly #agents = new Map<string, QuickstartAgent>();
  readonly #stopped = new Set<string>();
  readonly #recent: RecentConnections;
  readonly #events: string[] = [];
  readonly startedAt: number;
  #snapshot: Snapshot | undefined;
  #signature = "";
  #poll: ReturnType<typeof setInterval> | undefined;
  #busy: Promise<void> = Promise.resolve();
  #closed = false;
  #zones: Array<{ zone: string; cidr: NonNullable<ReturnType<typeof parseCidr>> }> = [];

  constructor(options: QuickstartOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#seed = options.seed ?? 0x5eed;
    this.startedAt = this.#now();
    this.#recent = new RecentConnections({ windowMs: options.windowMs ?? 10_000 });
    this.#lb = quickstartLb({
      seed: this.#seed,
      tcp: options.tcp ?? "net",
      probeIntervalMs: options.probeIntervalMs ?? 1000,
      udpIdleMs: options.udpIdleMs ?? 30_000,
      now: this.#now,
      clientZone: (a) => this.#clientZone(a),
      onEvent: (e) => this.#onLbEvent(e),
      observer: options.observer,
      input: this.#lbInput,
    });
  }

  get plans(): readonly LoadBalancerPlan[] {
    return this.#lb.sync.plans;
  }

  /** the LB's TCP plumbing: "libuv" or "net" (tcp-plumbing.ts) */
  get tcpPlumbing(): "libuv" | "net" {
    return this.#lb.tcpPlumbing;
  }

  get snapshot(): Snapshot | undefined {
    return this.#snapshot;
  }

  async start(): Promise<QuickstartStart> {
    await this.#lb.host.start();
    const loaded = await this.#load();
    if (!loaded.snapshot) return { ok: false, notes: [], errors: loaded.errors };
    const errors = await this.#apply(loaded.snapshot);
    this.#poll = setInterval(() => this.#queue(() => this.#checkFolder()), this.#o.pollMs ?? 1000);
    return { ok: errors.length === 0, notes: loaded.notes, errors };
  }

  /** Stops one node's agent (a node failure) until `startAgent`; the prober notices. */
  stopAgent(node: string): Promise<void> {
    return this.#queue(async () => {
      this.#stopped.add(node);
      const a = this.#agents.get(node);
      this.#agents.delete(node);
      await a?.stop();
      this.#event(`agent on ${node} stopped`, "agent_stopped", "warning");
    });
  }

  startAgent(node: string): Promise<void> {
    return this.#queue(async () => {
      this.#stopped.delete(node);
      if (this.#snapshot) await this.#applyAgents(this.#snapshot);
    });
  }

  /** Reads the folder again now (the poll does this on changes). */
  reload(): Promise<void> {
    return this.#queue(() => this.#checkFolder(true));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#poll) clearInterval(this.#poll);
    await this.#busy.catch(() => {});
    await this.#lb.host.stop(); // the input, the prober, then the proxy (userspace-host/build-userspace-lb-host.ts)
    await Promise.all([...this.#agents.values()].map((a) => a.stop()));
    this.#agents.clear();
    await this.#pods.close();
  }

  liveState(): LiveState {
    const now = this.#now();
    const services: LiveService[] = [];
    const { lookup } = this.#lb;
    for (const plan of this.plans) {
      const fw = serviceForwarding(plan, lookup, { seed: this.#seed });
      const first = fw.listeners[0];
      const active = new Set(first?.backends.map((b) => b.node) ?? []);
      const check = plan.healthChecks[0];
      const counts = this.#recent.counts(plan.service, now);
      const podNodes = new Map<string, string>();
      for (const p of this.#snapshot?.pods ?? [])
        podNodes.set(`${p.metadata.namespace ?? "default"}/${p.metadata.name ?? ""}`, p.spec.nodeName ?? "");
      const pods = [...counts.keys()]
        .sort()
        .map((pod) => ({ pod, node: podNodes.get(pod) ?? "?", connections: counts.get(pod)! }));
      const notes: string[] = [];
      if (plan.weighted) notes.push("weighted");
      if (plan.zonalAffinity) notes.push("zonal");
      if (plan.sessionAffinity.type === "ClientIP") notes.push("ClientIP affinity");
      if (plan.sourceRanges.length > 0) notes.push(`from ${plan.sourceRanges.join(" ")}`);
      services.push({
        service: plan.service,
        listeners: plan.vips.flatMap((v) =>
          plan.listeners.map((l) => `${l.protocol} ${v.address}:${l.port}`),
        ),
        policy: plan.externalTrafficPolicy,
        notes,
        failOpen: first?.failOpen ?? false,
        nodes: plan.members.map((m) => {
          const h = check ? lookup(plan.service, check.id, m.node) : { state: "unknown" as const };
          const weight = check?.readsWeight && h.weight !== undefined ? h.weight : m.weight;
          return { node: m.node, zone: m.zone, health: h.state, weight, active: active.has(m.node) };
        }),
        pods,
      });
    }
    return {
      now,
      startedAt: this.startedAt,
      windowSeconds: Math.round(this.#recent.windowMs / 1000),
      services,
      events: [...this.#events],
    };
  }

  #queue(fn: () => Promise<void>): Promise<void> {
    const next = this.#busy.then(() => (this.#closed ? undefined : fn()));
    this.#busy = next.catch((e) => this.#o.log(`error: ${(e as Error).message}`));
    return this.#busy;
  }

  #event(text: string, event = "quickstart", severity: "info" | "warning" = "info"): void {
    this.#o.observer?.note({ event, severity, message: text });
    const t = new Date(this.#now()).toISOString().slice(11, 19);
    this.#events.push(`${t} ${text}`);
    if (this.#events.length > MAX_EVENTS) this.#events.shift();
  }

  #clientZone(address: string): string | undefined {
    const ip = parseIp(address);
    if (!ip) return undefined;
    return this.#zones.find((z) => cidrContains(z.cidr, ip))?.zone;
  }

  #onLbEvent(e: LbEvent): void {
    if (e.kind === "denied") this.#recent.record(e.service, "(refused: source range)", this.#now());
    else if (e.kind === "no_backend") this.#recent.record(e.service, "(no backend)", this.#now());
  }

  async #load(): Promise<{ snapshot?: Snapshot; notes: RewriteNote[]; errors: string[] }> {
    const loaded = await readFolderSnapshot(this.#o.dir);
    this.#signature = loaded.signature;
    if (!loaded.snapshot) return { notes: [], errors: [...loaded.errors] };
    const { snapshot, notes } = loopbackSnapshot(loaded.snapshot);
    return { snapshot, notes, errors: [] };
  }

  async #checkFolder(force = false): Promise<void> {
    const sig = await manifestSignature([this.#o.dir]).catch(() => "");
    if (!force && sig === this.#signature) {
      // the agents' rules still match the folder: a successful sync, as kube-proxy's periodic one
      for (const a of this.#agents.values()) a.synced();
      return;
    }
    const loaded = await this.#load();
    if (!loaded.snapshot) {
      for (const a of this.#agents.values()) a.queued();
      this.#event(
        `folder has problems; keeping the last good state: ${loaded.errors[0] ?? ""}`,
        "input_read",
        "warning",
      );
      this.#o.log(`reload: ${loaded.errors.length} problem(s); keeping the last good state`);
      for (const e of loaded.errors) this.#o.log(`  ${e}`);
      return;
    }
    const errors = await this.#apply(loaded.snapshot);
    this.#event(
      `reloaded ${this.#o.dir}${errors.length > 0 ? ` (${errors.length} error(s))` : ""}`,
      "reload",
    );
    for (const e of errors) this.#o.log(`error: ${e}`);
  }

  async #apply(snapshot: Snapshot): Promise<string[]> {
    this.#lbInput.changed(); // the programming latency counts from the read, as it always did
    this.#snapshot = snapshot;
    this.#zones = snapshot.config.zones.flatMap((z) =>
      z.clientCIDRs.map((c) => parseCidr(c, true)).flatMap((cidr) => (cidr ? [{ zone: z.name, cidr }] : [])),
    );
    const errors = [...(await this.#pods.update(echoPodSpecs(snapshot.pods)))];
    errors.push(...(await this.#applyAgents(snapshot)));
    errors.push(...(await this.#applyLb(snapshot)));
    return errors;
  }

  async #applyAgents(snapshot: Snapshot): Promise<string[]> {
    const errors: string[] = [];
    const wanted = new Map<string, string>();
    for (const n of snapshot.nodes) {
      const name = n.metadata.name ?? "";
      const addr = n.status?.addresses?.find(
        (a) => a.type === "InternalIP" && !a.address.includes(":"),
      )?.address;
      if (name && addr && !this.#stopped.has(name)) wanted.set(name, addr);
    }
    for (const [name, a] of this.#agents)
      if (wanted.get(name) !== a.address) {
        this.#agents.delete(name);
        await a.stop();
      }
    for (const [name, address] of wanted) {
      let a = this.#agents.get(name);
      if (!a) {
        a = new QuickstartAgent({
          node: name,
          address,
          seed: this.#seed,
          healthTimeoutMs: HEALTH_TIMEOUT_MS,
          udpIdleMs: this.#o.udpIdleMs ?? 30_000,
          now: this.#now,
          onProxyEvent: (e) => {
            if ((e.kind === "connection" || e.kind === "flow") && e.pod)
              this.#recent.record(e.service, e.pod, this.#now());
          },
          onFinding: (f) => this.#o.observer?.finding(f),
        });
        await a.start();
        this.#agents.set(name, a);
      }
      errors.push(...(await a.apply(snapshot)));
    }
    return errors;
  }

  /** the LB host plans `snapshot`, gives the prober its targets and updates the proxy; the proxy's errors */
  async #applyLb(snapshot: Snapshot): Promise<string[]> {
    await this.#lbInput.push(snapshot);
    return this.#lb.sync.findings
      .filter((f) => f.severity === "error")
      .map((f) => `${f.subject}: ${f.message}`);
  }
}
