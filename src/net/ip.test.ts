import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  canonicalIp,
  cidrContains,
  formatCidr,
  formatIp,
  isSpecialPurposeEndpointIp,
  joinHostPort,
  parseCidr,
  parseIp,
  parseIpRange,
} from "./ip.ts";

test("IPv6 is printed per RFC 5952: lower case, longest zero run compressed, single zero kept", () => {
  assert.equal(canonicalIp("2001:DB8:0:0:0:0:0:1"), "2001:db8::1");
  assert.equal(canonicalIp("2001:db8:0:1:0:0:0:1"), "2001:db8:0:1::1");
  assert.equal(canonicalIp("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1");
  assert.equal(canonicalIp("::"), "::");
  assert.equal(canonicalIp("1:0:0:2:0:0:0:3"), "1:0:0:2::3");
});

test("invalid addresses are refused, including leading zeros and double ::", () => {
  for (const bad of ["01.2.3.4", "1.2.3", "256.1.1.1", "1::2::3", "12345::", "fe80::1%eth0", "", "a.b.c.d"])
    assert.equal(parseIp(bad), undefined, bad);
});

test("address round trip: format(parse(x)) parses back to the same value", () => {
  fc.assert(
    fc.property(fc.oneof(fc.ipV4(), fc.ipV6()), (text) => {
      const ip = parseIp(text);
      if (!ip) return; // fast-check emits some forms Kubernetes rejects (e.g. IPv4 with leading zeros)
      assert.deepEqual(parseIp(formatIp(ip)), ip);
    }),
  );
});

test("CIDRs: strict parsing rejects host bits, loose parsing clears them", () => {
  assert.equal(parseCidr("192.0.2.1/24"), undefined);
  const loose = parseCidr("192.0.2.77/26", true);
  assert.ok(loose);
  assert.equal(formatCidr(loose), "192.0.2.64/26");
  assert.ok(cidrContains(loose, parseIp("192.0.2.127")!));
  assert.ok(!cidrContains(loose, parseIp("192.0.2.128")!));
  assert.ok(!cidrContains(loose, parseIp("fd00::1")!));
  assert.equal(parseCidr("fd00::/129"), undefined);
});

test("ranges need one family and first ≤ last", () => {
  assert.ok(parseIpRange("203.0.113.10-203.0.113.20"));
  assert.equal(parseIpRange("203.0.113.20-203.0.113.10"), undefined);
  assert.equal(parseIpRange("203.0.113.1-fd00::1"), undefined);
});

test("endpoint IPs that Kubernetes refuses", () => {
  for (const ip of ["0.0.0.0", "127.0.0.1", "169.254.1.1", "224.0.0.1", "::", "::1", "fe80::1", "ff02::1"])
    assert.ok(isSpecialPurposeEndpointIp(parseIp(ip)!), ip);
  for (const ip of ["192.0.2.1", "224.0.1.1", "fd00::1", "ff05::1"])
    assert.ok(!isSpecialPurposeEndpointIp(parseIp(ip)!), ip);
});

test("joinHostPort brackets IPv6 like Go's net.JoinHostPort", () => {
  assert.equal(joinHostPort("192.0.2.1", 80), "192.0.2.1:80");
  assert.equal(joinHostPort("fd00::1", 80), "[fd00::1]:80");
});

test("property: canonicalIp's fast path for canonical IPv6 text agrees with parse-and-print", () => {
  const oracle = (t: string) => {
    const ip = parseIp(t);
    return ip ? formatIp(ip) : undefined;
  };
  // eight words (zeros common), each printed with optional leading zeros or in upper
  // case, any run of zero words (even one) possibly compressed: canonical and not
  const written = fc
    .record({
      words: fc.array(fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 0, max: 0xffff })), {
        minLength: 8,
        maxLength: 8,
      }),
      pad: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 8, maxLength: 8 }),
      upper: fc.boolean(),
      gapStart: fc.integer({ min: 0, max: 8 }),
      gapLength: fc.integer({ min: 0, max: 8 }),
    })
    .map(({ words, pad, upper, gapStart, gapLength }) => {
      const groups = words.map((w, i) => {
        const hex = w.toString(16);
        return (pad[i] === 1 ? hex.padStart(4, "0") : pad[i] === 2 ? `0${hex}` : hex).slice(-5);
      });
      let end = gapStart;
      while (end < 8 && end - gapStart < gapLength && words[end] === 0) end++;
      const text =
        end > gapStart
          ? `${groups.slice(0, gapStart).join(":")}::${groups.slice(end).join(":")}`
          : groups.join(":");
      return upper ? text.toUpperCase() : text;
    });
  const tokens = fc
    .array(fc.constantFrom("0", "1", "a", "F", "00", "fffff", ":", "::", ".", "1.2.3.4"), { maxLength: 14 })
    .map((t) => t.join(""));
  fc.assert(
    fc.property(fc.oneof(written, tokens), (text) => {
      assert.equal(canonicalIp(text), oracle(text), text);
    }),
    { numRuns: 3000 },
  );
  for (const t of [
    "::",
    "::1",
    "1::",
    "fd00:2::30d40",
    "0::1",
    "1:0:0:2:0:0:0:3",
    "1:0:0:2::3",
    "1::2:0:0:3",
  ])
    assert.equal(canonicalIp(t), oracle(t), t);
});
