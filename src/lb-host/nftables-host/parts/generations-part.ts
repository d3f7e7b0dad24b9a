/**
 * The kernel's nftables generation (`nft monitor`, nftables/nft-generation.ts) as a part:
 * the data plane is built with this object as its GenerationWatch, and the monitor runs
 * from start to undo. A drift check lists the table only after a commit; before start (and
 * after undo) the generation is unknown, so a drift check lists it every time.
 */
import type { LbHostPart, Undo } from "../../lb-host.ts";
import type { GenerationWatch } from "../../nftables/nft-generation.ts";

export class GenerationsPart implements LbHostPart, GenerationWatch {
  readonly name = "generations";
  readonly #open: () => GenerationWatch;
  #watch: GenerationWatch | undefined;

  constructor(open: () => GenerationWatch) {
    this.#open = open;
  }

  start(): Undo {
    const watch = this.#open();
    this.#watch = watch;
    return () => {
      this.#watch = undefined;
      watch.close();
    };
  }

  token(): string | undefined {
    return this.#watch?.token();
  }

  tableToken(table: string): string | undefined {
    return this.#watch?.tableToken?.(table);
  }

  close(): void {
    this.#watch?.close();
  }
}
