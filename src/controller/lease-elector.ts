/**
 * Adapter: runs the Lease election (leader-election.ts) against the API server — read the
 * Lease, decide, create or update it with the resourceVersion read (409 = lost the race),
 * every retry period. `isLeader()` is computed from the clock at the moment it is asked, so
 * a leader whose renewals stall stops writing at its renew deadline even if no timer ran.
 * On stop it can give the Lease up (client-go's ReleaseOnCancel) so a follower takes over
 * at its next retry instead of after the lease duration.
 */
import type { Clock, TimerHandle } from "../health/clock.ts";
import type { LeaseApi } from "./kube-controller-api.ts";
import {
  afterLeaseWrite,
  type ElectionConfig,
  type ElectorState,
  isLeading,
  leaseStep,
  releasedLease,
} from "./leader-election.ts";

export interface ElectorEvents {
  /** leadership began or ended */
  readonly onLeading?: (leading: boolean) => void;
  /** a Lease call failed (not a lost race) */
  readonly onError?: (error: unknown) => void;
  /** an attempt ended well: renewed, took over, or waits for a live holder */
  readonly onSettled?: () => void;
}

export class LeaseElector {
  readonly #api: LeaseApi;
  readonly #config: ElectionConfig;
  readonly #clock: Clock;
  readonly #events: ElectorEvents;
  #state: ElectorState = {};
  #resourceVersion: string | undefined;
  #timer: TimerHandle | undefined;
  #running: Promise<void> | undefined;
  #stopped = true;
  #wasLeading = false;

  constructor(api: LeaseApi, config: ElectionConfig, clock: Clock, events: ElectorEvents = {}) {
    this.#api = api;
    this.#config = config;
    this.#clock = clock;
    this.#events = events;
  }

  get identity(): string {
    return this.#config.identity;
  }

  isLeader(): boolean {
    return !this.#stopped && isLeading(this.#state, this.#clock.now(), this.#config);
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#tick();
  }

  /** Stops renewing; with `release`, gives the Lease up when this replica holds it. */
  async stop(options: { release: boolean } = { release: true }): Promise<void> {
    const wasLeader = this.isLeader();
    this.#stopped = true;
    if (this.#timer) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    await this.#running;
    this.#notify();
    if (!options.release || !wasLeader) return;
    try {
      const current = await this.#api.read();
      if (current && current.spec.holderIdentity === this.#config.identity)
        await this.#api.replace(releasedLease(current.spec, this.#clock.now()), current.resourceVersion);
    } catch (e) {
      this.#events.onError?.(e);
    }
  }

  #tick(): void {
    if (this.#stopped) return;
    this.#running = this.#attempt().finally(() => {
      this.#running = undefined;
      if (!this.#stopped) this.#timer = this.#clock.setTimer(() => this.#tick(), this.#config.retryPeriodMs);
      try {
        this.#notify();
      } catch (e) {
        // a failing listener must neither stop the renewals nor reject this promise
        this.#events.onError?.(e);
      }
    });
  }

  async #attempt(): Promise<void> {
    const now = this.#clock.now();
    let current: Awaited<ReturnType<LeaseApi["read"]>>;
    try {
      current = await this.#api.read();
    } catch (e) {
      this.#events.onError?.(e);
      return;
    }
    this.#resourceVersion = current?.resourceVersion;
    const { state, decision } = leaseStep(this.#state, current?.spec, now, this.#config);
    this.#state = state;
    if (decision.action === "wait") {
      this.#settled();
      return;
    }
    try {
      const written =
        decision.action === "create"
          ? await this.#api.create(decision.spec)
          : await this.#api.replace(decision.spec, this.#resourceVersion ?? "");
      this.#resourceVersion = written.resourceVersion;
      // leadership counts from before the request was sent, as client-go does
      this.#state = afterLeaseWrite(this.#state, written.spec, now, "ok");
    } catch (e) {
      const code = (e as { code?: string }).code;
      const conflict = code === "api_conflict";
      this.#state = afterLeaseWrite(this.#state, undefined, now, conflict ? "conflict" : "error");
      // a lost race settles nothing yet: the next read shows the winner (and the wait is a success)
      if (!conflict) this.#events.onError?.(e);
      return;
    }
    this.#settled();
  }

  #settled(): void {
    try {
      this.#events.onSettled?.();
    } catch (e) {
      this.#events.onError?.(e);
    }
  }

  #notify(): void {
    const leading = this.isLeader();
    if (leading === this.#wasLeading) return;
    this.#wasLeading = leading;
    this.#events.onLeading?.(leading);
  }
}
