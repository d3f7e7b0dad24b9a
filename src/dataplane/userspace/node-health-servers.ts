/**
 * Adapter: the node's health answers in userspace mode, as kube-proxy gives them
 * (specs/endpointslice.md §4): `GET /healthz` on the proxy health port (10256) says the
 * proxy is up, and each externalTrafficPolicy Local Service's healthCheckNodePort answers
 * 200 with its local endpoint count while that count is above 0, else 503. The count is
 * also sent as `X-Load-Balancing-Endpoint-Weight` for weighted load balancing (GKE).
 *
 * A small stand-in bound to one node address, for `passlb up` and the userspace agent; the
 * full kube-proxy-compatible servers (staleness, /livez) are src/health/health-servers.ts
 * on the health branch, which can replace this one behind the same `update` call.
 */
import { createServer, type Server } from "node:http";
import type { ServiceHealthAnswer } from "./node-port-routes.ts";

export const PROXY_HEALTH_PORT = 10256;

export class NodeHealthServers {
  readonly #address: string;
  readonly #healthzPort: number;
  readonly #servers = new Map<number, Server>();
  readonly #answers = new Map<number, ServiceHealthAnswer>();

  constructor(options: { address: string; healthzPort?: number }) {
    this.#address = options.address;
    this.#healthzPort = options.healthzPort ?? PROXY_HEALTH_PORT;
  }

  /** Opens and closes servers so that exactly the given ports answer. Returns bind errors. */
  async update(answers: readonly ServiceHealthAnswer[]): Promise<string[]> {
    const errors: string[] = [];
    const wanted = new Map<number, ServiceHealthAnswer | undefined>([[this.#healthzPort, undefined]]);
    for (const a of answers) if (a.port !== this.#healthzPort) wanted.set(a.port, a);
    this.#answers.clear();
    for (const [port, a] of wanted) if (a) this.#answers.set(port, a);
    for (const [port, server] of this.#servers)
      if (!wanted.has(port)) {
        this.#servers.delete(port);
        server.close();
        server.closeAllConnections();
      }
    for (const port of wanted.keys()) {
      if (this.#servers.has(port)) continue;
      const server = createServer((req, res) => {
        const body = (status: number, obj: unknown, weight?: number) => {
          const headers: Record<string, string> = { "content-type": "application/json", connection: "close" };
          if (weight !== undefined) headers["x-load-balancing-endpoint-weight"] = String(weight);
          res.writeHead(status, headers).end(`${JSON.stringify(obj)}\n`);
        };
        if (port === this.#healthzPort) {
          body(200, { lastUpdated: new Date().toISOString(), currentTime: new Date().toISOString() });
          return;
        }
        const a = this.#answers.get(port);
        if (!a) {
          body(503, { error: "no such service" });
          return;
        }
        const [namespace, name] = a.service.split("/");
        body(
          a.localEndpoints > 0 ? 200 : 503,
          {
            service: { namespace, name },
            localEndpoints: a.localEndpoints,
            serviceProxyHealthy: true,
          },
          a.localEndpoints,
        );
        void req;
      });
      try {
        await new Promise<void>((resolve, reject) => {
          server.once("error", reject);
          server.listen({ host: this.#address, port, exclusive: true }, () => {
            server.off("error", reject);
            resolve();
          });
        });
        this.#servers.set(port, server);
      } catch (e) {
        errors.push(`${this.#address}:${port}: ${(e as Error).message}`);
      }
    }
    return errors;
  }

  async close(): Promise<void> {
    const all = [...this.#servers.values()];
    this.#servers.clear();
    await Promise.all(
      all.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.close(() => resolve());
            s.closeAllConnections();
          }),
      ),
    );
  }
}
