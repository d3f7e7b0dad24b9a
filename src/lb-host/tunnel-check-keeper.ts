/**
 * Adapter: keeps the tunnel check's rule and routes (lb-host/routing/encap-check-routes.ts) in
 * step with the prober's routed node addresses (`passlb lb --forward encap --encap-check`,
 * docs/dataplane-nftables.md "Routed networks"). `sync()` after each new set of probe
 * targets; with the check on, also every `everyMs` (the drift-check period), so a rule or
 * route deleted by hand comes back within one period. Syncs run on a CoalescingRunner
 * (cluster/coalescing-runner.ts): never two at once, a request during one runs one more.
 * Without the check (`enabled` false) one sync removes what a previous run left.
 *
 * A failed sync is reported once per distinct message and tried again at the next request
 * or period; it never stops the LB host.
 */
import { CoalescingRunner } from "../cluster/coalescing-runner.ts";
import type { Clock } from "../health/clock.ts";
import type { EncapCheckRoutes } from "./routing/encap-check-routes.ts";

export interface TunnelCheckKeeperOptions {
  readonly routes: EncapCheckRoutes;
  /** the routed node addresses the prober checks through the tunnel now */
  readonly addresses: () => readonly string[];
  /** `--encap-check` given */
  readonly enabled: boolean;
  /** the periodic re-check with the check on */
  readonly everyMs: number;
  readonly clock: Clock;
  /** the kernel needed changes for `addresses` routed node addresses */
  readonly onSynced?: (addresses: number) => void;
  /** a sync failed with a message other than the previous failure's */
  readonly onFailed?: (message: string) => void;
}

export class TunnelCheckKeeper {
  readonly #o: TunnelCheckKeeperOptions;
  readonly #syncs: CoalescingRunner;
  #lastError = "";

  constructor(options: TunnelCheckKeeperOptions) {
    this.#o = options;
    this.#syncs = new CoalescingRunner(() => this.#sync(), {
      clock: options.clock,
      ...(options.enabled && { maxIntervalMs: options.everyMs }),
    });
  }

  /** The probe targets changed: sync now, or right after the sync in progress. */
  sync(): void {
    this.#syncs.run();
  }

  /** No more syncs; resolves when the one in progress has finished. */
  stop(): Promise<void> {
    return this.#syncs.stop();
  }

  async #sync(): Promise<void> {
    try {
      const addresses = this.#o.addresses();
      const r = await this.#o.routes.sync(addresses, this.#o.enabled);
      if (r.changed && this.#o.enabled) this.#o.onSynced?.(this.#o.addresses().length);
      this.#lastError = "";
    } catch (e) {
      const message = `tunnel check routes: ${(e as Error).message}`;
      if (message !== this.#lastError) this.#o.onFailed?.(message);
      this.#lastError = message;
    }
  }
}
