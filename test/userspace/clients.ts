/**
 * Loopback clients for the userspace tests: one HTTP GET on a new connection, a line
 * exchange over TCP, a UDP request/answer — each with a deadline, each closing its socket.
 */
import { createSocket } from "node:dgram";
import { connect, type Socket } from "node:net";

export interface Answer {
  readonly pod: string;
  readonly node: string;
  readonly client: string;
}

/** GET / on a fresh connection from `localAddress`; the echo pod's JSON answer. */
export function httpGet(
  host: string,
  port: number,
  localAddress = "127.0.0.1",
  timeoutMs = 2000,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port, localAddress });
    let data = "";
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no answer from ${host}:${port} in ${timeoutMs} ms`));
    }, timeoutMs);
    s.setEncoding("utf8");
    s.on("connect", () => s.write(`GET / HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`));
    s.on("data", (d: string) => {
      data += d;
      const body = data.split("\r\n\r\n")[1];
      if (body?.endsWith("\n")) {
        clearTimeout(timer);
        s.destroy();
        resolve(JSON.parse(body) as Answer);
      }
    });
    s.on("error", (e) => {
      clearTimeout(timer);
      s.destroy();
      reject(e);
    });
    s.on("close", () => {
      clearTimeout(timer);
      reject(new Error(`closed without an answer: ${JSON.stringify(data)}`));
    });
  });
}

/** An open TCP connection that sends a line and waits for the echoed line. */
export async function openLine(
  host: string,
  port: number,
  localAddress = "127.0.0.1",
): Promise<{
  socket: Socket;
  ask: (line: string) => Promise<string>;
}> {
  const socket = connect({ host, port, localAddress });
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  socket.setEncoding("utf8");
  let buf = "";
  const waiters: Array<(l: string) => void> = [];
  socket.on("data", (d: string) => {
    buf += d;
    let nl = buf.indexOf("\n");
    while (nl >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      waiters.shift()?.(line);
      nl = buf.indexOf("\n");
    }
  });
  socket.on("error", () => {});
  const ask = (line: string) =>
    new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no echo in 2 s")), 2000);
      waiters.push((l) => {
        clearTimeout(t);
        resolve(l);
      });
      socket.write(`${line}\n`);
    });
  return { socket, ask };
}

/** Sends datagrams from one socket bound to `localAddress`; resolves the answers (undefined on silence). */
export function udpAsk(
  host: string,
  port: number,
  messages: readonly string[],
  localAddress = "127.0.0.1",
  waitMs = 600,
): Promise<Array<string | undefined>> {
  return new Promise((resolve) => {
    const s = createSocket("udp4");
    const answers: Array<string | undefined> = [];
    let i = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const next = () => {
      if (i >= messages.length) {
        s.close();
        resolve(answers);
        return;
      }
      s.send(messages[i]!, port, host);
      timer = setTimeout(() => {
        answers.push(undefined);
        i++;
        next();
      }, waitMs);
    };
    s.on("message", (m) => {
      if (timer) clearTimeout(timer);
      answers.push(m.toString("utf8"));
      i++;
      next();
    });
    s.on("error", () => {});
    s.bind({ address: localAddress, port: 0 }, next);
  });
}

export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** Connects, writes `payload`, and resolves with everything received until the server
 * closes; rejects on an error or after `timeoutMs`. */
export function exchange(
  to: { readonly host: string; readonly port: number; readonly localAddress?: string },
  payload: string | Buffer,
  timeoutMs = 3000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({
      host: to.host,
      port: to.port,
      ...(to.localAddress && { localAddress: to.localAddress }),
    });
    let got = "";
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error(`timeout; got ${JSON.stringify(got)}`));
    }, timeoutMs);
    s.on("connect", () => s.write(payload));
    s.on("data", (d) => (got += d));
    s.on("error", (e) => {
      clearTimeout(t);
      reject(e);
    });
    s.on("close", () => {
      clearTimeout(t);
      resolve(got);
    });
  });
}
