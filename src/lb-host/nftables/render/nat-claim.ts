/**
 * The NAT claim (docs/dataplane-nftables.md "LB hosts that are also nodes"): a tiny table
 * `inet <table>-claim` with one nat chain in prerouting at priority dstnat - 20 that gives
 * every packet passlb marked for a node (mark 0x5a……, nft-state.ts) an identity DNAT
 * (destination := its own destination). The kernel runs all nat chains of a hook in
 * priority order and stops at the first one that sets up a binding for the connection
 * (net/netfilter/nf_nat_core.c, nf_nat_inet_fn), so kube-proxy's DNAT at dstnat (iptables
 * or nftables mode, or `passlb agent` in the lab) never sees VIP traffic the LB forwards,
 * while conntrack still tracks it (the LB's connection pinning by ct mark keeps working).
 *
 * Pure: one Transaction out (drivers/nft-transaction.ts). It does not stop kube-proxy's *filter* rules (see the docs for the one
 * case that matters).
 */
import { type Transaction, TransactionBuilder } from "../../../drivers/nft-transaction.ts";
import { MARK_BASE } from "./nft-state.ts";

export function natClaimTransaction(table: string): Transaction {
  const mark = `0x${MARK_BASE.toString(16)}`;
  const chain = "prerouting";
  return new TransactionBuilder(`${table}-claim`)
    .add({ kind: "table" })
    .delete({ kind: "table" })
    .add({ kind: "table" })
    .add({
      kind: "chain",
      name: chain,
      base: "type nat hook prerouting priority dstnat - 20; policy accept;",
    })
    .add({
      kind: "rule",
      chain,
      rule: `meta mark & 0xff000000 == ${mark} meta nfproto ipv4 dnat ip to ip daddr`,
    })
    .add({
      kind: "rule",
      chain,
      rule: `meta mark & 0xff000000 == ${mark} meta nfproto ipv6 dnat ip6 to ip6 daddr`,
    })
    .done();
}
