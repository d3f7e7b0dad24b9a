/**
 * Adapter: the quickstart's pods, as in-process servers bound to each pod's (loopback)
 * address. A port named `http` (or with appProtocol http) answers HTTP with one JSON line
 * naming the pod, its node and the client address it saw; another TCP port echoes lines,
 * each prefixed with `pod@node client>`; a UDP port answers every datagram the same way.
 * A PROXY v2 header in front of a connection or datagram (sent by the node proxy) gives
 * the client address, as a PROXY-aware application would read it.
 *
 * `update(pods)` opens and closes servers to match the running pods (level-triggered).
 * A pod whose Ready condition is False still runs: the endpoints decide traffic.
 */
import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { createServer, type Server, type Socket } from "node:net";
import type { Pod } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { decodeProxyV2 } from "../lb-host/userspace/proxy-protocol.ts";
import { plainAddress, readProxyHeader } from "../lb-host/userspace/tcp-proxy.ts";

export interface EchoPodSpec {
  /** `namespace/name` */
  readonly pod: string;
  readonly node: string;
  readonly address: string;
  readonly port: number;
  readonly protocol: "TCP" | "UDP";
  readonly http: boolean;
}

export function echoPodSpecs(pods: readonly Pod[]): EchoPodSpec[] {
  const out: EchoPodSpec[] = [];
  for (const p of pods) {
    const address = p.status?.podIP;
    if (!address || p.status?.phase === "Succeeded" || p.status?.phase === "Failed") continue;
    for (const c of p.spec.containers)
      for (const cp of c.ports ?? []) {
        if (cp.protocol === "SCTP") continue;
        const named = (cp.name ?? "").toLowerCase();
        out.push({
          pod: objectKey(p.metadata),
          node: p.spec.nodeName ?? "",
          address,
          port: cp.containerPort,
          protocol: cp.protocol,
          http:
            cp.protocol === "TCP" &&
            (named === "http" || String(cp.appProtocol ?? "").toLowerCase() === "http"),
        });
      }
  }
  return out;
}

interface Running {
  readonly spec: EchoPodSpec;
  readonly tcp?: Server;
  readonly udp?: UdpSocket;
  readonly sockets: Set<Socket>;
}

const key = (s: EchoPodSpec) => `${s.protocol} ${s.address}:${s.port} ${s.pod} ${s.http}`;

export class EchoPods {
  readonly #running = new Map<string, Running>();

  get count(): number {
    return this.#running.size;
  }

  async update(specs: readonly EchoPodSpec[]): Promise<string[]> {
    const errors: string[] = [];
    const wanted = new Map(specs.map((s) => [key(s), s]));
    for (const [k, r] of this.#running)
      if (!wanted.has(k)) {
        this.#running.delete(k);
        await stop(r);
      }
    for (const [k, s] of wanted) {
      if (this.#running.has(k)) continue;
      try {
        this.#running.set(k, await start(s));
      } catch (e) {
        errors.push(`pod ${s.pod} ${s.address}:${s.port}/${s.protocol}: ${(e as Error).message}`);
      }
    }
    return errors;
  }

  async close(): Promise<void> {
    const all = [...this.#running.values()];
    this.#running.clear();
    await Promise.all(all.map(stop));
  }
}

function answer(spec: EchoPodSpec, client: string): string {
  return JSON.stringify({ pod: spec.pod, node: spec.node, client });
}

async function start(spec: EchoPodSpec): Promise<Running> {
  if (spec.protocol === "UDP") {
    const udp = createSocket("udp4");
    udp.on("message", (msg, rinfo) => {
      let body = msg;
      let client = `${plainAddress(rinfo.address)}:${rinfo.port}`;
      const d = decodeProxyV2(msg);
      if (d.kind === "header") {
        body = msg.subarray(d.length);
        if (d.addresses) client = `${d.addresses.srcAddr}:${d.addresses.srcPort}`;
      }
      udp.send(`${answer(spec, client)} ${body.toString("utf8").trim()}\n`, rinfo.port, rinfo.address);
    });
    await new Promise<void>((resolve, reject) => {
      udp.once("error", reject);
      udp.bind({ address: spec.address, port: spec.port, exclusive: true }, () => {
        udp.off("error", reject);
        udp.on("error", () => {});
        resolve();
      });
    });
    return { spec, udp, sockets: new Set() };
  }
  const sockets = new Set<Socket>();
  const tcp = createServer({ pauseOnConnect: true, allowHalfOpen: false }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    void serve(spec, socket);
  });
  await new Promise<void>((resolve, reject) => {
    tcp.once("error", reject);
    tcp.listen({ host: spec.address, port: spec.port, exclusive: true }, () => {
      tcp.off("error", reject);
      resolve();
    });
  });
  return { spec, tcp, sockets };
}

async function serve(spec: EchoPodSpec, socket: Socket): Promise<void> {
  const h = await readProxyHeader(socket, 2000, false);
  const client =
    h.kind === "header" && h.addresses
      ? `${h.addresses.srcAddr}:${h.addresses.srcPort}`
      : `${plainAddress(socket.remoteAddress)}:${socket.remotePort ?? 0}`;
  if (h.kind === "failed") {
    socket.destroy();
    return;
  }
  if (spec.http) {
    let head = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      head += chunk;
      // one answer per request head; keep-alive clients get one per request
      let end = head.indexOf("\r\n\r\n");
      while (end >= 0) {
        head = head.slice(end + 4);
        const body = `${answer(spec, client)}\n`;
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        end = head.indexOf("\r\n\r\n");
      }
      if (head.length > 16384) socket.destroy();
    });
    socket.on("end", () => socket.end());
    socket.resume();
    return;
  }
  let pending = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    pending += chunk;
    let nl = pending.indexOf("\n");
    while (nl >= 0) {
      socket.write(`${spec.pod}@${spec.node} ${client}> ${pending.slice(0, nl + 1)}`);
      pending = pending.slice(nl + 1);
      nl = pending.indexOf("\n");
    }
  });
  socket.on("end", () => {
    if (pending) socket.write(`${spec.pod}@${spec.node} ${client}> ${pending}\n`);
    socket.end();
  });
  socket.resume();
}

async function stop(r: Running): Promise<void> {
  for (const s of r.sockets) s.destroy();
  if (r.udp) {
    const u = r.udp;
    await new Promise<void>((resolve) => u.close(() => resolve()));
  }
  if (r.tcp) {
    const t = r.tcp;
    await new Promise<void>((resolve) => t.close(() => resolve()));
  }
}
