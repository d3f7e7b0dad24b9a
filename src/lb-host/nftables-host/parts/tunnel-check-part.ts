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
  readonly #keeper: TunnelCheckKeeper;

  constructor(options: TunnelCheckPartOptions, sinks: LbHostSinks) {
    const { say, obs } = sinks;
    this.#keeper = new TunnelCheckKeeper({
      ...options,
      onSynced: (n) => say(`passlb lb: tunnel check routes synced for ${n} routed node address(es)`),
      onFailed: (message) => {
        say(`passlb lb: ${message}`);
        obs?.observer.note({ event: "tunnel_check_routes_failed", severity: "warning", message });
      },
    });
  }

  start(): Undo {
    return () => this.#keeper.stop();
  }

  /** the probe targets changed */
  sync(): void {
    this.#keeper.sync();
  }
}
