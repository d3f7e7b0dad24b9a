/**
 * Adapter: the node's kube-proxy-compatible health servers (kubernetes
 * pkg/proxy/healthcheck/service_health.go, proxy_health.go; docs/health.md). One server on the healthz bind
 * address answers `/healthz` and `/livez`; one server per Service of the model answers any path on its
 * healthCheckNodePort. `update(model)` reconciles the set of per-Service servers to the model (open new
 * ports, close ports no longer wanted; counts change in place); a port that cannot be bound is a finding
 * (`failed_to_start_service_healthcheck`, kube-proxy's Warning Event
 * FailedToStartServiceHealthcheck), not a crash, and is tried again on the next update.
 *
 * Hostile clients (idle or slow connections by the thousand, oversized requests) are
 * bounded by http-limits.ts: one connection budget for all these servers, tight node:http
 * timeouts, bodies never drained.
 *
 * Every answer is built by state-responses.ts from the current model, the freshness
 * record and the clock; this file only owns sockets. It deliberately does not read
 * manifests or decide anything about endpoints.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { IpFamily } from "../net/ip.ts";
import type { Finding } from "../plan/load-balancer-plan.ts";
import type { Clock } from "./clock.ts";
import { ConnectionBudget, defaultHttpLimits, type HttpLimits, limitedHttpServer } from "./http-limits.ts";
import type { AgentHealthModel, ServiceHealthModel } from "./state-agent-model.ts";
import { markQueued, markUpdated, type ProxyFreshness, proxyHealth } from "./state-proxy-health.ts";
import {
  type HealthResponse,
  healthzResponse,
  livezResponse,
  serviceHealthResponse,
} from "./state-responses.ts";

export interface BindAddress {
  /** undefined: every address (dual-stack when the host allows) */
  readonly host: string | undefined;
  readonly port: number;
}

export interface HealthServersOptions {
  readonly clock: Clock;
  /** `/healthz` and `/livez` (kube-proxy `--healthz-bind-address`, default 0.0.0.0:10256) */
  readonly healthz: BindAddress;
  /** host for the per-Service servers; undefined: every address */
  readonly serviceHost: string | undefined;
  /** kube-proxy: 2 × the sync period */
  readonly healthTimeoutMs: number;
  readonly onFinding: (finding: Finding) => void;
  /** connection budget (shared by all these servers) and timeouts; http-limits.ts defaults */
  readonly httpLimits?: HttpLimits;
}

type Counter = Record<"200" | "503", number>;

interface ServiceServer {
  readonly server: Server;
  readonly port: number;
}

export class HealthServers {
  readonly #options: HealthServersOptions;
  readonly #limits: HttpLimits;
  /** one budget for all of them: a hostile client cannot open more by using several ports */
  readonly #budget: ConnectionBudget;
  #freshness: ProxyFreshness = {};
  #model: AgentHealthModel | undefined;
  #byPort = new Map<number, ServiceHealthModel>();
  #healthz: Server | undefined;
  #services = new Map<number, ServiceServer>();
  /** last failure message per bind target, so a persisting failure is reported once */
  #failures = new Map<string, string>();
  #closed = false;
  /** answers given, per endpoint and status (kube-proxy's ProxyHealthzTotal / ProxyLivezTotal) */
  readonly counters: { healthz: Counter; livez: Counter } = {
    healthz: { "200": 0, "503": 0 },
    livez: { "200": 0, "503": 0 },
  };

  constructor(options: HealthServersOptions) {
    this.#options = options;
    this.#limits = options.httpLimits ?? defaultHttpLimits();
    this.#budget = new ConnectionBudget(this.#limits.maxConnections);
  }

  /** open connections of all the servers, and how many the budget has closed */
  connections(): { open: number; max: number; evicted: number } {
    return { open: this.#budget.size, max: this.#budget.max, evicted: this.#budget.evicted };
  }

  /** the rules of `family` are up to date now (kube-proxy `Updated`) */
  markUpdated(family: IpFamily): void {
    this.#freshness = markUpdated(this.#freshness, family, this.#options.clock.now());
  }

  /** a change for `family` is waiting to be applied (kube-proxy `QueuedUpdate`) */
  markQueued(family: IpFamily): void {
    this.#freshness = markQueued(this.#freshness, family, this.#options.clock.now());
  }

  proxyHealthy(): boolean {
    return proxyHealth(this.#freshness, this.#options.clock.now(), this.#options.healthTimeoutMs).healthy;
  }

  /** Applies a new model: answers change at once; servers open and close to match. */
  async update(model: AgentHealthModel): Promise<void> {
    if (this.#closed) return;
    this.#model = model;
    this.#byPort = new Map(model.services.map((s) => [s.port, s]));
    if (!this.#healthz) {
      const healthz = await this.#open(this.#options.healthz, "healthz", undefined);
      if (this.#closed) {
        if (healthz) await closeServer(healthz);
        return;
      }
      this.#healthz = healthz;
    }
    for (const [port, entry] of this.#services) {
      if (this.#byPort.has(port)) continue;
      this.#services.delete(port);
      await closeServer(entry.server);
    }
    for (const svc of model.services) {
      if (this.#services.has(svc.port)) continue;
      const server = await this.#open({ host: this.#options.serviceHost, port: svc.port }, "service", svc);
      if (this.#closed) {
        if (server) await closeServer(server);
        return;
      }
      if (server) this.#services.set(svc.port, { server, port: svc.port });
    }
  }

  /** where the servers listen (ports resolved when 0 was asked for) */
  addresses(): { healthz: AddressInfo | undefined; services: Map<number, AddressInfo> } {
    const services = new Map<number, AddressInfo>();
    for (const [port, s] of this.#services) services.set(port, s.server.address() as AddressInfo);
    return { healthz: this.#healthz?.address() as AddressInfo | undefined, services };
  }

  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#services.values()].map((s) => s.server);
    if (this.#healthz) all.push(this.#healthz);
    this.#services.clear();
    this.#healthz = undefined;
    await Promise.all(all.map(closeServer));
  }

  #open(
    address: BindAddress,
    kind: "healthz" | "service",
    svc: ServiceHealthModel | undefined,
  ): Promise<Server | undefined> {
    const server = limitedHttpServer(
      kind === "healthz" ? this.#answerNode : (_req, res) => this.#answerService(address.port, res),
      this.#limits,
      this.#budget,
    );
    const target = `${address.host ?? "*"}:${address.port}`;
    return new Promise((resolve) => {
      server.once("error", (err: NodeJS.ErrnoException) => {
        const subject = svc ? `Service ${svc.namespace}/${svc.name}` : "proxy healthz";
        const message = `${svc ? "health check server" : "healthz server"} could not listen on ${target}: ${err.code ?? err.message}`;
        if (this.#failures.get(target) !== message) {
          this.#failures.set(target, message);
          this.#options.onFinding({
            code: svc ? "failed_to_start_service_healthcheck" : "failed_to_start_proxy_healthz",
            severity: "warning",
            subject,
            message,
          });
        }
        resolve(undefined);
      });
      server.listen({ port: address.port, ...(address.host !== undefined && { host: address.host }) }, () => {
        this.#failures.delete(target);
        server.on("error", () => {}); // a listening server's later errors are per-connection
        resolve(server);
      });
    });
  }

  readonly #answerNode = (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? "").split("?")[0];
    const now = this.#options.clock.now();
    const health = proxyHealth(this.#freshness, now, this.#options.healthTimeoutMs);
    let answer: HealthResponse;
    if (path === "/healthz") {
      answer = healthzResponse(health, this.#model?.nodeEligible ?? false, now);
      this.counters.healthz[answer.status]++;
    } else if (path === "/livez") {
      answer = livezResponse(health, now);
      this.counters.livez[answer.status]++;
    } else {
      res.writeHead(404, {
        "Content-Type": "text/plain; charset=utf-8",
        "X-Content-Type-Options": "nosniff",
      });
      res.end("404 page not found\n");
      return;
    }
    send(res, answer);
  };

  #answerService(port: number, res: ServerResponse): void {
    // path and method are ignored (kube-proxy service_health.go); a Service that left the
    // model while its server was closing answers 0 endpoints
    const svc = this.#byPort.get(port);
    send(
      res,
      serviceHealthResponse({
        namespace: svc?.namespace ?? "",
        name: svc?.name ?? "",
        localEndpoints: svc?.localEndpoints ?? 0,
        proxyHealthy: this.proxyHealthy(),
      }),
    );
  }
}

function send(res: ServerResponse, answer: HealthResponse): void {
  res.writeHead(answer.status, { ...answer.headers, "Content-Length": Buffer.byteLength(answer.body) });
  res.end(answer.body);
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
