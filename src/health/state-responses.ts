/**
 * What a kube-proxy-compatible node answers, as data: status, headers and body for
 * `/healthz`, `/livez` and a Service's healthCheckNodePort, given the inputs and `now`.
 * The servers in health-servers.ts only copy these onto the wire.
 *
 * Rules (docs/health.md; kubernetes
 * pkg/proxy/healthcheck/proxy_health.go and service_health.go):
 * - `/healthz`: 503 when the proxy is unhealthy or the node is not eligible, else 200.
 *   `/livez`: the proxy's health alone. Body fields `lastUpdated`, `currentTime`,
 *   `nodeEligible` (healthz only), `healthy` (proxy only), `status` per family (omitted
 *   when empty) — the format since kubernetes PR #129271. On 200 `lastUpdated` is the
 *   current time; on 503 the latest per-family update. Times are RFC 3339 with the
 *   fraction trimmed as Go's RFC3339Nano prints them; the zero time when never updated.
 * - per Service: 200 iff localEndpoints > 0 and the proxy is healthy (node eligibility is
 *   ignored); body `{"service":{namespace,name},"localEndpoints",…,"serviceProxyHealthy"}`
 *   tab-indented without a trailing newline; `X-Load-Balancing-Endpoint-Weight` on every
 *   answer (kubernetes PR #118999).
 * - Headers on all: `Content-Type: application/json`, `X-Content-Type-Options: nosniff`.
 *
 * Not here: counting endpoints (state-agent-model.ts) or freshness (state-proxy-health.ts).
 */
import type { ProxyHealth } from "./state-proxy-health.ts";

export interface HealthResponse {
  readonly status: 200 | 503;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export const WEIGHT_HEADER = "X-Load-Balancing-Endpoint-Weight";

const JSON_HEADERS = { "Content-Type": "application/json", "X-Content-Type-Options": "nosniff" } as const;

/** Go's `time.Time` JSON form (RFC3339Nano, UTC): fraction without trailing zeros;
 * undefined prints Go's zero time. */
export function goTime(ms: number | undefined): string {
  if (ms === undefined) return "0001-01-01T00:00:00Z";
  const whole = Math.floor(ms);
  const iso = new Date(whole).toISOString(); // 2026-01-01T00:00:00.123Z
  const micros = Math.round((ms - whole) * 1000);
  const fraction = `${iso.slice(20, 23)}${String(micros).padStart(3, "0")}`.replace(/0+$/, "");
  return `${iso.slice(0, 19)}${fraction === "" ? "" : `.${fraction}`}Z`;
}

function proxyBody(health: ProxyHealth, now: number, status: 200 | 503, nodeEligible?: boolean): string {
  const families = Object.entries(health.families);
  const body = {
    lastUpdated: goTime(status === 200 ? now : health.lastUpdated),
    currentTime: goTime(now),
    ...(nodeEligible !== undefined && { nodeEligible }),
    healthy: health.healthy,
    ...(families.length > 0 && {
      status: Object.fromEntries(
        families.map(([family, f]) => [family, { lastUpdated: goTime(f.lastUpdated), healthy: f.healthy }]),
      ),
    }),
  };
  return JSON.stringify(body);
}

export function healthzResponse(health: ProxyHealth, nodeEligible: boolean, now: number): HealthResponse {
  const status = health.healthy && nodeEligible ? 200 : 503;
  return { status, headers: JSON_HEADERS, body: proxyBody(health, now, status, nodeEligible) };
}

export function livezResponse(health: ProxyHealth, now: number): HealthResponse {
  const status = health.healthy ? 200 : 503;
  return { status, headers: JSON_HEADERS, body: proxyBody(health, now, status) };
}

export function serviceHealthResponse(input: {
  readonly namespace: string;
  readonly name: string;
  readonly localEndpoints: number;
  readonly proxyHealthy: boolean;
}): HealthResponse {
  const status = input.localEndpoints > 0 && input.proxyHealthy ? 200 : 503;
  const body = JSON.stringify(
    {
      service: { namespace: input.namespace, name: input.name },
      localEndpoints: input.localEndpoints,
      serviceProxyHealthy: input.proxyHealthy,
    },
    null,
    "\t",
  );
  return { status, headers: { ...JSON_HEADERS, [WEIGHT_HEADER]: String(input.localEndpoints) }, body };
}
