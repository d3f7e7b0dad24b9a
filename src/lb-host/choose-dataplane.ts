/**
 * Which data plane `--dataplane auto` means here, and why (issue 7): nftables when the
 * process is root and the `nft` command exists, else the userspace proxy. With
 * `--xdp-interface` given, auto goes one step further: the XDP fast path in front of the
 * nftables table when XDP is usable here (bpftool, ip, the compiled program:
 * docs/dataplane-xdp.md), else nftables with the reason XDP was not taken. An explicit
 * request is honoured, or refused with the reason it cannot work.
 * Pure: the facts arrive as arguments.
 */
export type DataplaneRequest = "auto" | "nftables" | "userspace" | "xdp";

export type DataplaneChoice =
  | { readonly ok: true; readonly dataplane: "nftables" | "userspace" | "xdp"; readonly reason: string }
  | { readonly ok: false; readonly reason: string };

export interface XdpFacts {
  /** the client-facing interfaces `--xdp-interface` named (empty: none) */
  readonly interfaces: readonly string[];
  /** why XDP cannot run here (no bpftool, no compiled program…), or undefined */
  readonly problem?: string | undefined;
}

export function chooseDataplane(facts: {
  readonly isRoot: boolean;
  readonly hasNft: boolean;
  readonly requested: DataplaneRequest;
  readonly xdp?: XdpFacts;
}): DataplaneChoice {
  const { isRoot, hasNft, requested } = facts;
  const missing =
    !isRoot && !hasNft ? "not root and no nft command" : !isRoot ? "not root" : "no nft command";
  const xdp = facts.xdp ?? { interfaces: [] };
  const xdpProblem = xdp.interfaces.length === 0 ? "no --xdp-interface given" : (xdp.problem ?? undefined);
  if (requested === "userspace") return { ok: true, dataplane: "userspace", reason: "requested" };
  if (requested === "xdp") {
    if (!isRoot || !hasNft)
      return {
        ok: false,
        reason: `xdp needs root and nft (nftables handles what XDP passes on): ${missing}`,
      };
    if (xdpProblem) return { ok: false, reason: `xdp cannot run here: ${xdpProblem}` };
    return { ok: true, dataplane: "xdp", reason: `requested, on ${xdp.interfaces.join(", ")}` };
  }
  if (requested === "nftables") {
    if (isRoot && hasNft) return { ok: true, dataplane: "nftables", reason: "requested" };
    return { ok: false, reason: `nftables needs root and the nft command (${missing})` };
  }
  if (isRoot && hasNft) {
    if (xdp.interfaces.length === 0)
      return { ok: true, dataplane: "nftables", reason: "auto: root and nft are available" };
    if (xdpProblem)
      return {
        ok: true,
        dataplane: "nftables",
        reason: `auto: root and nft are available; not XDP: ${xdpProblem}`,
      };
    return {
      ok: true,
      dataplane: "xdp",
      reason: `auto: root, nft, bpftool and the compiled program are available; XDP on ${xdp.interfaces.join(", ")}`,
    };
  }
  return { ok: true, dataplane: "userspace", reason: `auto: ${missing}, so the userspace proxy` };
}
