/**
 * Whether a passlb process's conversation with the API server is failing, and since when —
 * the pure decision behind the loud failure signals (an error log line with the server's
 * message, `passlb_kube_api_failing`, `/readyz`, `kubectl passlb status`; docs/kubernetes.md
 * "When the API server refuses"). Calls are grouped in channels; each keeps its first
 * failure since the last success, the number of failures in a row and the last one (verb,
 * resource, code, the Status message).
 *
 * When a channel is "failing" (the policy, `kubeApiPolicy`):
 *   - `lease`: no Lease read or write succeeded for longer than the lease duration — a
 *     replica that can neither take nor renew its Lease for that long would, in client-go's
 *     terms, have lost it (k8s.io/client-go/tools/leaderelection/leaderelection.go:
 *     renewals end at RenewDeadline; followers take over after LeaseDuration);
 *   - writes (`service_writes`, `pool_status`, `events`, `endpointslices`) and `reads`:
 *     three failures in a row with no success between (one refused write is retried by the
 *     loop's backoff and is not yet news; three are); for reads, only a success of the
 *     resource that failed clears the channel (recordKubeApiSuccess).
 * A lost race (409 Conflict) and a vanished object (404) are neither failure nor success:
 * the caller retries or has nothing left to do (apimachinery's StatusReasonConflict and
 * NotFound are answers, not faults) — except on the Lease, where only an attempt that ended
 * well (renewed, took over, or saw a live holder and waits) clears the channel.
 *
 * Pure: time is an argument, state is a value. Deliberately not here: counting metrics,
 * logging, serving (cli/kube-api-monitor.ts).
 */

export const KUBE_API_CHANNELS = [
  "lease",
  "service_writes",
  "pool_status",
  "events",
  "endpointslices",
  "reads",
] as const;
export type KubeApiChannel = (typeof KUBE_API_CHANNELS)[number];

/** One refused or unanswered request. */
export interface KubeApiFailure {
  /** Kubernetes verb: get, list, watch, create, update, delete */
  readonly verb: string;
  /** resource (with `/status` for the subresource): `leases`, `services/status` */
  readonly resource: string;
  /** the HTTP status as text (`400`), or `unreachable` when no answer came */
  readonly code: string;
  /** what passlb tried and the server's Status message */
  readonly message: string;
}

/** A request as the sink hears of it. */
export interface KubeApiCall {
  readonly verb: string;
  readonly resource: string;
}

/** What the API adapters call after each request (web/kube-api-monitor.ts; tests record). */
export interface KubeApiCallSink {
  /** `resource`: see recordKubeApiSuccess */
  ok(channel: KubeApiChannel, resource?: string): void;
  failed(channel: KubeApiChannel, call: KubeApiCall, error: unknown): void;
}

interface ChannelRecord {
  readonly sinceMs: number;
  readonly failures: number;
  readonly last: KubeApiFailure;
}

export type KubeApiHealthState = Readonly<Partial<Record<KubeApiChannel, ChannelRecord>>>;

export interface ChannelPolicy {
  /** failures in a row before the channel counts as failing */
  readonly minFailures: number;
  /** and for at least this long since the first of them */
  readonly minDurationMs: number;
}

export type KubeApiPolicy = Readonly<Record<KubeApiChannel, ChannelPolicy>>;

/** The policy of the header; `leaseDurationMs` only matters to the controller. */
export function kubeApiPolicy(leaseDurationMs: number): KubeApiPolicy {
  const repeated: ChannelPolicy = { minFailures: 3, minDurationMs: 0 };
  return {
    lease: { minFailures: 1, minDurationMs: leaseDurationMs },
    service_writes: repeated,
    pool_status: repeated,
    events: repeated,
    endpointslices: repeated,
    reads: repeated,
  };
}

/** `400`, `503`, or `unreachable` (no HTTP answer) — the metric's `code` label. */
export function kubeApiCode(status: number | undefined): string {
  return status !== undefined && Number.isInteger(status) && status >= 100 && status <= 599
    ? String(status)
    : "unreachable";
}

/** Whether an answer with this HTTP status is a fault of the channel (see the header). For
 * the Lease every refusal counts — the duration rule keeps a race lost once from mattering,
 * but a replica that keeps losing it (409 on every write, nobody else holding the Lease)
 * for longer than the lease duration is as stuck as one that is refused. */
export function isChannelFault(status: number | undefined, channel?: KubeApiChannel): boolean {
  if (channel === "lease") return true;
  return status !== 409 && status !== 404;
}

export function recordKubeApiFailure(
  state: KubeApiHealthState,
  channel: KubeApiChannel,
  failure: KubeApiFailure,
  nowMs: number,
): KubeApiHealthState {
  const before = state[channel];
  return {
    ...state,
    [channel]: { sinceMs: before?.sinceMs ?? nowMs, failures: (before?.failures ?? 0) + 1, last: failure },
  };
}

/** A success clears the channel; with `resource`, only when the last failure was of that
 * resource (a channel of reads spans several resources: a Service watch that opens says
 * nothing about a pool list that keeps failing). */
export function recordKubeApiSuccess(
  state: KubeApiHealthState,
  channel: KubeApiChannel,
  resource?: string,
): KubeApiHealthState {
  const r = state[channel];
  if (r === undefined) return state;
  if (resource !== undefined && r.last.resource !== resource) return state;
  const next = { ...state };
  delete next[channel];
  return next;
}

export interface FailingChannel extends KubeApiFailure {
  readonly channel: KubeApiChannel;
  /** first failure since the last success, ms since the epoch */
  readonly sinceMs: number;
  readonly failures: number;
}

/** The channels failing now, in KUBE_API_CHANNELS order. */
export function failingChannels(
  state: KubeApiHealthState,
  policy: KubeApiPolicy,
  nowMs: number,
): FailingChannel[] {
  const out: FailingChannel[] = [];
  for (const channel of KUBE_API_CHANNELS) {
    const r = state[channel];
    if (!r) continue;
    const p = policy[channel];
    if (r.failures < p.minFailures || nowMs - r.sinceMs < p.minDurationMs) continue;
    out.push({ channel, sinceMs: r.sinceMs, failures: r.failures, ...r.last });
  }
  return out;
}

/** The JSON form (`/api/v1/state` `kubeApi`, `kubectl passlb status`). */
export interface KubeApiReport {
  readonly ready: boolean;
  readonly failing: readonly {
    readonly channel: KubeApiChannel;
    readonly since: string;
    readonly forSeconds: number;
    readonly failures: number;
    readonly verb: string;
    readonly resource: string;
    readonly code: string;
    readonly message: string;
  }[];
}

export function kubeApiReport(failing: readonly FailingChannel[], nowMs: number): KubeApiReport {
  return {
    ready: failing.length === 0,
    failing: failing.map((f) => ({
      channel: f.channel,
      since: new Date(f.sinceMs).toISOString(),
      forSeconds: Math.max(0, Math.floor((nowMs - f.sinceMs) / 1000)),
      failures: f.failures,
      verb: f.verb,
      resource: f.resource,
      code: f.code,
      message: f.message,
    })),
  };
}

/** One line per failing channel: the body of `/readyz` and the text of `kubectl passlb status`. */
export function failingLine(f: {
  readonly channel: string;
  readonly forSeconds: number;
  readonly failures: number;
  readonly verb: string;
  readonly resource: string;
  readonly code: string;
  readonly message: string;
}): string {
  return `${f.channel} failing for ${f.forSeconds}s (${f.failures} in a row, last ${f.verb} ${f.resource}: ${f.code}): ${f.message}`;
}

/** What changed between two evaluations: channels that started and stopped failing. */
export function failingChanges(
  before: readonly FailingChannel[],
  after: readonly FailingChannel[],
): { started: FailingChannel[]; ended: KubeApiChannel[] } {
  const was = new Set(before.map((f) => f.channel));
  const now = new Set(after.map((f) => f.channel));
  return {
    started: after.filter((f) => !was.has(f.channel)),
    ended: before.filter((f) => !now.has(f.channel)).map((f) => f.channel),
  };
}
