/**
 * The plans the nftables renderer's property tests run on: the shared nft fixture nodes
 * with a Cluster Service with source ranges and a Local Service with zonal affinity
 * (test/fixtures/nft). Test-only.
 */
import { readManifests } from "../../src/cluster/manifest-files.ts";
import { decodeDocuments } from "../../src/k8s/decode.ts";
import { planSnapshot } from "../../src/plan/planner.ts";

/** The fixture's nodes, in the order the tests index health states by. */
export const NFT_FIXTURE_NODES = ["node-a1", "node-a2", "node-b1"];

export async function nftFixturePlans() {
  const read = await readManifests(
    [
      "test/fixtures/nft/_base",
      "test/fixtures/nft/cluster-ranges/input.yaml",
      "test/fixtures/nft/local-zonal-affinity/input.yaml",
    ],
    async () => "",
  );
  const { snapshot } = decodeDocuments(read.documents);
  return { plans: planSnapshot(snapshot).plans, zones: snapshot.config.zones };
}
