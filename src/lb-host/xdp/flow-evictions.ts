/**
 * Evictions from the XDP flow table, derived (pure). A BPF LRU hash evicts silently
 * (kernel/bpf/bpf_lru_list.c keeps no count), but in passlb's table only the program adds
 * keys — `flow_new` counts each (passlb-xdp.c `choose_node`) — and nothing deletes them, so
 * every insert the table did not grow by evicted another entry:
 *
 *   evictions = (inserts − inserts at the first reading) − (entries − entries then)
 *
 * Taken over the whole run rather than per interval, the skew between reading the counters
 * and dumping the table cancels instead of adding up; the total is kept monotonic (a
 * counter) and restarts from the next reading when the counters went backwards (the maps
 * were created again). A key deleted by hand (`bpftool map delete`) reads as one eviction;
 * one added by hand hides one.
 */
export class FlowEvictions {
  #base: { readonly inserts: number; readonly entries: number } | undefined;
  #lastInserts = 0;
  #total = 0;
  #carried = 0;

  /** One reading: the cumulative `flow_new` count and the table's entries now. Returns
   * the evictions since the first reading. */
  read(inserts: number, entries: number): number {
    if (!this.#base || inserts < this.#lastInserts) {
      this.#carried = this.#total;
      this.#base = { inserts, entries };
    }
    this.#lastInserts = inserts;
    const since = inserts - this.#base.inserts - (entries - this.#base.entries);
    this.#total = Math.max(this.#total, this.#carried + since);
    return this.#total;
  }
}
