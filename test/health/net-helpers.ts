// Test helpers for socket tests on loopback: a one-shot HTTP request without keep-alive,
// and a free ephemeral port on a given 127/8 address.
import { request } from "node:http";
import { createServer } from "node:net";

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

export function httpGet(host: string, port: number, path = "/", method = "GET"): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, method, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen({ host, port: 0 }, () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
