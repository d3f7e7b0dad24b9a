/**
 * Adapter helper: the memory the proxy reads a target's bytes into (tcp-proxy.ts).
 *
 * Node's default read path allocates a fresh 64 KiB buffer for every read, shrinks it to
 * what arrived and wraps it in a new Buffer; at hundreds of MB/s that allocation and the
 * garbage it leaves are a good part of a proxy's CPU. With `onread` a socket reads into
 * memory it is given instead, and this module decides which:
 * - every socket starts on a small buffer (a slice of Node's shared slab: no allocation
 *   of its own), so an idle or chatty connection holds 2 KiB, not 64;
 * - a read that filled its buffer means more is waiting: the next read gets a big buffer
 *   (64 KiB) from a free list; a read that did not fill it goes back to a small one and
 *   the big buffer returns to the list;
 * - a buffer that a write still holds (the peer's kernel buffer was full, so Node queued
 *   the write without copying) is never read into again: the socket is handed another
 *   buffer and the held one is left to the garbage collector.
 * Deliberately not here: backpressure (the splice pauses reading while the peer's queue is
 * full) and which socket reads what.
 */

/** what a read that did not fill its buffer gets next: below Node's slab threshold (4 KiB) */
export const SMALL_READ = 2048;
/** what a read that filled its buffer gets next: Node's own read size */
export const BIG_READ = 64 * 1024;
/** big buffers kept for reuse (4 MiB): enough for every bulk connection of a busy proxy */
const KEEP = 64;

const free: Buffer[] = [];

function bigBuffer(): Buffer {
  return free.pop() ?? Buffer.allocUnsafeSlow(BIG_READ);
}

function release(buffer: Buffer): void {
  if (buffer.length === BIG_READ && free.length < KEEP) free.push(buffer);
}

/** the first buffer of a new socket */
export function firstReadBuffer(): Buffer {
  return Buffer.allocUnsafe(SMALL_READ);
}

/**
 * The buffer for a socket's next read, after `read` bytes arrived in `current`.
 * `held`: a write still refers to `current` (it must not be read into or reused).
 */
export function nextReadBuffer(current: Buffer, read: number, held: boolean): Buffer {
  const wantBig = read === current.length;
  if (!held && (current.length === BIG_READ) === wantBig) return current;
  if (!held) release(current);
  return wantBig ? bigBuffer() : Buffer.allocUnsafe(SMALL_READ);
}

/** a closed socket's last buffer (no write holds it: see `nextReadBuffer`) */
export function releaseReadBuffer(buffer: Buffer): void {
  release(buffer);
}

/** big buffers waiting for reuse (for tests) */
export function idleBigBuffers(): number {
  return free.length;
}
