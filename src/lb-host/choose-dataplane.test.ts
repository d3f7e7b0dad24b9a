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

test("xdp: auto takes it with --xdp-interface where it can run, and says why not otherwise", () => {
  const ok = chooseDataplane({
    isRoot: true,
    hasNft: true,
    requested: "auto",
    xdp: { interfaces: ["eth0"] },
  });
  assert.equal(ok.ok && ok.dataplane, "xdp");
  assert.match(ok.reason, /XDP on eth0/);
  const stale = chooseDataplane({
    isRoot: true,
    hasNft: true,
    requested: "auto",
    xdp: { interfaces: ["eth0"], problem: "no compiled XDP program" },
  });
  assert.equal(stale.ok && stale.dataplane, "nftables");
  assert.match(stale.reason, /not XDP: no compiled XDP program/);
  const none = chooseDataplane({ isRoot: true, hasNft: true, requested: "xdp", xdp: { interfaces: [] } });
  assert.equal(none.ok, false);
  assert.match(none.reason, /no --xdp-interface/);
  const user = chooseDataplane({
    isRoot: false,
    hasNft: true,
    requested: "xdp",
    xdp: { interfaces: ["eth0"] },
  });
  assert.equal(user.ok, false);
  assert.match(user.reason, /needs root/);
});
