/** `passlb lb --announce bgp` flags: what they become, and a clear error naming the flag otherwise. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type BgpFlags, bgpAnnounceConfig, parseBgpPeer } from "./lb-announce-bgp.ts";

const base: BgpFlags = { announce: "bgp", bgpAsn: "64512", bgpPeer: ["192.0.2.254:64500"] };

test("--bgp-peer: ADDR:ASN and [IPv6]:ASN", () => {
  assert.deepEqual(parseBgpPeer("192.0.2.254:64500"), { address: "192.0.2.254", asn: 64500, family: "IPv4" });
  assert.deepEqual(parseBgpPeer("[fd00::1]:4200000000"), {
    address: "fd00::1",
    asn: 4200000000,
    family: "IPv6",
  });
  assert.match(parseBgpPeer("fd00::1:64500") as string, /not ADDR:ASN \(IPv6: \[ADDR\]:ASN\)/);
  assert.match(
    parseBgpPeer("192.0.2.300:1") as string,
    /"192.0.2.300" in "192.0.2.300:1" is not an IP address/,
  );
  assert.match(parseBgpPeer("[192.0.2.1]:1") as string, /brackets are for IPv6/);
  assert.match(parseBgpPeer("192.0.2.1:0") as string, /ASN 0 .* must be 1..4294967295/);
});

test("the defaults are the spec's settings", () => {
  const c = bgpAnnounceConfig(base);
  assert.ok(c && typeof c !== "string");
  assert.deepEqual(c.settings, {
    asn: 64512,
    peers: [{ address: "192.0.2.254", asn: 64500, family: "IPv4" }],
    kernelTable: 4242,
    bfd: { intervalMs: 100, multiplier: 3 },
    holdSeconds: 9,
    connectRetrySeconds: 1,
    communities: [],
  });
  assert.equal(c.stateDir, "/run/passlb/bgp");
  assert.equal(c.convergeMs, 2000);
  assert.equal(bgpAnnounceConfig({ ...base, announce: "l2" }), undefined);
  const noBfd = bgpAnnounceConfig({ ...base, bfd: false, bfdIntervalMs: "1" });
  assert.ok(
    noBfd && typeof noBfd !== "string" && noBfd.settings?.bfd === undefined && noBfd.settings !== undefined,
  );
});

test("neither --bgp-asn nor --bgp-peer: the sessions come from LoadBalancerBGPPeer objects", () => {
  const c = bgpAnnounceConfig({ announce: "bgp" });
  assert.ok(c && typeof c !== "string");
  assert.equal(c.settings, undefined);
  assert.equal(c.kernelTable, 4242);
  assert.match(
    String(bgpAnnounceConfig({ announce: "bgp", bgpCommunity: ["64512:1"] })),
    /--bgp-community: with LoadBalancerBGPPeer objects .* set it in the objects/,
  );
  assert.match(
    String(bgpAnnounceConfig({ announce: "bgp", bgpPeer: ["192.0.2.254:64500"] })),
    /needs --bgp-asn/,
  );
});

test("bad flags: one message naming the flag", () => {
  const cases: [Partial<BgpFlags>, RegExp][] = [
    [{ bgpAsn: undefined as never }, /needs --bgp-asn/],
    [{ bgpAsn: "x" }, /--bgp-asn: x must be/],
    [{ bgpPeer: [] }, /at least one --bgp-peer/],
    [{ bgpPeer: ["192.0.2.254:1", "192.0.2.254:2"] }, /192.0.2.254 is given twice/],
    [{ bgpRouterId: "fd00::1" }, /--bgp-router-id: fd00::1 is not an IPv4/],
    [{ bgpCommunity: ["65536:1"] }, /--bgp-community/],
    [{ bfdIntervalMs: "5" }, /--bfd-interval-ms: 5 must be 10..60000/],
    [{ bfdMultiplier: "1" }, /--bfd-multiplier: 1 must be 2..255/],
    [{ bgpHoldS: "2" }, /--bgp-hold-s: 2 must be 0 or 3..65535/],
    [{ bgpKernelTable: "254" }, /--bgp-kernel-table/],
    [{ bgpConvergeMs: "-1" }, /--bgp-converge-ms/],
  ];
  for (const [change, message] of cases) {
    const flags = { ...base, ...change } as BgpFlags;
    if ("bgpAsn" in change && change.bgpAsn === undefined) delete flags.bgpAsn;
    assert.match(String(bgpAnnounceConfig(flags)), message);
  }
});

test("passlb lb with a bad BGP flag exits 2 with the message, before touching nft", async () => {
  const { runNftablesLb } = await import("./lb-nftables.ts");
  const { FakeNft } = await import("../drivers/fake-nft.ts");
  const { fakeLbHostDrivers } = await import("../lb-host/nftables-host/fake-drivers.ts");
  let stderr = "";
  const nft = new FakeNft();
  const code = await runNftablesLb(
    {
      filename: ["examples/quickstart"],
      manifests: [],
      table: "passlb",
      seed: "1",
      maxTableSize: "4093",
      routes: false,
      probe: false,
      pollMs: "1000",
      driftCheckMs: "0",
      peers: [],
      handoverMs: "1000",
      announce: "bgp",
      bgpAsn: "64512",
      bgpPeer: ["192.0.2.254"],
    },
    { stdout: () => {}, stderr: (s) => (stderr += s), readStdin: async () => "" },
    () => new AbortController().signal,
    undefined,
    undefined,
    { drivers: fakeLbHostDrivers({ nft }) },
  );
  assert.equal(code, 2);
  assert.match(stderr, /error: --bgp-peer: "192.0.2.254" is not ADDR:ASN/);
  assert.deepEqual(nft.scripts, [], "nothing was applied");
});
