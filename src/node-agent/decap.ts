/**
 * The node side of routed networks (issue 21, docs/agent-dataplane.md "Decapsulation"): which
 * decapsulation devices a node needs for an encapsulation kind, the `ip` commands that make
 * them, and the IPv4 reverse-path-filter settings under which the inner packet survives.
 * Pure: the kind and the current `rp_filter` of `all` in, argv lists and settings out.
 *
 * - Devices: metadata ("external") devices receive every tunnel packet of their kind on the
 *   node, whatever the key or VNI: `vxlan gpe external dstport P` (one for both outer
 *   families), `ipip external` + `ip6tnl mode ip6ip6 external`, `gre external` + `ip6gre
 *   external`. GUE is received by `ip fou add port P gue` (and `-6`), which hands the inner
 *   IPIP/IP6IP6 packet to those same ipip devices (iproute2 `ip fou help`; GLB's
 *   docs/setup/backend-proxy-setup.md does the same with tunl0).
 * - rp_filter: the kernel uses max(conf.all, conf.DEV) (Documentation/networking/ip-sysctl.rst
 *   "rp_filter": "The max value from conf/{all,interface}/rp_filter is used"). Strict (1)
 *   always drops the inner packet (it arrives on the tunnel, the route back to the client is
 *   the uplink); loose (2) drops it while the device has no IPv4 address (measured in the lab;
 *   fib_validate_source's `no_addr` path). So: the device's own value is 0; `all` = 1 is
 *   loosened to 2; under 2 the device gets 127.0.0.42/32, the address Katran gives its
 *   ipip0 ("it must have at least single ip configured", katran@19f08fe:EXAMPLE.md).
 *   IPv6 has no rp_filter sysctl.
 * - VIPs are not made local: the agent's (or kube-proxy's) DNAT in prerouting matches the
 *   inner packet addressed to the VIP (verified in the lab; Service
 *   `status.loadBalancer.ingress[].ipMode: VIP`). Only a hostNetwork listener on the VIP
 *   would need it on `lo` — not done here (docs/agent-dataplane.md).
 *
 * Does not: run anything (decap-device.ts), clamp the MSS (agent-ruleset.ts with
 * clampedMss from encap.ts).
 */
import { DEFAULT_ENCAP_PORT, type Encap } from "../lb-host/routing/encap.ts";

export interface DecapDevice {
  readonly name: string;
  /** `ip link add NAME …` arguments after the name */
  readonly args: readonly string[];
  /** the `info_kind` `ip -d -j link show` reports */
  readonly kernelKind: string;
}

/** the address loose-mode rp_filter needs on the device (Katran's) */
export const RP_LOOSE_ADDRESS = "127.0.0.42/32";

export function decapDevices(encap: Encap): DecapDevice[] {
  const port = String(encap.port ?? DEFAULT_ENCAP_PORT[encap.kind] ?? 0);
  const ipip: DecapDevice[] = [
    { name: "plbipip0", args: ["type", "ipip", "external"], kernelKind: "ipip" },
    { name: "plbip6tnl0", args: ["type", "ip6tnl", "mode", "ip6ip6", "external"], kernelKind: "ip6tnl" },
  ];
  switch (encap.kind) {
    case "vxlan-gpe":
      return [
        {
          name: "plbvg0",
          args: ["type", "vxlan", "gpe", "external", "dstport", port, "udp6zerocsumtx", "udp6zerocsumrx"],
          kernelKind: "vxlan",
        },
      ];
    case "ipip":
    case "gue":
      return ipip;
    case "gre":
      return [
        { name: "plbgre0", args: ["type", "gre", "external"], kernelKind: "gre" },
        { name: "plbip6gre0", args: ["type", "ip6gre", "external"], kernelKind: "ip6gre" },
      ];
  }
}

/** `ip` argv (without `ip`) of the GUE receive ports; none for the other kinds. */
export function fouCommands(encap: Encap): string[][] {
  if (encap.kind !== "gue") return [];
  const port = String(encap.port ?? DEFAULT_ENCAP_PORT.gue);
  return [
    ["fou", "add", "port", port, "gue"],
    ["-6", "fou", "add", "port", port, "gue"],
  ];
}

export interface RpFilterPlan {
  /** `net.ipv4.conf.X.rp_filter=V` lines to write */
  readonly sysctls: readonly string[];
  /** add RP_LOOSE_ADDRESS to every device */
  readonly address: boolean;
  /** what was changed beyond the devices, for the log */
  readonly note: string | undefined;
}

/** The settings under which decapsulated packets pass the reverse-path filter. */
export function rpFilterPlan(devices: readonly DecapDevice[], all: number): RpFilterPlan {
  const sysctls = devices.map((d) => `net.ipv4.conf.${d.name}.rp_filter=0`);
  if (all === 0) return { sysctls, address: false, note: undefined };
  if (all === 2) return { sysctls, address: true, note: undefined };
  return {
    sysctls: ["net.ipv4.conf.all.rp_filter=2", ...sysctls],
    address: true,
    note: `net.ipv4.conf.all.rp_filter was ${all} (strict): set to 2 (loose), since strict drops every decapsulated packet`,
  };
}

/** Everything `passlb agent --decap` runs, in order (for docs, golden tests and the adapter's
 * log): devices, GUE ports, the loose-mode address. Sysctls are separate (rpFilterPlan). */
export function decapCommands(encap: Encap, rp: RpFilterPlan): string[][] {
  const out: string[][] = [];
  for (const d of decapDevices(encap)) {
    out.push(["link", "add", d.name, ...d.args]);
    out.push(["link", "set", d.name, "up"]);
    if (rp.address) out.push(["addr", "add", RP_LOOSE_ADDRESS, "dev", d.name]);
  }
  out.push(...fouCommands(encap));
  return out;
}
