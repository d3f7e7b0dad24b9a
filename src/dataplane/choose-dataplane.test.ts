import assert from "node:assert/strict";
import { test } from "node:test";
import { chooseDataplane } from "./choose-dataplane.ts";

test("auto picks nftables only with root and nft, and says why", () => {
  assert.deepEqual(chooseDataplane({ isRoot: true, hasNft: true, requested: "auto" }), {
    ok: true,
    dataplane: "nftables",
    reason: "auto: root and nft are available",
  });
  const c = chooseDataplane({ isRoot: false, hasNft: true, requested: "auto" });
  assert.equal(c.ok && c.dataplane, "userspace");
  assert.match(c.reason, /not root/);
  const d = chooseDataplane({ isRoot: true, hasNft: false, requested: "auto" });
  assert.equal(d.ok && d.dataplane, "userspace");
  assert.match(d.reason, /no nft/);
});

test("an explicit request is honoured or refused with the reason", () => {
  assert.equal(chooseDataplane({ isRoot: false, hasNft: false, requested: "userspace" }).ok, true);
  const r = chooseDataplane({ isRoot: false, hasNft: true, requested: "nftables" });
  assert.equal(r.ok, false);
  assert.match(r.reason, /needs root/);
});
