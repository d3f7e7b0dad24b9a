/**
 * The "how to try it" lines of `passlb up --dataplane nftables`: per Service listener, the
 * lab's own client (src/lab/lab-client.ts) run in a client host through `passlb lab exec`,
 * making a bounded number of connections (or UDP requests) and printing which pod and node
 * answered each and the client address the pod saw; for zonal Services one line per zone's
 * client, otherwise the first zone's. Pure.
 */
import { joinHostPort } from "../net/ip.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";

export function labTryLines(
  plans: readonly LoadBalancerPlan[],
  clients: ReadonlyMap<string, string>,
  labName: string,
  /** how to start the client script with node, e.g. `/run/passlb-lab/up/bin/lab-client.mjs` */
  clientScript: string,
): string[] {
  const out: string[] = [];
  const all = [...clients.values()];
  for (const plan of plans) {
    const vip = plan.vips.find((v) => v.family === "IPv4") ?? plan.vips[0];
    if (!vip) continue;
    const from = plan.zonalAffinity ? all : all.slice(0, 1);
    for (const l of plan.listeners)
      for (const client of from) {
        const proto = l.protocol === "UDP" ? " --proto udp" : "";
        out.push(
          `passlb lab exec --name ${labName} ${client} -- node ${clientScript} --target ${joinHostPort(vip.address, l.port)}${proto} --count 20`,
        );
      }
  }
  return out;
}
