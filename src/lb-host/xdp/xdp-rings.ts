/**
 * Where each Maglev ring lives in the program's flat `rings` array: fixed blocks of the
 * largest table size, one per distinct ring content. A changed table is written to a block
 * no packet reads, and only then does its `ring_ids` entry (one hash-element replacement,
 * atomic: Documentation/bpf/map_hash.rst) point at it, so a packet sees the old ring or the
 * new one, never a mix. The old block is reused only after a grace period: a packet that
 * read the old `ring_ids` value may still be indexing its ring (the program runs under RCU,
 * drivers/net/veth.c; the grace is seconds for a read that takes nanoseconds).
 *
 * The pool remembers what each block holds, so
 *   - content asked for again while its old block is in its grace (a node's health flipping
 *     back) gets that block back, with nothing to write: it was never overwritten;
 *   - content written into a free block whose old content is known writes only the slots
 *     that differ (a Maglev change moves a few slots: docs/maglev.md).
 *
 * Pure: time arrives as `now` (milliseconds).
 */

export interface RingPlacement {
  readonly block: number;
  readonly base: number;
  /** slot offsets (from base) to write before anything points at the block */
  readonly writes: readonly number[];
}

export class RingPool {
  readonly blockSize: number;
  readonly blocks: number;
  readonly graceMs: number;
  readonly #inUse = new Map<string, number>();
  readonly #retired = new Map<number, { key: string; since: number }>();
  readonly #free: number[] = [];
  /** block → the slots it holds, where known */
  readonly #content = new Map<number, Uint32Array>();

  constructor(totalSlots: number, blockSize: number, graceMs = 2000) {
    if (!(blockSize >= 1 && blockSize <= totalSlots))
      throw new RangeError(`ring block size ${blockSize} does not fit ${totalSlots} slots`);
    this.blockSize = blockSize;
    this.blocks = Math.floor(totalSlots / blockSize);
    this.graceMs = graceMs;
    for (let b = this.blocks - 1; b >= 0; b--) this.#free.push(b);
  }

  /** The block holding this content, if any. */
  find(key: string): { block: number; base: number } | undefined {
    const block = this.#inUse.get(key);
    return block === undefined ? undefined : { block, base: block * this.blockSize };
  }

  /** A block holding `slots` once `writes` are done; throws when every block is in use or
   * in its grace period. */
  place(key: string, slots: Uint32Array, now: number): RingPlacement {
    const used = this.#inUse.get(key);
    if (used !== undefined) return this.#fill(used, slots);
    for (const [block, r] of this.#retired)
      if (r.key === key && this.#content.get(block) !== undefined) {
        this.#retired.delete(block);
        this.#inUse.set(key, block);
        return this.#fill(block, slots);
      }
    this.#reclaim(now);
    const block = this.#free.pop();
    if (block === undefined)
      throw new RangeError(
        `all ${this.blocks} XDP ring blocks of ${this.blockSize} slots are in use (distinct Maglev tables); lower --max-table-size`,
      );
    this.#inUse.set(key, block);
    return this.#fill(block, slots);
  }

  /** Content nothing points at any more: its block is free after the grace. */
  retire(key: string, now: number): void {
    const block = this.#inUse.get(key);
    if (block === undefined) return;
    this.#inUse.delete(key);
    this.#retired.set(block, { key, since: now });
  }

  /** A block the kernel's entries point at, content unknown (adopted at start): kept out of
   * use until retired with the key returned. */
  reserve(block: number): string {
    const key = `adopted:${block}`;
    const at = this.#free.indexOf(block);
    if (at !== -1) this.#free.splice(at, 1);
    this.#inUse.set(key, block);
    this.#content.delete(block);
    return key;
  }

  /** Forget what the blocks hold (the kernel's rings may have been changed behind us):
   * the next placement of each content writes it whole. */
  distrust(): void {
    this.#content.clear();
  }

  /** What a block should hold, where known (the drift check compares it). */
  content(block: number): Uint32Array | undefined {
    return this.#content.get(block);
  }

  keys(): IterableIterator<string> {
    return this.#inUse.keys();
  }

  get used(): number {
    return this.#inUse.size;
  }

  #fill(block: number, slots: Uint32Array): RingPlacement {
    const old = this.#content.get(block);
    const writes: number[] = [];
    for (let k = 0; k < slots.length; k++) if (old === undefined || old[k] !== slots[k]) writes.push(k);
    // the block's tail past a shorter ring is never read (ring_size bounds the slot)
    this.#content.set(block, old !== undefined && old.length > slots.length ? merge(old, slots) : slots);
    return { block, base: block * this.blockSize, writes };
  }

  #reclaim(now: number): void {
    for (const [block, r] of this.#retired)
      if (now - r.since >= this.graceMs) {
        this.#free.push(block);
        this.#retired.delete(block);
      }
  }
}

function merge(old: Uint32Array, head: Uint32Array): Uint32Array {
  const out = Uint32Array.from(old);
  out.set(head, 0);
  return out;
}
