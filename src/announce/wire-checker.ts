/**
 * Adapter: asks the segment who answers for each VIP, on a timer and soon after every
 * failover (docs/vip-announce.md "Checked from the wire"). Per round it
 *   1. reads this host's MAC on the segment interface (`ip -j link show dev IFACE`);
 *   2. learns the other LB hosts' MACs by asking for their segment addresses (the same
 *      tools), so an answer can be named by host;
 *   3. asks for every VIP — iputils `arping -b` (IPv4) and `ndisc6 -m` (IPv6), from this
 *      host's own segment address, never from a VIP (wire-answers.ts says why each flag) —
 *      at most `concurrency` at a time;
 *   4. judges each VIP (wire-verdict.ts: exactly one MAC, an LB host's), where this host
 *      counts its own kernel's answer from the VIP being on its interface (a host does not
 *      hear its own kernel answer its request on the wire).
 * A verdict that changed is reported through `onChange` (log, Event, dashboard) once a
 * second round `confirmMs` later agrees (`#confirm`). Tools that cannot run are an error in
 * the report, not a problem of a VIP.
 *
 * Does not decide who should hold a VIP (the engine's status says so) and opens no raw
 * socket of its own.
 */
import { spawn } from "node:child_process";
import type { PeerAddresses } from "./announcer.ts";
import { parseArping, parseNdisc6, type WireAnswers } from "./wire-answers.ts";
import { l2Verdict, type WireVipCheck } from "./wire-verdict.ts";

export interface WireTarget {
  readonly vip: string;
  readonly family: "IPv4" | "IPv6";
  /** the host the ranking prefers (the engine's `preferredHolder`) */
  readonly preferred?: string;
}

export interface WireCheckerOptions {
  readonly self: string;
  readonly interface: string;
  peers(): PeerAddresses;
  /** the VIPs to check, read at each round */
  targets(): readonly WireTarget[];
  /** the addresses on the interface now (this host's kernel answers for those) */
  onInterface(): Promise<ReadonlySet<string>>;
  /** 0: only when asked (`checkSoon`) */
  readonly periodMs: number;
  /** how long each tool listens for answers (ms, ≥ 100) */
  readonly listenMs?: number;
  /** run the tools inside this prefix (tests: `["ip", "netns", "exec", NS]`) */
  readonly prefix?: readonly string[];
  /** a changed verdict is confirmed by a second round this much later (default 1000 ms) */
  readonly confirmMs?: number;
  /** tools running at once (default 16) */
  readonly concurrency?: number;
  readonly now?: () => number;
  onChange?(check: WireVipCheck, before: WireVipCheck | undefined): void;
  /** after every round, with its report */
  onRound?(report: L2WireReport): void;
  onError?(message: string): void;
}

export interface L2WireReport {
  readonly checkedAt: number | null;
  readonly periodMs: number;
  readonly vips: readonly WireVipCheck[];
  readonly errors: readonly string[];
  /** VIPs whose changed verdict waits for its confirming round */
  readonly pending: readonly string[];
}

function run(cmd: readonly string[], timeoutMs: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd[0]!, cmd.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString();
    });
    child.stderr.on("data", (b: Buffer) => {
      out += b.toString();
    });
    child.on("error", (e) => {
      clearTimeout(timer);
      resolve({ code: null, out: `${cmd[0]}: ${e.message}` });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

export class WireChecker {
  readonly #o: WireCheckerOptions;
  #checks = new Map<string, WireVipCheck>();
  #errors: string[] = [];
  #checkedAt: number | null = null;
  #timer: ReturnType<typeof setInterval> | undefined;
  #soon: ReturnType<typeof setTimeout> | undefined;
  #round: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(options: WireCheckerOptions) {
    this.#o = options;
  }

  start(): void {
    if (this.#o.periodMs > 0) {
      this.#timer = setInterval(() => void this.check(), this.#o.periodMs);
      this.#timer.unref();
    }
    this.checkSoon(0);
  }

  /** a round after `delayMs` (after a failover: the new holder's gratuitous ARPs are out) */
  checkSoon(delayMs = 500): void {
    if (this.#stopped) return;
    clearTimeout(this.#soon);
    this.#soon = setTimeout(() => void this.check(), delayMs);
    this.#soon.unref();
  }

  /** one round now (or right after the one under way) */
  check(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (this.#round) {
      this.#again = true;
      return this.#round;
    }
    this.#round = this.#checkRound()
      .catch((e: unknown) => this.#error(`wire check failed: ${(e as Error).message}`))
      .finally(() => {
        this.#round = undefined;
        if (this.#again && !this.#stopped) {
          this.#again = false;
          void this.check();
        }
      });
    return this.#round;
  }

  report(): L2WireReport {
    return {
      checkedAt: this.#checkedAt,
      periodMs: this.#o.periodMs,
      vips: [...this.#checks.values()].sort((a, b) => (a.vip < b.vip ? -1 : 1)),
      errors: this.#errors,
      pending: [...this.#pending.keys()].sort(),
    };
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    clearTimeout(this.#soon);
    await this.#round;
  }

  async #checkRound(): Promise<void> {
    const errors: string[] = [];
    const peers = this.#o.peers();
    const mine = peers.get(this.#o.self) ?? {};
    const mac = await this.#ownMac();
    if (mac === undefined) errors.push(`no MAC address on ${this.#o.interface}`);
    const hostMacs = new Map<string, string>();
    const others = [...peers].filter(([h]) => h !== this.#o.self);
    const targets = this.#o.targets();
    const on = await this.#o.onInterface();
    const asked = new Map<string, WireAnswers>();
    // the peers' MACs and the VIPs in one go: a round listens about `listenMs` once
    const jobs: (() => Promise<void>)[] = [
      ...others.map(([host, a]) => async () => {
        const family = a.IPv4 !== undefined && mine.IPv4 !== undefined ? "IPv4" : "IPv6";
        const address = a[family];
        if (address === undefined || mine[family] === undefined) return;
        for (const m of (await this.#ask(address, family, mine[family]!)).macs) hostMacs.set(m, host);
      }),
      ...targets.map((t) => async () => {
        const source = mine[t.family];
        if (source !== undefined) asked.set(t.vip, await this.#ask(t.vip, t.family, source));
      }),
    ];
    await this.#limited(jobs, (job) => job());
    const next = new Map<string, WireVipCheck>();
    for (const t of targets) {
      const answers = asked.get(t.vip);
      if (answers === undefined || mac === undefined) continue;
      if (!answers.asked) errors.push(`${t.vip}: ${answers.error ?? "could not ask"}`);
      const verdict = l2Verdict({
        vip: t.vip,
        answers,
        self: { host: this.#o.self, mac },
        selfHolds: on.has(t.vip),
        hostMacs,
        ...(t.preferred !== undefined && { preferred: t.preferred }),
      });
      if (verdict) next.set(t.vip, verdict);
    }
    if (this.#stopped) return;
    this.#checks = this.#confirm(next);
    this.#checkedAt = (this.#o.now ?? Date.now)();
    for (const e of errors) if (!this.#errors.includes(e)) this.#o.onError?.(e);
    this.#errors = errors;
    this.#o.onRound?.(this.report());
  }

  /**
   * A changed verdict counts once a second round `confirmMs` later says the same: a VIP is
   * briefly unanswered while a segment starts (every instance listens in BACKUP first) and
   * briefly answered twice during a takeover, and neither is worth an Event. The first
   * verdict of a VIP that agrees is taken at once. Returns the confirmed verdicts.
   */
  #confirm(next: ReadonlyMap<string, WireVipCheck>): Map<string, WireVipCheck> {
    const confirmed = new Map<string, WireVipCheck>();
    let again = false;
    for (const [vip, check] of next) {
      const before = this.#checks.get(vip);
      const pending = this.#pending.get(vip);
      if ((before === undefined && check.problem === null) || before?.problem === check.problem) {
        this.#pending.delete(vip);
        if (before !== undefined && before.answers.length !== check.answers.length)
          this.#o.onChange?.(check, before);
        confirmed.set(vip, check);
      } else if (pending?.problem === check.problem) {
        this.#pending.delete(vip);
        this.#o.onChange?.(check, before);
        confirmed.set(vip, check);
      } else {
        this.#pending.set(vip, check);
        if (before !== undefined) confirmed.set(vip, before);
        again = true;
      }
    }
    for (const vip of [...this.#pending.keys()]) if (!next.has(vip)) this.#pending.delete(vip);
    if (again) this.checkSoon(this.#o.confirmMs ?? 1000);
    return confirmed;
  }
  readonly #pending = new Map<string, WireVipCheck>();

  async #ownMac(): Promise<string | undefined> {
    const r = await run(
      [...(this.#o.prefix ?? []), "ip", "-j", "link", "show", "dev", this.#o.interface],
      3000,
    );
    try {
      const rows = JSON.parse(r.out) as { address?: string }[];
      return rows[0]?.address?.toLowerCase();
    } catch {
      return undefined;
    }
  }

  #ask(address: string, family: "IPv4" | "IPv6", source: string): Promise<WireAnswers> {
    const listenMs = Math.max(this.#o.listenMs ?? 1000, 100);
    const prefix = this.#o.prefix ?? [];
    const cmd =
      family === "IPv4"
        ? // -c 3 -w S: up to 3 replies or S seconds, every request broadcast (-b)
          [
            ...prefix,
            "arping",
            "-b",
            "-I",
            this.#o.interface,
            "-s",
            source,
            "-c",
            "3",
            "-w",
            String(Math.ceil(listenMs / 1000)),
            address,
          ]
        : [
            ...prefix,
            "ndisc6",
            "-m",
            "-n",
            "-r",
            "1",
            "-w",
            String(listenMs),
            "-s",
            source,
            address,
            this.#o.interface,
          ];
    return run(cmd, listenMs + 3000).then((r) =>
      family === "IPv4" ? parseArping(r.out) : parseNdisc6(r.out),
    );
  }

  async #limited<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
    const queue = [...items];
    const workers = Array.from({ length: Math.min(this.#o.concurrency ?? 16, queue.length) }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
    });
    await Promise.all(workers);
  }

  #error(message: string): void {
    this.#errors = [message];
    this.#o.onError?.(message);
  }
}
