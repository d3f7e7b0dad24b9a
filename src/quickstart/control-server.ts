/**
 * Adapter: the control endpoint of `passlb up` on 127.0.0.1 (default port 7460). It answers
 * `GET /` with the live state as JSON, and its port doubles as the single-instance lock: a
 * second `passlb up` finds the port taken, asks it who is there, and says so instead of
 * failing later on busy listener ports. The kernel releases the port when the process
 * ends, however it ends, so no stale lock file can block a restart.
 */
import { createServer, type Server } from "node:http";

export const DEFAULT_CONTROL_PORT = 7460;

export type ControlStart =
  | { readonly kind: "started"; readonly server: ControlServer }
  | { readonly kind: "already_running"; readonly dir: string; readonly startedAt: string }
  | { readonly kind: "port_busy"; readonly message: string };

export class ControlServer {
  readonly #server: Server;
  readonly port: number;

  private constructor(server: Server, port: number) {
    this.#server = server;
    this.port = port;
  }

  static async start(port: number, describe: () => unknown): Promise<ControlStart> {
    const server = createServer((req, res) => {
      const body = JSON.stringify({ passlb: "up", ...(describe() as object) });
      res.writeHead(200, { "content-type": "application/json", connection: "close" }).end(`${body}\n`);
      void req;
    });
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen({ host: "127.0.0.1", port, exclusive: true }, () => {
          server.off("error", reject);
          resolve();
        });
      });
    } catch (e) {
      server.close();
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "EADDRINUSE") return { kind: "port_busy", message: (e as Error).message };
      try {
        const res = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(1500) });
        const j = (await res.json()) as { passlb?: string; dir?: string; startedAt?: string };
        if (j.passlb === "up")
          return { kind: "already_running", dir: j.dir ?? "?", startedAt: j.startedAt ?? "?" };
      } catch {
        // something else holds the port
      }
      return { kind: "port_busy", message: `127.0.0.1:${port} is used by another program` };
    }
    const addr = server.address();
    return {
      kind: "started",
      server: new ControlServer(server, typeof addr === "object" && addr ? addr.port : port),
    };
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}
