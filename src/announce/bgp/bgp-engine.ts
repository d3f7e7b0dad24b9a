/**
 * The BGP engine as an `Announcer` (../announcer.ts; docs/vip-announce.md "The interface"),
 * so that `passlb lb` drives `--announce bgp` with the same calls as `--announce l2` and
 * shows it in the same shape. It wraps BgpAnnouncer (VIP routes in a kernel table that
 * BIRD learns and announces) and maps, and decides nothing:
 *
 * - in: each pass's `VipReadiness` goes to the announcer as it is; `peers` is ignored (on a
 *   routed tier the neighbours are the configured routers, not the other LB hosts);
 * - out: a VIP announced to a router is `held`, every other one `withdrawn`, with
 *   BgpAnnouncer's reason (there is no `backup`: every ready LB host holds its VIPs and the
 *   routers spread flows with ECMP); the speaker's health, BGP sessions and BFD states are
 *   `speaker`; BIRD has no groups;
 * - events: an announced or withdrawn VIP is a `state` event of group `bgp`, a change of
 *   the speaker's health an `engine` event (`healthy: false` unless healthy);
 * - stop: graceful withdraws every route, waits for the routers, stops BIRD; not graceful
 *   leaves routes and BIRD for the next process to adopt.
 */
import type {
  AnnounceInput,
  Announcer,
  AnnouncerEvent,
  AnnouncerStatus,
  EngineState,
  SpeakerView,
} from "../announcer.ts";
import { BgpAnnouncer, type BgpAnnouncerOptions, type BgpEvent } from "./bgp-announcer.ts";
import type { SpeakerState } from "./bgp-types.ts";

export interface BgpEngineOptions extends Omit<BgpAnnouncerOptions, "onEvent"> {
  /** this LB host's name, for the status */
  readonly host: string;
  readonly onEvent?: (e: AnnouncerEvent) => void;
}

export class BgpEngine implements Announcer {
  readonly #announcer: BgpAnnouncer;
  readonly #host: string;
  readonly #onEvent: (e: AnnouncerEvent) => void;
  #state: EngineState = "stopped";
  #detail: string | undefined;
  #generation = 0;

  constructor(options: BgpEngineOptions) {
    this.#host = options.host;
    this.#onEvent = options.onEvent ?? (() => {});
    this.#announcer = new BgpAnnouncer({ ...options, onEvent: (e) => this.#event(e) });
  }

  async start(input: AnnounceInput): Promise<void> {
    this.#setState("starting");
    this.#take(input);
    try {
      await this.#announcer.start();
    } catch (e) {
      this.#detail = (e as Error).message;
      this.#setState("failed");
      throw e;
    }
    this.#setState("running");
  }

  async update(input: AnnounceInput): Promise<void> {
    this.#take(input);
  }

  /** A new BIRD configuration (LoadBalancerBGPPeers changed); true when it was loaded. A
   * refused one rejects, and the last good configuration keeps running. */
  async configure(config: string): Promise<boolean> {
    const loaded = await this.#announcer.configure(config);
    if (loaded) this.#onEvent({ kind: "reloaded", added: 0, removed: 0, changed: 1 });
    return loaded;
  }

  /** One reconcile now; resolves when the table and the status follow the last input (tests). */
  reconcile(): Promise<void> {
    return this.#announcer.reconcile();
  }

  /** the speaker as last read (sessions by protocol name, BFD, exports; bgp-conditions.ts) */
  get speakerState(): SpeakerState {
    return this.#announcer.speaker;
  }

  status(): AnnouncerStatus {
    const speaker = this.#announcer.speaker;
    // BIRD not answering while passlb thinks it runs: the engine is down, not merely unhealthy
    const state = this.#state === "running" && !speaker.running ? "failed" : this.#state;
    const detail = state === "running" ? undefined : (this.#detail ?? speaker.findings.join("; "));
    return {
      engine: "bird",
      host: this.#host,
      state,
      ...(detail ? { detail } : {}),
      generation: this.#generation,
      vips: this.#announcer.announcements.map((a) => ({
        vip: a.vip,
        state: a.state === "announced" ? "held" : "withdrawn",
        reason: a.reason,
      })),
      groups: [],
      speaker: speakerView(this.#announcer),
    };
  }

  async stop(options: { readonly graceful: boolean }): Promise<void> {
    this.#setState("stopping");
    await this.#announcer.stop({ keepSpeaker: !options.graceful });
    this.#setState("stopped");
  }

  #take(input: AnnounceInput): void {
    this.#generation = input.generation;
    this.#announcer.setReadiness(input.vips);
  }

  #setState(state: EngineState): void {
    this.#state = state;
    this.#onEvent({
      kind: "engine",
      state,
      ...(state === "failed" && this.#detail && { detail: this.#detail }),
    });
  }

  #event(e: BgpEvent): void {
    switch (e.kind) {
      case "announced":
      case "withdrawn":
        this.#onEvent({
          kind: "state",
          group: "bgp",
          state: e.kind === "announced" ? "held" : "withdrawn",
          vips: [e.vip],
          reason: e.reason,
        });
        return;
      case "speaker":
        this.#onEvent({
          kind: "engine",
          state: this.#state,
          detail: `speaker ${e.health}${e.findings.length ? `: ${e.findings.join("; ")}` : ""}`,
          healthy: e.health === "healthy",
        });
        return;
      case "failed":
        this.#onEvent(e);
        return;
    }
  }
}

function speakerView(announcer: BgpAnnouncer): SpeakerView {
  const s = announcer.speaker;
  return {
    health: s.health,
    findings: s.findings,
    sessions: s.sessions.map((x) => {
      const bfd = s.bfd.find((b) => b.peer === x.peer)?.state;
      return {
        peer: x.peer,
        state: x.state,
        established: x.established,
        ...(bfd && { bfd }),
        name: x.name,
        exported: x.exported,
        ...(x.lastError && { lastError: x.lastError }),
      };
    }),
  };
}
