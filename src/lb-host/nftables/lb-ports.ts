/**
 * The LB controller's ports: the narrow interface it is driven through (health; time is a
 * Clock, health/clock.ts) and the values it reports (sync outcomes, events). Types only;
 * lb-controller.ts re-exports them. Fakes live with the tests (lb-controller.test.ts).
 */
import type { HealthLookup } from "../../forwarding/forwarding-state.ts";

/** Where health comes from: the prober, adapted, plugs in as this one object. */
export interface HealthSource {
  readonly lookup: HealthLookup;
  /** a number that changes whenever any lookup's answer may have (optional: without it,
   * every pass reads every member's health) */
  readonly version?: () => number;
  /** calls `listener` after any transition or weight change; returns an unsubscribe */
  subscribe(listener: () => void): () => void;
}

export type SyncOutcome =
  | { readonly kind: "ok"; readonly mode: "full" | "incremental" | "noop"; readonly bytes: number }
  | { readonly kind: "retry"; readonly delayMs: number; readonly cause: unknown }
  | { readonly kind: "failed"; readonly cause: unknown };

export type LbEvent =
  | {
      readonly kind: "synced";
      readonly mode: "full" | "incremental" | "noop";
      readonly bytes: number;
      readonly ms: number;
    }
  | { readonly kind: "sync_failed"; readonly error: unknown; readonly retryInMs: number }
  | { readonly kind: "adopted"; readonly sets: number; readonly chains: number }
  | { readonly kind: "drift"; readonly scope: "table" | "routes" | "flows"; readonly what: string }
  | { readonly kind: "routes_failed"; readonly error: unknown }
  | { readonly kind: "kept_last_good"; readonly service: string; readonly reason: string }
  | {
      readonly kind: "flows_released";
      readonly service: string;
      readonly node: string;
      readonly flows: number;
    }
  | {
      readonly kind: "flows_release_failed";
      readonly service: string;
      readonly node: string;
      readonly error: unknown;
    };
