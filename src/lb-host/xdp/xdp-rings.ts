/**
 * Where each Maglev ring lives in the program's flat `rings` array: fixed blocks of the
 * largest table size, one per distinct ring content. A changed table is written to a block
 * no packet reads, and only then does its `ring_ids` entry (one hash-element replacement,
 * atomic: Documentation/bpf/map_hash.rst) point at it, so a packet sees the old ring or the
 * new one, never a mix. The old block is written again only once no packet can still be
 * reading it: a packet that read the old `ring_ids` value may still be indexing its ring
 * (the program runs under RCU, drivers/net/veth.c). The batch that retires a block ends with
 * an RCU barrier (xdp-plan.ts: an update of a map-in-map element, which the kernel returns
 * from only after every running BPF program has finished — `maybe_wait_bpf_programs`,
 * kernel/bpf/syscall.c), after which `settle` frees it; where no barrier is available a
 * retired block is free after `graceMs` (seconds, for a read that takes nanoseconds).
 *
 * The pool remembers what each block holds, so
 *   - content asked for again while its old block is retired or free (a node's health
 *     flipping back) gets that block back, with nothing to write;
 *   - content written into a free block whose old content is known writes only the slots
 *     that differ (a Maglev change moves a few slots: docs/maglev.md), and a ring's next
 *     version goes into a block its lineage (the ring group, xdp-maps.ts) held before, so
 *     back-to-back health flips of one shared ring write a few slots each, not the ring.
 *
 * Pure: time arrives as `now` (milliseconds).
 */

export interface RingPlacement {
  /** the block's first slot (a block is named by it) */
  readonly base: number;
  /** slot offsets (from base) to write before anything points at the block */
  readonly writes: readonly number[];
}

/** the block size a ring of `size` slots takes: the power of two at or above it */
const capacityOf = (size: number): number => 2 ** Math.ceil(Math.log2(Math.max(size, 1)));

export class RingPool {
  readonly totalSlots: number;
  readonly graceMs: number;
  readonly #inUse = new Map<string, number>();
  /** block → the key in use on it (the reverse of #inUse) */
  readonly #keyOf = new Map<number, string>();
  readonly #retired = new Map<number, { key: string; since: number }>();
  /** block capacity → its free blocks, in the order they were freed */
  readonly #free = new Map<number, Set<number>>();
  /** block → its capacity (every block handed out or adopted) */
  readonly #capacity = new Map<number, number>();
  /** the first slot no block has taken yet (blocks are cut from the array upwards, each
   * aligned to its capacity, so two blocks never overlap) */
  #top = 0;
  /** block → the slots it holds, where known */
  readonly #content = new Map<number, Uint32Array>();
  /** block → the content key and lineage it last held (free blocks are found by them) */
  readonly #held = new Map<number, { key: string; lineage: string | undefined }>();
  /** content key / lineage → the free block that last held it (checked against #held) */
  readonly #freeByKey = new Map<string, number>();
  readonly #freeByLineage = new Map<string, number>();

  constructor(totalSlots: number, maxRing: number, graceMs = 2000) {
    if (!(maxRing >= 1 && capacityOf(maxRing) <= totalSlots))
      throw new RangeError(`a ring of ${maxRing} slots does not fit ${totalSlots} slots`);
    this.totalSlots = totalSlots;
    this.graceMs = graceMs;
  }

  /** The block holding this content, if any. */
  find(key: string): { base: number } | undefined {
    const base = this.#inUse.get(key);
    return base === undefined ? undefined : { base };
  }

  /** A block holding `slots` once `writes` are done; throws when the ring array is full.
   * `lineage` names the ring this content is a version of. */
  place(key: string, slots: Uint32Array, now: number, lineage?: string): RingPlacement {
    const used = this.#inUse.get(key);
    if (used !== undefined) return this.#fill(used, key, slots, lineage);
    for (const [block, r] of this.#retired)
      if (r.key === key && this.#content.get(block) !== undefined) {
        this.#retired.delete(block);
        return this.#take(block, key, slots, lineage);
      }
    this.#reclaim(now);
    const cap = capacityOf(slots.length);
    const free = this.#free.get(cap);
    const block =
      this.#freeHolding(cap, this.#freeByKey.get(key), (h) => h.key === key) ??
      (lineage === undefined
        ? undefined
        : this.#freeHolding(cap, this.#freeByLineage.get(lineage), (h) => h.lineage === lineage)) ??
      free?.values().next().value ??
      this.#cut(cap);
    free?.delete(block);
    return this.#take(block, key, slots, lineage);
  }

  /** Content nothing points at any more: its block is free after the next barrier
   * (`settle`) or the grace. */
  retire(key: string, now: number): boolean {
    const block = this.#inUse.get(key);
    if (block === undefined) return false;
    this.#inUse.delete(key);
    this.#keyOf.delete(block);
    this.#retired.set(block, { key, since: now });
    return true;
  }

  /** An RCU barrier came after every retirement so far: their blocks are free now. */
  settle(): void {
    for (const block of this.#retired.keys()) this.#release(block);
    this.#retired.clear();
  }

  /** A block the kernel's entries point at (adopted at start: its ring of `size` slots at
   * `base`), content unknown: kept out of use until retired with the key returned. New
   * blocks are cut above it; it is reused later only where it lines up as one of ours. */
  reserve(base: number, size: number): string {
    // a block this pool already placed (the program was loaded again over our own maps)
    // keeps its key: two keys on one block would free it while the other still uses it
    const placed = this.#keyOf.get(base);
    if (placed !== undefined) return placed;
    const key = `adopted:${base}`;
    this.#keyOf.set(base, key);
    const cap = capacityOf(size);
    for (const free of this.#free.values()) free.delete(base);
    this.#retired.delete(base);
    this.#inUse.set(key, base);
    this.#content.delete(base);
    if (base % cap === 0) this.#capacity.set(base, cap);
    this.#top = Math.max(this.#top, base + cap);
    return key;
  }

  /** Forget what the blocks hold (the kernel's rings may have been changed behind us):
   * the next placement of each content writes it whole. */
  distrust(): void {
    this.#content.clear();
    this.#freeByKey.clear();
    this.#freeByLineage.clear();
  }

  /** What the block at `base` should hold, where known (the drift check compares it). */
  content(base: number): Uint32Array | undefined {
    return this.#content.get(base);
  }

  /** slots the blocks cut so far span (the ring array's high-water mark) */
  get slotsCut(): number {
    return this.#top;
  }

  keys(): IterableIterator<string> {
    return this.#inUse.keys();
  }

  get used(): number {
    return this.#inUse.size;
  }

  #take(block: number, key: string, slots: Uint32Array, lineage: string | undefined): RingPlacement {
    this.#inUse.set(key, block);
    this.#keyOf.set(block, key);
    return this.#fill(block, key, slots, lineage);
  }

  /** a fresh block of `cap` slots from the top of the array */
  #cut(cap: number): number {
    const base = Math.ceil(this.#top / cap) * cap;
    if (base + cap > this.totalSlots)
      throw new RangeError(
        `the XDP ring array (${this.totalSlots} slots) is full: ${this.#inUse.size} distinct Maglev rings in use; lower --max-table-size`,
      );
    this.#top = base + cap;
    this.#capacity.set(base, cap);
    return base;
  }

  #fill(block: number, key: string, slots: Uint32Array, lineage: string | undefined): RingPlacement {
    const old = this.#content.get(block);
    const writes: number[] = [];
    for (let k = 0; k < slots.length; k++) if (old === undefined || old[k] !== slots[k]) writes.push(k);
    // the block's tail past a shorter ring is never read (ring_size bounds the slot)
    this.#content.set(block, old !== undefined && old.length > slots.length ? merge(old, slots) : slots);
    this.#held.set(block, { key, lineage: lineage ?? this.#held.get(block)?.lineage });
    return { base: block, writes };
  }

  /** a free block of capacity `cap` whose known content still matches `holds` */
  #freeHolding(
    cap: number,
    block: number | undefined,
    holds: (h: { key: string; lineage: string | undefined }) => boolean,
  ): number | undefined {
    if (block === undefined || !this.#free.get(cap)?.has(block) || !this.#content.has(block))
      return undefined;
    const h = this.#held.get(block);
    return h && holds(h) ? block : undefined;
  }

  #release(block: number): void {
    const cap = this.#capacity.get(block);
    if (cap === undefined) return; // an adopted block that does not line up: never reused
    let free = this.#free.get(cap);
    if (!free) {
      free = new Set();
      this.#free.set(cap, free);
    }
    free.add(block);
    const h = this.#held.get(block);
    if (!h || !this.#content.has(block)) return;
    this.#freeByKey.set(h.key, block);
    if (h.lineage !== undefined) this.#freeByLineage.set(h.lineage, block);
  }

  #reclaim(now: number): void {
    for (const [block, r] of this.#retired)
      if (now - r.since >= this.graceMs) {
        this.#release(block);
        this.#retired.delete(block);
      }
  }
}

function merge(old: Uint32Array, head: Uint32Array): Uint32Array {
  const out = Uint32Array.from(old);
  out.set(head, 0);
  return out;
}
