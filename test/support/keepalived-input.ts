/** Test-only: three LB hosts on one segment and a KeepalivedInput for lb-1 with four IPv4
 * and two IPv6 VIPs, one not ready — shared by the renderer's unit tests and its golden. */
import type { KeepalivedInput } from "../../src/announce/keepalived-config.ts";

export const peers3 = new Map([
  ["lb-1", { IPv4: "192.0.2.2", IPv6: "fd00:192:0:1::2" }],
  ["lb-2", { IPv4: "192.0.2.3", IPv6: "fd00:192:0:1::3" }],
  ["lb-3", { IPv4: "192.0.2.4", IPv6: "fd00:192:0:1::4" }],
]);

export const keepalivedInput = (over: Partial<KeepalivedInput> = {}): KeepalivedInput => ({
  self: "lb-1",
  interface: "eth0",
  peers: peers3,
  vips: ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4", "fd00:10::1", "fd00:10::2"].map(
    (vip) => ({ vip, ready: vip !== "203.0.113.3" }),
  ),
  advertMs: 100,
  fifo: "/run/passlb/l2/notify.fifo",
  trackDir: "/run/passlb/l2/track",
  ...over,
});
