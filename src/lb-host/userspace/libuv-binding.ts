/**
 * Adapter helper for libuv-tcp.ts: Node's libuv TCP bindings (`process.binding("tcp_wrap")`
 * and `"stream_wrap"`, the layer node:net is built on), typed for the members libuv-tcp.ts
 * uses and checked before use. Node keeps these bindings for compatibility but does not
 * document them, so `loadBinding` answers undefined unless every constructor, method and
 * constant is there; the LB then runs on node:net (tcp-plumbing.ts).
 * Deliberately not here: using the handles (libuv-tcp.ts).
 */
import { getSystemErrorMap } from "node:util";

/** a libuv TCP handle as Node's tcp_wrap exposes it (the members used here) */
export interface UvTcp {
  onread: ((this: UvTcp, data: ArrayBuffer | undefined) => Uint8Array | undefined) | null;
  onconnection: ((status: number, client: UvTcp | undefined) => void) | null;
  readonly writeQueueSize: number;
  bind(host: string, port: number): number;
  bind6(host: string, port: number, flags: number): number;
  listen(backlog: number): number;
  connect(req: object, host: string, port: number): number;
  connect6(req: object, host: string, port: number): number;
  getpeername(out: { address?: string; port?: number }): number;
  setNoDelay(on: boolean): number;
  readStart(): number;
  readStop(): number;
  useUserBuffer(buffer: Uint8Array): void;
  writeBuffer(req: object, data: Uint8Array): number;
  shutdown(req: object): number;
  close(callback?: () => void): void;
  reset(callback?: () => void): number;
}

export interface UvReq {
  handle?: UvTcp;
  /** `this` is the request; connects also pass the handle */
  oncomplete: (status: number, handle: UvTcp | undefined) => void;
  async?: boolean;
  /** a write's bytes: libuv sends a queued write from this memory, so the request keeps it alive */
  buffer?: Uint8Array;
}

export interface Binding {
  readonly TCP: new (type: number) => UvTcp;
  readonly ConnectWrap: new () => UvReq;
  readonly WriteWrap: new () => UvReq;
  readonly ShutdownWrap: new () => UvReq;
  readonly SOCKET: number;
  readonly SERVER: number;
  /** Node's shared read/write status array and the slots this module reads */
  readonly state: Int32Array;
  readonly kRead: number;
  readonly kOffset: number;
}

const HANDLE_METHODS = [
  "bind",
  "bind6",
  "listen",
  "connect",
  "connect6",
  "getpeername",
  "setNoDelay",
  "readStart",
  "readStop",
  "useUserBuffer",
  "writeBuffer",
  "shutdown",
  "close",
  "reset",
] as const;

export type Binder = (name: string) => unknown;

export function processBinder(): Binder | undefined {
  const get = (process as unknown as { binding?: Binder }).binding;
  return typeof get === "function" ? (name) => get.call(process, name) : undefined;
}

export function loadBinding(get: Binder | undefined): Binding | undefined {
  if (get === undefined) return undefined;
  try {
    const tcp = get("tcp_wrap") as Record<string, unknown>;
    const stream = get("stream_wrap") as Record<string, unknown>;
    const TCP = tcp.TCP as Binding["TCP"] | undefined;
    const constants = tcp.constants as { SOCKET?: unknown; SERVER?: unknown } | undefined;
    const state = stream.streamBaseState;
    const kRead = stream.kReadBytesOrError;
    const kOffset = stream.kArrayBufferOffset;
    if (
      typeof TCP !== "function" ||
      typeof tcp.TCPConnectWrap !== "function" ||
      typeof stream.WriteWrap !== "function" ||
      typeof stream.ShutdownWrap !== "function" ||
      typeof constants?.SOCKET !== "number" ||
      typeof constants.SERVER !== "number" ||
      !(state instanceof Int32Array) ||
      typeof kRead !== "number" ||
      typeof kOffset !== "number"
    )
      return undefined;
    const proto = TCP.prototype as unknown as Record<string, unknown>;
    if (HANDLE_METHODS.some((m) => typeof proto[m] !== "function")) return undefined;
    return {
      TCP,
      ConnectWrap: tcp.TCPConnectWrap as Binding["ConnectWrap"],
      WriteWrap: stream.WriteWrap as Binding["WriteWrap"],
      ShutdownWrap: stream.ShutdownWrap as Binding["ShutdownWrap"],
      SOCKET: constants.SOCKET,
      SERVER: constants.SERVER,
      state,
      kRead,
      kOffset,
    };
  } catch {
    return undefined;
  }
}

const ERRORS = getSystemErrorMap();
export const UV_EOF = [...ERRORS].find(([, [name]]) => name === "EOF")?.[0] ?? -4095;

/** an Error shaped like node:net's (`listen EADDRINUSE: address already in use 127.0.0.1:80`) */
export function uvError(status: number, syscall: string, host: string, port: number): Error {
  const [code, text] = ERRORS.get(status) ?? [`E${-status}`, "unknown error"];
  return Object.assign(new Error(`${syscall} ${code}: ${text} ${host}:${port}`), {
    code,
    errno: status,
    syscall,
    address: host,
    port,
  });
}
