/**
 * The L2 announcement loop of one LB host (docs/vip-announce.md): every interval it sends
 * a heartbeat to its peers, works out who is live (peer-liveness.ts) and who holds which
 * VIP (vip-owners.ts), and takes the difference to the interface (vip-addresses.ts): VIPs
 * it won are added and announced (again one second later, in case the first was lost),
 * VIPs it lost are removed. A heartbeat from a peer that says goodbye triggers a pass at
 * once, so a graceful hand-over does not wait for the next tick.
 *
 * Start-up: nothing is taken for `deadAfterMs` (the peers' heartbeats arrive first), so a
 * restarted host never grabs VIPs a live peer holds; VIPs still on the interface from a
 * previous run are kept meanwhile, and announced again when the warm-up ends. Stop: goodbyes first, then `handoverMs` for the peers to
 * take over, then every VIP is released. Owns its timers; the decisions are the pure
 * modules'.
 */
import type { Clock, TimerHandle } from "../health/clock.ts";
import type { HeartbeatTransport } from "./heartbeat.ts";
import { type PeerHeard, peerLiveness } from "./peer-liveness.ts";
import type { VipAddresses } from "./vip-addresses.ts";
import { vipOwners, vipsOf } from "./vip-owners.ts";

export interface VipAnnouncerOptions {
  readonly self: string;
  /** every LB host of the segment, this one included */
  readonly hosts: readonly string[];
  readonly heartbeat: HeartbeatTransport;
  readonly addresses: VipAddresses;
  readonly clock: Clock;
  readonly intervalMs: number;
  readonly deadAfterMs: number;
  readonly handoverMs: number;
  /** how often held addresses have their lifetime renewed (vip-addresses.ts); default 1000 */
  readonly renewMs?: number;
  readonly quorum?: number;
  readonly onEvent?: (e: AnnounceEvent) => void;
}

export type AnnounceEvent =
  | { kind: "took"; vip: string; live: readonly string[] }
  | { kind: "released"; vip: string; reason: string }
  | { kind: "peer"; host: string; state: "up" | "down" | "bye" }
  | { kind: "cannot_hold"; reason: string }
  | { kind: "failed"; error: unknown };

export class VipAnnouncer {
  readonly #o: VipAnnouncerOptions;
  #hosts: readonly string[];
  readonly #heard = new Map<string, PeerHeard>();
  #vips: readonly string[] = [];
  #held = new Set<string>();
  #startedAt = 0;
  #leaving = false;
  #timer: TimerHandle | undefined;
  readonly #reannounce = new Set<TimerHandle>();
  #renewedAt = Number.NEGATIVE_INFINITY;
  #running: Promise<void> | undefined;
  #again = false;
  #lastLive = "";
  #lastReason = "ok";
  #warmedUp = false;

  constructor(options: VipAnnouncerOptions) {
    this.#o = options;
    this.#hosts = options.hosts;
  }

  /** The segment's LB hosts changed (Nodes labelled as LB hosts came or went). */
  setHosts(hosts: readonly string[]): void {
    this.#hosts = [...hosts];
    if (this.#startedAt !== 0) void this.reconcile();
  }

  /** VIPs currently held (as last applied). */
  get held(): readonly string[] {
    return [...this.#held].sort();
  }

  setVips(vips: readonly string[]): void {
    this.#vips = [...new Set(vips)].sort();
    if (this.#startedAt !== 0) void this.reconcile();
  }

  async start(): Promise<void> {
    const o = this.#o;
    await o.addresses.prepare();
    this.#held = new Set(await o.addresses.held(this.#vips));
    await o.heartbeat.start((m) => {
      const before = this.#heard.get(m.host);
      this.#heard.set(m.host, { at: o.clock.now(), bye: m.bye });
      if (m.bye) {
        if (!before?.bye) o.onEvent?.({ kind: "peer", host: m.host, state: "bye" });
        void this.reconcile();
      } else if (!before || before.bye || o.clock.now() - before.at >= o.deadAfterMs) void this.reconcile();
    });
    this.#startedAt = o.clock.now();
    this.#tick();
  }

  #tick = (): void => {
    if (this.#leaving) return;
    this.#o.heartbeat.send(false);
    void this.reconcile();
    this.#timer = this.#o.clock.setTimer(this.#tick, this.#o.intervalMs);
  };

  /** One pass (serialised: a call during a pass runs one more pass after it). */
  reconcile(): Promise<void> {
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = (async () => {
      do {
        this.#again = false;
        try {
          await this.#pass();
        } catch (error) {
          this.#o.onEvent?.({ kind: "failed", error });
        }
      } while (this.#again);
    })().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #pass(): Promise<void> {
    const o = this.#o;
    const now = o.clock.now();
    const liveness = peerLiveness({
      self: o.self,
      hosts: this.#hosts,
      heard: this.#heard,
      now,
      deadAfterMs: o.deadAfterMs,
      linkUp: await o.addresses.linkUp(),
      leaving: this.#leaving,
      ...(o.quorum === undefined ? {} : { quorum: o.quorum }),
    });
    const liveKey = liveness.live.join(",");
    let joined = false;
    if (liveKey !== this.#lastLive) {
      const before = new Set(this.#lastLive.split(",").filter((h) => h !== ""));
      joined = liveness.live.some((h) => h !== o.self && !before.has(h));
      for (const h of liveness.live)
        if (!before.has(h) && h !== o.self) o.onEvent?.({ kind: "peer", host: h, state: "up" });
      for (const h of before)
        if (!liveness.live.includes(h) && h !== o.self) o.onEvent?.({ kind: "peer", host: h, state: "down" });
      this.#lastLive = liveKey;
    }
    if (liveness.reason !== this.#lastReason) {
      if (!liveness.mayHold) o.onEvent?.({ kind: "cannot_hold", reason: liveness.reason });
      this.#lastReason = liveness.reason;
    }
    const warming = !this.#leaving && now - this.#startedAt < o.deadAfterMs;
    const want = new Set(vipsOf(vipOwners(liveness.live, this.#vips), o.self));
    for (const vip of [...this.#held]) {
      if (want.has(vip) || (warming && liveness.mayHold && this.#vips.includes(vip))) continue;
      await o.addresses.remove(vip);
      this.#held.delete(vip);
      o.onEvent?.({ kind: "released", vip, reason: liveness.mayHold ? "owner_changed" : liveness.reason });
    }
    // what stays held lives on: without renewals (the process died) the kernel drops it
    if (this.#held.size > 0 && now - this.#renewedAt >= (o.renewMs ?? 1000)) {
      this.#renewedAt = now;
      await o.addresses.renew([...this.#held].sort());
    }
    if (warming) return;
    // A peer (re)joined: after a partition heals it may have held our VIPs too and have
    // answered clients for them; announcing ours again puts the clients back at once.
    // Likewise once after the warm-up: VIPs adopted from a previous run were never taken
    // (so never announced), while a peer may have answered for them in between.
    const firstAfterWarmup = !this.#warmedUp;
    this.#warmedUp = true;
    if (joined || firstAfterWarmup)
      for (const vip of this.#held)
        void o.addresses.announce(vip).catch((error) => o.onEvent?.({ kind: "failed", error }));
    for (const vip of want) {
      if (this.#held.has(vip)) continue;
      await o.addresses.add(vip);
      this.#held.add(vip);
      o.onEvent?.({ kind: "took", vip, live: liveness.live });
      // not awaited: the announcement of one VIP must not delay taking the next
      void o.addresses.announce(vip).catch((error) => o.onEvent?.({ kind: "failed", error }));
      // once more a second later: a lost first announcement must not leave clients behind
      const again: TimerHandle = o.clock.setTimer(() => {
        this.#reannounce.delete(again);
        if (this.#held.has(vip)) void o.addresses.announce(vip).catch(() => {});
      }, 1000);
      this.#reannounce.add(again);
    }
  }

  /** Graceful stop: goodbyes, a moment for the peers to take over, then release everything. */
  async stop(): Promise<void> {
    if (this.#leaving) return;
    this.#leaving = true;
    if (this.#timer) this.#o.clock.clearTimer(this.#timer);
    for (const t of this.#reannounce) this.#o.clock.clearTimer(t);
    this.#reannounce.clear();
    for (let i = 0; i < 3; i++) this.#o.heartbeat.send(true);
    await new Promise<void>((resolve) => this.#o.clock.setTimer(resolve, this.#o.handoverMs));
    await this.reconcile();
    await this.#o.heartbeat.close();
  }
}
