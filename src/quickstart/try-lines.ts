/**
 * The "how to try it" lines `passlb up` prints for each planned Service: a `curl` for HTTP
 * ports, `nc` for other TCP and for UDP, with a source address inside the Service's
 * loadBalancerSourceRanges when it has some, and one line per client zone for zonal
 * Services (`--interface` picks a loopback source address in that zone). Pure.
 */
import type { PasslbConfigSpec } from "../k8s/objects.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";

function firstHost(cidr: string): string {
  const [base] = cidr.split("/");
  const parts = (base ?? "").split(".").map(Number);
  parts[3] = (parts[3] ?? 0) + 10;
  return parts.join(".");
}

export function tryLines(plans: readonly LoadBalancerPlan[], config: PasslbConfigSpec): string[] {
  const out: string[] = [];
  for (const plan of plans) {
    const vip = plan.vips.find((v) => v.family === "IPv4") ?? plan.vips[0];
    if (!vip) continue;
    const source = plan.sourceRanges[0] ? firstHost(plan.sourceRanges[0]) : undefined;
    for (const l of plan.listeners) {
      const http = l.name === "http" || l.name.startsWith("http-");
      if (l.protocol === "TCP" && http) {
        out.push(`curl -s http://${vip.address}:${l.port}/${source ? `   # add --interface ${source}` : ""}`);
        if (plan.zonalAffinity)
          for (const z of config.zones)
            if (z.clientCIDRs[0])
              out.push(
                `curl -s --interface ${firstHost(z.clientCIDRs[0])} http://${vip.address}:${l.port}/   # a client in ${z.name}`,
              );
      } else if (l.protocol === "TCP") {
        out.push(`echo hello | nc${source ? ` -s ${source}` : ""} -w1 ${vip.address} ${l.port}`);
      } else if (l.protocol === "UDP") {
        out.push(`echo hello | nc -u -w1${source ? ` -s ${source}` : ""} ${vip.address} ${l.port}`);
      }
    }
  }
  return out;
}
