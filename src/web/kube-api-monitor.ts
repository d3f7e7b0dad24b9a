/**
 * Adapter: where a passlb process's Kubernetes API calls report how they went, turned into
 * the loud failure signals (docs/kubernetes.md "When the API server refuses"):
 *   - every refused or unanswered request: `passlb_kube_api_errors_total{verb,resource,code}`;
 *   - a channel that starts failing (cluster/kube-api-health.ts decides when): one log line
 *     at error level, `event: kube_api_failing`, with the server's Status message, repeated
 *     every `remindMs` while it lasts; `passlb_kube_api_failing{channel}` 1; when it ends,
 *     `kube_api_recovered` at info and the gauge 0;
 *   - `report()`: the failing channels now, for `/readyz` and `/api/v1/state`.
 * Thin on purpose: the state and the decision are the pure module's; this holds the state,
 * reads the clock and writes the log and metrics.
 */
import {
  type FailingChannel,
  failingChanges,
  failingChannels,
  isChannelFault,
  type KubeApiCall,
  type KubeApiCallSink,
  type KubeApiChannel,
  type KubeApiHealthState,
  type KubeApiPolicy,
  type KubeApiReport,
  kubeApiCode,
  kubeApiReport,
  recordKubeApiFailure,
  recordKubeApiSuccess,
} from "../cluster/kube-api-health.ts";
import type { Logger } from "./logger.ts";
import type { Metrics } from "./metrics.ts";

export interface KubeApiMonitorOptions {
  readonly now: () => number;
  readonly policy: KubeApiPolicy;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** how often a failure still going on is logged again (default 60 s) */
  readonly remindMs?: number;
}

/** The HTTP status a passlb error carries (PasslbError details.status), if any. */
export function statusOf(error: unknown): number | undefined {
  const s = (error as { details?: { status?: unknown } } | null)?.details?.status;
  return typeof s === "number" ? s : undefined;
}

export class KubeApiMonitor implements KubeApiCallSink {
  readonly #o: KubeApiMonitorOptions;
  #state: KubeApiHealthState = {};
  #failing: FailingChannel[] = [];
  readonly #loggedAt = new Map<KubeApiChannel, number>();

  constructor(options: KubeApiMonitorOptions) {
    this.#o = options;
  }

  ok(channel: KubeApiChannel, resource?: string): void {
    this.#state = recordKubeApiSuccess(this.#state, channel, resource);
    this.#check();
  }

  failed(channel: KubeApiChannel, call: KubeApiCall, error: unknown): void {
    const status = statusOf(error);
    const code = kubeApiCode(status);
    this.#o.metrics.kubeApiError(call.verb, call.resource, code);
    if (!isChannelFault(status, channel)) return;
    const message = error instanceof Error ? error.message : String(error);
    this.#state = recordKubeApiFailure(this.#state, channel, { ...call, code, message }, this.#o.now());
    this.#check();
  }

  /** The failing channels now (also logs a start or end the clock alone brought about). */
  report(): KubeApiReport {
    this.#check();
    return kubeApiReport(this.#failing, this.#o.now());
  }

  #check(): void {
    const now = this.#o.now();
    const next = failingChannels(this.#state, this.#o.policy, now);
    const { started, ended } = failingChanges(this.#failing, next);
    this.#failing = next;
    const remind = this.#o.remindMs ?? 60_000;
    const startedSet = new Set(started.map((f) => f.channel));
    for (const f of next) {
      const last = this.#loggedAt.get(f.channel);
      if (!startedSet.has(f.channel) && last !== undefined && now - last < remind) continue;
      this.#loggedAt.set(f.channel, now);
      this.#o.metrics.kubeApiFailing(f.channel, true);
      this.#o.logger.log(
        "error",
        {
          event: "kube_api_failing",
          reason: f.channel,
          verb: f.verb,
          resource: f.resource,
          code: f.code,
          failures: f.failures,
          since: new Date(f.sinceMs).toISOString(),
        },
        `${f.channel}: failing for ${Math.floor((now - f.sinceMs) / 1000)} s: ${f.message}`,
      );
    }
    for (const channel of ended) {
      this.#loggedAt.delete(channel);
      this.#o.metrics.kubeApiFailing(channel, false);
      this.#o.logger.log(
        "info",
        { event: "kube_api_recovered", reason: channel },
        `${channel}: the API server accepts these requests again`,
      );
    }
  }
}
