/**
 * The LB host's first part: is the nftables data plane usable here (one terse listing of
 * the table through the nft driver)? If not, the host does not start (exit 1) and says what
 * to do instead. Nothing to undo.
 */
import type { NftDriver } from "../../../drivers/nft.ts";
import { PasslbError } from "../../../errors.ts";
import type { LbHostPart } from "../../lb-host.ts";
import { StartRefused } from "../start-refused.ts";

export class PreflightPart implements LbHostPart {
  readonly name = "preflight";

  constructor(
    readonly nft: NftDriver,
    readonly table: string,
  ) {}

  async start(): Promise<undefined> {
    try {
      await this.nft.dump(this.table, { terse: true });
    } catch (e) {
      const message = e instanceof PasslbError ? e.message : String(e);
      throw new StartRefused(
        1,
        `error: the nftables data plane is not usable here (${message}); run as root with nft ≥ 1.0, or use the userspace proxy`,
      );
    }
    return undefined;
  }
}
