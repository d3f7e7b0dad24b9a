/**
 * Adapter: the HTTP side of observability, one node:http server per passlb process.
 *
 *   GET /               the dashboard page (assets/dashboard.html: inline CSS and JS, no
 *                       external asset, no build step; it polls /api/v1/state each second)
 *   GET /api/v1/state   the view model (dashboard-state.ts; docs/dashboard.md)
 *   GET /metrics        Prometheus text exposition (metrics.ts; docs/metrics.md)
 *   GET /healthz        `ok` while the server runs (liveness)
 *   GET /readyz         readiness: 200 `ok`, or 503 with one line per failing channel of
 *                       Kubernetes API calls (kube-api-health.ts) — a process whose writes
 *                       the API server refuses is not restarted (that would not help) but
 *                       shows as not ready, with the server's message
 *
 * Binds loopback unless told otherwise (the page shows cluster topology; exposing it is
 * the operator's decision). A Content-Security-Policy forbids the page any origin but its
 * own, so it works offline and cannot leak. Only GET and HEAD; anything else is 405.
 * Slow, idle and oversized clients are bounded by health/http-limits.ts (a connection
 * budget, tight timeouts, bodies not drained), so `/healthz` stays answered under them.
 * Not here: what the state is (the command hands a `state()` function) and the clock.
 */
import { readFileSync } from "node:fs";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { failingLine, type KubeApiReport } from "../cluster/kube-api-health.ts";
import {
  ConnectionBudget,
  defaultHttpLimits,
  type HttpLimits,
  limitedHttpServer,
} from "../health/http-limits.ts";
import type { DashboardState } from "./dashboard-state.ts";
import type { Metrics } from "./metrics.ts";

export const DEFAULT_DASHBOARD_ADDRESS = "127.0.0.1:9797";

export interface DashboardServerOptions {
  readonly host: string;
  /** 0 picks a free port (tests) */
  readonly port: number;
  /** the current view; called per request */
  readonly state: () => DashboardState;
  readonly metrics?: Metrics;
  /** `/readyz`; ready when left out */
  readonly readiness?: () => KubeApiReport;
  /** connection budget and timeouts (health/http-limits.ts defaults) */
  readonly httpLimits?: HttpLimits;
}

const CSP =
  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** the page, from the sources (tsx) or beside the build (dist/web/assets, copied by the build) */
function loadPage(): string {
  const candidates = [
    new URL("./assets/dashboard.html", import.meta.url),
    new URL("./assets/dashboard.html", import.meta.url),
  ];
  for (const url of candidates) {
    try {
      return readFileSync(fileURLToPath(url), "utf8");
    } catch {
      // next candidate
    }
  }
  return "<!doctype html><title>passlb</title><p>dashboard page missing from this build; see /api/v1/state";
}

export class DashboardServer {
  readonly #o: DashboardServerOptions;
  readonly #page: string;
  #server: Server | undefined;

  constructor(options: DashboardServerOptions) {
    this.#o = options;
    this.#page = loadPage();
  }

  /** Listens; rejects when the address cannot be bound (in use, not local). */
  async start(): Promise<{ url: string }> {
    const limits = this.#o.httpLimits ?? defaultHttpLimits();
    const server = limitedHttpServer(
      (req, res) => this.#handle(req, res),
      limits,
      new ConnectionBudget(limits.maxConnections),
    );
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.#o.port, this.#o.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.#server = server;
    return { url: this.url };
  }

  get url(): string {
    const a = this.#server?.address() as AddressInfo | null | undefined;
    if (!a) return "";
    const host = a.family === "IPv6" || a.address.includes(":") ? `[${a.address}]` : a.address;
    return `http://${host}:${a.port}/`;
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, type: string, body: string, extra: Record<string, string> = {}) => {
      res.writeHead(status, {
        "content-type": type,
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
        ...extra,
      });
      res.end(req.method === "HEAD" ? undefined : body);
    };
    try {
      switch (path) {
        case "/":
        case "/index.html":
          send(200, "text/html; charset=utf-8", this.#page, { "content-security-policy": CSP });
          return;
        case "/api/v1/state":
          send(200, "application/json; charset=utf-8", JSON.stringify(this.#o.state()));
          return;
        case "/healthz":
          send(200, "text/plain; charset=utf-8", "ok\n");
          return;
        case "/readyz": {
          const r = this.#o.readiness?.() ?? { ready: true, failing: [] };
          if (r.ready) send(200, "text/plain; charset=utf-8", "ok\n");
          else
            send(503, "text/plain; charset=utf-8", `not ready\n${r.failing.map(failingLine).join("\n")}\n`);
          return;
        }
        case "/metrics": {
          const metrics = this.#o.metrics;
          if (!metrics) {
            send(404, "text/plain; charset=utf-8", "no metrics in this process\n");
            return;
          }
          metrics.text().then(
            (text) => send(200, metrics.contentType, text),
            (e: unknown) =>
              send(500, "text/plain; charset=utf-8", `metrics failed: ${(e as Error).message}\n`),
          );
          return;
        }
        default:
          send(404, "text/plain; charset=utf-8", "not found\n");
          return;
      }
    } catch (e) {
      send(500, "text/plain; charset=utf-8", `state failed: ${(e as Error).message}\n`);
    }
  }
}
