/**
 * A binary min-heap of items ordered by a due time: the prober's schedule, so one timer
 * (armed for the earliest due time) serves every target instead of one timer each.
 * Plain data structure; no time or I/O of its own.
 */

export interface Due<T> {
  readonly due: number;
  readonly item: T;
}

export class DueHeap<T> {
  readonly #a: Due<T>[] = [];

  get size(): number {
    return this.#a.length;
  }

  peek(): Due<T> | undefined {
    return this.#a[0];
  }

  push(due: number, item: T): void {
    const a = this.#a;
    a.push({ due, item });
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = a[p] as Due<T>;
      const node = a[i] as Due<T>;
      if (parent.due <= node.due) break;
      a[p] = node;
      a[i] = parent;
      i = p;
    }
  }

  pop(): Due<T> | undefined {
    const a = this.#a;
    const top = a[0];
    const last = a.pop();
    if (top === undefined || last === undefined || a.length === 0) return top;
    a[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && (a[l] as Due<T>).due < (a[m] as Due<T>).due) m = l;
      if (r < a.length && (a[r] as Due<T>).due < (a[m] as Due<T>).due) m = r;
      if (m === i) break;
      const t = a[m] as Due<T>;
      a[m] = a[i] as Due<T>;
      a[i] = t;
      i = m;
    }
    return top;
  }

  clear(): void {
    this.#a.length = 0;
  }
}
