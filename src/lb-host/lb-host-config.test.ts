/**
 * The nftables LB host's flags → config: the defaults give a config, each bad flag is
 * refused with a message naming it (the messages the CLI has always printed), and the input
 * mode decides what is required (-f outside Kubernetes; BGP peers from flags or objects).
 */
import assert from "node:assert/strict";
import test from "node:test";
import { lbFlags } from "../../test/support/lb-flags.ts";
import type { NftLbFlags } from "../cli/lb-nftables.ts";
import { nftablesLbHostConfig } from "./lb-host-config.ts";

/** the flags commander gives `passlb lb -f manifests/` with no other option */
const flags = (change: Partial<NftLbFlags> = {}) => lbFlags("manifests/", change);
const files = { kube: false, bgpPeers: false };

test("the defaults give a config that carries the parsed values", () => {
  const r = nftablesLbHostConfig(flags({ seed: "7", driftCheckMs: "0", conntrackMax: "262144" }), files);
  assert.ok(r.ok, r.ok ? "" : r.message);
  assert.deepEqual(r.config.paths, ["manifests/"]);
  assert.equal(r.config.seed, 7);
  assert.equal(r.config.driftMs, 0);
  assert.equal(r.config.conntrackMax, 262144);
  assert.equal(r.config.forward.mode, "route");
  assert.equal(r.config.announce, undefined);
  assert.equal(r.config.bgp, undefined);
  assert.equal(r.config.sizeFor(3) <= 4093, true);
});

for (const [name, change, message] of [
  ["no input outside Kubernetes", { filename: [] }, /^pass -f\/--manifests DIR/],
  ["a seed out of range", { seed: "4294967296" }, /^--seed must be 0\.\.4294967295$/],
  ["a table that is no nft identifier", { table: "pass lb" }, /^--table must be an nft identifier$/],
  ["a table size that is not a listed prime", { maxTableSize: "4000" }, /^--max-table-size: /],
  ["a poll period under 50 ms", { pollMs: "10" }, /^--poll-ms must be ≥ 50/],
  ["a negative drift period", { driftCheckMs: "-1" }, /--drift-check-ms and --counters-ms ≥ 0$/],
  ["a conntrack max of 0", { conntrackMax: "0" }, /^--conntrack-max must be a positive integer, got 0$/],
  ["an unknown forward mode", { forward: "tunnel" }, /^--forward tunnel: expected route or encap$/],
  [
    "--encap-check without the prober",
    { forward: "encap", encapCheck: true, probe: false },
    /^--encap-check needs/,
  ],
  ["an unknown announce mode", { announce: "arp" }, /^--announce must be none, l2 or bgp$/],
  ["bgp without peers or objects", { announce: "bgp" }, /^--announce bgp needs --bgp-asn and --bgp-peer/],
] as const)
  test(`refuses ${name}, naming the flag`, () => {
    const r = nftablesLbHostConfig(flags(change as Partial<NftLbFlags>), files);
    assert.equal(r.ok, false);
    assert.match(r.ok ? "" : r.message, message);
  });

test("Kubernetes mode needs no -f, and LoadBalancerBGPPeers stand in for --bgp-peer", () => {
  const kube = nftablesLbHostConfig(flags({ filename: [], announce: "bgp" }), { kube: true, bgpPeers: true });
  assert.ok(kube.ok, kube.ok ? "" : kube.message);
  assert.deepEqual(kube.config.paths, []);
  assert.equal(kube.config.bgp?.settings, undefined);
  const noPeers = nftablesLbHostConfig(flags({ filename: [], announce: "bgp" }), {
    kube: true,
    bgpPeers: false,
  });
  assert.equal(noPeers.ok, false);
});
