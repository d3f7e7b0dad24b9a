import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeProxyV2, encodeProxyV2, encodeProxyV2Local } from "./proxy-protocol.ts";

// Expected bytes written out from the spec (haproxy doc/proxy-protocol.txt, section 2.2).
const SIG = "0d0a0d0a000d0a515549540a";

test("TCP over IPv4: signature, 0x21, 0x11, length 12, addresses, ports", () => {
  const h = encodeProxyV2({
    transport: "TCP",
    srcAddr: "192.0.2.10",
    srcPort: 51000,
    dstAddr: "203.0.113.1",
    dstPort: 80,
  });
  assert.equal(h.toString("hex"), `${SIG}2111000cc000020acb007101c7380050`);
});

test("UDP over IPv4 uses transport 2 (DGRAM)", () => {
  const h = encodeProxyV2({
    transport: "UDP",
    srcAddr: "127.0.4.1",
    srcPort: 1,
    dstAddr: "127.0.1.1",
    dstPort: 8053,
  });
  assert.equal(h[13], 0x12);
  assert.equal(h.length, 28);
});

test("TCP over IPv6: family 2, length 36", () => {
  const h = encodeProxyV2({
    transport: "TCP",
    srcAddr: "fd00::1",
    srcPort: 1,
    dstAddr: "fd00:10::2",
    dstPort: 2,
  });
  assert.equal(h.subarray(12, 16).toString("hex"), "21210024");
  assert.equal(h.length, 16 + 36);
  assert.equal(h.subarray(16, 32).toString("hex"), "fd000000000000000000000000000001");
});

test("LOCAL command carries no addresses", () => {
  assert.equal(encodeProxyV2Local().toString("hex"), `${SIG}20000000`);
  const d = decodeProxyV2(encodeProxyV2Local());
  assert.deepEqual(d, { kind: "header", length: 16, addresses: undefined });
});

test("decode inverts encode for both families and reports incomplete input", () => {
  for (const a of [
    { transport: "TCP" as const, srcAddr: "192.0.2.10", srcPort: 51000, dstAddr: "203.0.113.1", dstPort: 80 },
    { transport: "UDP" as const, srcAddr: "fd00::1:0:0:1", srcPort: 9, dstAddr: "fd00:10::ff", dstPort: 53 },
  ]) {
    const bytes = Buffer.concat([encodeProxyV2(a), Buffer.from("GET /")]);
    const d = decodeProxyV2(bytes);
    assert.equal(d.kind, "header");
    if (d.kind !== "header") return;
    assert.deepEqual(d.addresses, a);
    assert.equal(bytes.subarray(d.length).toString(), "GET /");
    assert.deepEqual(decodeProxyV2(bytes.subarray(0, d.length - 1)), { kind: "incomplete" });
  }
});

test("plain traffic is not mistaken for a header", () => {
  assert.equal(decodeProxyV2(Buffer.from("GET / HTTP/1.1\r\n")).kind, "invalid");
  assert.equal(decodeProxyV2(Buffer.from([0x0d, 0x0a])).kind, "incomplete");
});
