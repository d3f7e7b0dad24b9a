/**
 * A part of the nftables LB host that cannot start throws this: the line to print (or none,
 * when the part reported already) and the process's exit code — 1 for a host that cannot run
 * here (nft unusable, --conntrack-max refused, XDP, --claim-nat, the announcer), 2 for input
 * that cannot be read at start (cli/lb-nftables.ts prints it and exits with it).
 */
export class StartRefused extends Error {
  constructor(
    readonly exitCode: 1 | 2,
    readonly line: string | undefined,
  ) {
    super(line ?? `exit ${exitCode}`);
    this.name = "StartRefused";
  }
}
