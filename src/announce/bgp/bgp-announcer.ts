/**
 * The BGP announcer's lifecycle (docs/vip-announce.md "BGP"): owns the speaker process
 * (BgpSpeaker), the kernel table of VIP routes (VipRouteTable) and a poll of the speaker's
 * state. bgp-engine.ts wraps it as the engine-neutral `Announcer`. Decisions come from bgp-decision.ts; this class only applies them in order and
 * reports what changed.
 *
 * - `start()` configures and starts (or adopts) the speaker, then reconciles the table with
 *   the last readiness (routes a previous process left for VIPs that are not ready go).
 * - `setReadiness(list)` reconciles: add the routes of ready VIPs, delete the others.
 *   Reconciles never overlap; a failure is reported and retried at the next poll.
 * - `stop()` is the graceful stop of issue #19 §1: delete every VIP route (BIRD withdraws
 *   them), wait `convergeMs` for the routers to move the flows to the other LB hosts, then
 *   stop the speaker. `stop({ keepSpeaker: true })` leaves routes and speaker as they are
 *   (a restart that must not move traffic; not used by `passlb lb` today).
 */

import type { VipReadiness } from "../announcer.ts";
import { announcementsOf, routeChanges } from "./bgp-decision.ts";
import type { SpeakerState, VipAnnouncement } from "./bgp-types.ts";
import type { BgpSpeaker } from "./bird-speaker.ts";
import type { VipRouteTable } from "./kernel-vip-routes.ts";

export type BgpEvent =
  | { readonly kind: "announced" | "withdrawn"; readonly vip: string; readonly reason: string }
  | {
      readonly kind: "speaker";
      readonly health: SpeakerState["health"];
      readonly findings: readonly string[];
    }
  | { readonly kind: "failed"; readonly error: unknown };

export interface BgpAnnouncerOptions {
  readonly speaker: BgpSpeaker;
  readonly routes: VipRouteTable;
  /** the speaker's configuration text (bird-config.ts) */
  readonly config: string;
  readonly pollMs: number;
  readonly convergeMs: number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly onEvent?: (e: BgpEvent) => void;
  /** the kernel-table routes of a ready VIP (default: its host route); read at every reconcile,
   * so it may follow the LoadBalancerBGPAdvertisements */
  readonly routesFor?: (vip: string) => readonly string[];
}

const NOT_STARTED: SpeakerState = {
  running: false,
  sessions: [],
  bfd: [],
  health: "down",
  findings: ["not started"],
};

export class BgpAnnouncer {
  readonly #o: BgpAnnouncerOptions;
  #readiness: readonly VipReadiness[] = [];
  #present = new Set<string>();
  #speaker: SpeakerState = NOT_STARTED;
  #announced = new Map<string, VipAnnouncement>();
  #serial: Promise<unknown> = Promise.resolve();
  #timer: ReturnType<typeof setInterval> | undefined;
  #stopped = false;
  #config: string;

  constructor(options: BgpAnnouncerOptions) {
    this.#o = options;
    this.#config = options.config;
  }

  async start(): Promise<void> {
    await this.#o.speaker.start(this.#config);
    await this.#reconcile();
    this.#timer = setInterval(() => void this.#reconcile(), this.#o.pollMs);
    this.#timer.unref?.();
  }

  /**
   * A new speaker configuration (the cluster's LoadBalancerBGPPeers changed): loaded into the
   * running speaker when the text differs (BIRD `configure`: sessions whose settings did not
   * change stay up); serialised with the reconciles. Resolves false when it was the same text.
   * A refused configuration rejects and leaves the last good one running.
   */
  configure(config: string): Promise<boolean> {
    const next = this.#serial.then(async () => {
      if (this.#stopped || config === this.#config) return false;
      await this.#o.speaker.start(config);
      this.#config = config;
      return true;
    });
    this.#serial = next.catch(() => undefined);
    return next;
  }

  setReadiness(list: readonly VipReadiness[]): void {
    this.#readiness = list;
    if (this.#timer !== undefined) void this.#reconcile();
  }

  /** what the routers are told, per VIP, as of the last reconcile */
  get announcements(): readonly VipAnnouncement[] {
    return [...this.#announced.values()];
  }

  get speaker(): SpeakerState {
    return this.#speaker;
  }

  /** One reconcile now (serialised with the others); resolves when it is done. */
  reconcile(): Promise<void> {
    return this.#reconcile();
  }

  async stop(options: { keepSpeaker?: boolean } = {}): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#serial;
    if (options.keepSpeaker) return;
    let removed = 0;
    try {
      for (const vip of await this.#o.routes.list()) {
        await this.#o.routes.remove(vip);
        removed++;
        this.#o.onEvent?.({ kind: "withdrawn", vip, reason: "passlb lb is stopping" });
      }
    } catch (error) {
      this.#o.onEvent?.({ kind: "failed", error });
    }
    if (removed > 0) await this.#o.sleep(this.#o.convergeMs);
    await this.#o.speaker.stop();
  }

  #reconcile(): Promise<void> {
    const next = this.#serial.then(() => (this.#stopped ? undefined : this.#pass()));
    this.#serial = next.catch(() => undefined);
    return next;
  }

  async #pass(): Promise<void> {
    try {
      const present = await this.#o.routes.list();
      const { add, remove } = routeChanges(this.#readiness, present, this.#o.routesFor);
      for (const vip of remove) await this.#o.routes.remove(vip);
      for (const vip of add) await this.#o.routes.add(vip);
      this.#present = new Set([...present.filter((v) => !remove.includes(v)), ...add]);
    } catch (error) {
      this.#o.onEvent?.({ kind: "failed", error });
    }
    const state = await this.#o.speaker.state();
    if (state.health !== this.#speaker.health || state.findings.join() !== this.#speaker.findings.join())
      this.#o.onEvent?.({ kind: "speaker", health: state.health, findings: state.findings });
    this.#speaker = state;
    const now = announcementsOf(this.#readiness, this.#present, state);
    const seen = new Set<string>();
    for (const a of now) {
      seen.add(a.vip);
      const before = this.#announced.get(a.vip);
      if (!before || before.state !== a.state)
        this.#o.onEvent?.({ kind: a.state, vip: a.vip, reason: a.reason });
      this.#announced.set(a.vip, a);
    }
    for (const vip of [...this.#announced.keys()]) if (!seen.has(vip)) this.#announced.delete(vip);
  }
}
