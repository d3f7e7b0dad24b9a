/**
 * Adapter: UDP heartbeats among the LB hosts of one segment (docs/vip-announce.md
 * "Failure detection"). Each host sends a small JSON datagram to every configured peer
 * every interval and reports every valid datagram it receives. A datagram is accepted only
 * from a configured peer name at that peer's configured address, so a stray sender on the
 * segment cannot make itself a member. Goodbyes (`bye`) are sent a few times on a graceful
 * stop so the peers take over at once instead of after the dead time.
 *
 * Does not decide liveness (peer-liveness.ts) or keep time beyond stamping receipt.
 */
import { createSocket, type Socket } from "node:dgram";
import { isIPv6 } from "node:net";

export interface HeartbeatMessage {
  readonly host: string;
  readonly bye: boolean;
}

/** The narrow interface the announcer uses; a fake in tests. */
export interface HeartbeatTransport {
  start(onHeard: (message: HeartbeatMessage) => void): Promise<void>;
  send(bye: boolean): void;
  /** new peer list (this host's own address must not change) */
  setPeers?(peers: ReadonlyMap<string, string>): void;
  close(): Promise<void>;
}

export interface UdpHeartbeatOptions {
  readonly self: string;
  /** peer name → address (this host's own entry gives the bind address) */
  readonly peers: ReadonlyMap<string, string>;
  readonly port: number;
  readonly onError?: (error: Error) => void;
}

const MAGIC = "passlb-hb/1";

export function encodeHeartbeat(m: HeartbeatMessage): Buffer {
  return Buffer.from(JSON.stringify({ p: MAGIC, host: m.host, bye: m.bye }));
}

export function decodeHeartbeat(data: Buffer): HeartbeatMessage | undefined {
  if (data.length > 512) return undefined;
  try {
    const v = JSON.parse(data.toString("utf8")) as { p?: unknown; host?: unknown; bye?: unknown };
    if (v.p !== MAGIC || typeof v.host !== "string") return undefined;
    return { host: v.host, bye: v.bye === true };
  } catch {
    return undefined;
  }
}

export function udpHeartbeat(options: UdpHeartbeatOptions): HeartbeatTransport {
  const own = options.peers.get(options.self);
  if (own === undefined) throw new Error(`--peers must name this host (${options.self})`);
  const socket: Socket = createSocket({ type: isIPv6(own) ? "udp6" : "udp4", reuseAddr: true });
  let peers = options.peers;
  let others = [...peers].filter(([h]) => h !== options.self);
  const strip = (a: string) => a.replace(/^::ffff:/, "");
  return {
    start(onHeard) {
      socket.on("message", (data, rinfo) => {
        const m = decodeHeartbeat(data);
        if (!m || m.host === options.self) return;
        if (strip(peers.get(m.host) ?? "") !== strip(rinfo.address)) return;
        onHeard(m);
      });
      socket.on("error", (e) => options.onError?.(e));
      return new Promise((resolve, reject) => {
        socket.once("error", reject);
        socket.bind(options.port, own, () => {
          socket.off("error", reject);
          resolve();
        });
      });
    },
    send(bye) {
      const data = encodeHeartbeat({ host: options.self, bye });
      for (const [, address] of others)
        socket.send(data, options.port, address, (e) => {
          // a peer that is down or unreachable is normal here: liveness notices
          if (e && (e as NodeJS.ErrnoException).code !== "EHOSTUNREACH") options.onError?.(e);
        });
    },
    setPeers(next) {
      peers = next;
      others = [...next].filter(([h]) => h !== options.self);
    },
    close() {
      return new Promise((resolve) => {
        try {
          socket.close(() => resolve());
        } catch {
          resolve();
        }
      });
    },
  };
}
