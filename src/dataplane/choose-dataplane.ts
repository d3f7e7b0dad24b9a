/**
 * Which data plane `--dataplane auto` means here, and why (issue 7): nftables when the
 * process is root and the `nft` command exists, else the userspace proxy. An explicit
 * request is honoured, or refused with the reason when nftables cannot work.
 * Pure: the facts arrive as arguments.
 */
export type DataplaneRequest = "auto" | "nftables" | "userspace";

export type DataplaneChoice =
  | { readonly ok: true; readonly dataplane: "nftables" | "userspace"; readonly reason: string }
  | { readonly ok: false; readonly reason: string };

export function chooseDataplane(facts: {
  readonly isRoot: boolean;
  readonly hasNft: boolean;
  readonly requested: DataplaneRequest;
}): DataplaneChoice {
  const { isRoot, hasNft, requested } = facts;
  const missing =
    !isRoot && !hasNft ? "not root and no nft command" : !isRoot ? "not root" : "no nft command";
  if (requested === "userspace") return { ok: true, dataplane: "userspace", reason: "requested" };
  if (requested === "nftables") {
    if (isRoot && hasNft) return { ok: true, dataplane: "nftables", reason: "requested" };
    return { ok: false, reason: `nftables needs root and the nft command (${missing})` };
  }
  if (isRoot && hasNft)
    return { ok: true, dataplane: "nftables", reason: "auto: root and nft are available" };
  return { ok: true, dataplane: "userspace", reason: `auto: ${missing}, so the userspace proxy` };
}
