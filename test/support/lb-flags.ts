/**
 * The flags commander gives `passlb lb` (nftables) for `-f PATH` and no other option, for
 * tests that build the LB host's config or the host itself from flags.
 */
import type { NftLbFlags } from "../../src/cli/lb-nftables.ts";

export function lbFlags(path: string, change: Partial<NftLbFlags> = {}): NftLbFlags {
  return {
    filename: [path],
    manifests: [],
    table: "passlb",
    seed: "1",
    maxTableSize: "4093",
    routes: true,
    probe: true,
    pollMs: "1000",
    driftCheckMs: "5000",
    countersMs: "10000",
    encapCheckPorts: "61000-61255",
    announce: "none",
    peers: [],
    ...change,
  };
}
