/**
 * `--dataplane xdp`: the fast path in front of the table (lb-host/fast-path.ts), started
 * before the data plane so the first committed pass reaches it. A start that fails stops
 * the host (exit 1). Undo: its timers; the kernel keeps forwarding.
 */
import type { FastPath } from "../../fast-path.ts";
import type { LbHostPart, Undo } from "../../lb-host.ts";
import { StartRefused } from "../start-refused.ts";

export class FastPathPart implements LbHostPart {
  readonly name = "fast-path";

  constructor(readonly fastPath: FastPath) {}

  async start(): Promise<Undo> {
    try {
      await this.fastPath.start();
    } catch (e) {
      throw new StartRefused(1, `error: xdp: ${(e as Error).message}`);
    }
    return () => this.fastPath.stop();
  }
}
