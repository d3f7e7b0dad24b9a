/**
 * `--claim-nat`: the NAT claim transaction (nftables/render/nat-claim.ts) sent once before
 * the data plane starts; refused, the host does not start (exit 1). Nothing to undo: the
 * claim stays with the table.
 */
import type { NftDriver } from "../../../drivers/nft.ts";
import type { LbHostPart } from "../../lb-host.ts";
import { natClaimTransaction } from "../../nftables/render/nat-claim.ts";
import { StartRefused } from "../start-refused.ts";

export class NatClaimPart implements LbHostPart {
  readonly name = "nat-claim";

  constructor(
    readonly nft: NftDriver,
    readonly table: string,
  ) {}

  async start(): Promise<undefined> {
    try {
      await this.nft.run(natClaimTransaction(this.table));
    } catch (e) {
      throw new StartRefused(1, `error: --claim-nat: ${(e as Error).message}`);
    }
    return undefined;
  }
}
