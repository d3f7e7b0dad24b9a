/**
 * The tunnel check's rule and routes (routing/encap-check.ts, kept by
 * lb-host/tunnel-check-keeper.ts): synced after each new set of probe targets and on every
 * drift tick; in encap mode without --encap-check, a previous run's are removed. Undo: no
 * more syncs, after the one in progress.
 */
import type { Clock } from "../../../health/clock.ts";
import type { LbHostPart, Undo } from "../../lb-host.ts";
import type { EncapCheckRoutes } from "../../routing/encap-check-routes.ts";
import { TunnelCheckKeeper } from "../../tunnel-check-keeper.ts";
import type { LbHostSinks } from "../lb-host-sinks.ts";

export interface TunnelCheckPartOptions {
  readonly routes: EncapCheckRoutes;
  readonly addresses: () => readonly string[];
  readonly enabled: boolean;
  readonly everyMs: number;
  readonly clock: Clock;
}

export class TunnelCheckPart implements LbHostPart {
  readonly name = "tunnel-check";
  readonly #o: TunnelCheckPartOptions;
  readonly #sinks: LbHostSinks;
  /** from start to undo (its periodic re-check is a timer) */
  #keeper: TunnelCheckKeeper | undefined;

  constructor(options: TunnelCheckPartOptions, sinks: LbHostSinks) {
    this.#o = options;
    this.#sinks = sinks;
  }

  start(): Undo {
    const { say, obs } = this.#sinks;
    const keeper = new TunnelCheckKeeper({
      ...this.#o,
      onSynced: (n) => say(`passlb lb: tunnel check routes synced for ${n} routed node address(es)`),
      onFailed: (message) => {
        say(`passlb lb: ${message}`);
        obs?.observer.note({ event: "tunnel_check_routes_failed", severity: "warning", message });
      },
    });
    this.#keeper = keeper;
    return () => {
      this.#keeper = undefined;
      return keeper.stop();
    };
  }

  /** the probe targets changed: synced now (nothing before start, after undo) */
  sync(): void {
    this.#keeper?.sync();
  }
}
