/**
 * What a node's agent does to packets addressed to a LoadBalancer VIP, in standalone mode
 * (no kube-proxy): per VIP, protocol and port, the endpoints new connections are spread
 * over, whether the client address is rewritten, and how the endpoint is picked. Pure:
 * plans and merged endpoints in, rules out; `agent-ruleset.ts` prints them for nft.
 *
 * Rules, as kube-proxy applies them to traffic for a LoadBalancer ingress IP
 * (kubernetes pkg/proxy/topology.go, pkg/proxy/nftables):
 *   - externalTrafficPolicy Local: only this node's ready endpoints, else its serving and
 *     terminating ones (`categorizeEndpoints`); the client address is kept;
 *   - externalTrafficPolicy Cluster: the cluster's ready endpoints (topology hints apply),
 *     else serving and terminating ones; a connection sent to an endpoint on another node
 *     is masqueraded so the reply comes back through this node;
 *   - nothing to send to: when the Service port has no usable endpoint anywhere
 *     (`hasAnyEndpoints` false) new connections are rejected (TCP gets an ICMP port
 *     unreachable, which Linux reports as ECONNREFUSED); when it has endpoints but none
 *     this node may use (eTP Local, none here) they are dropped. kubernetes
 *     pkg/proxy/nftables/proxier.go `syncProxyRules`: `!hasEndpoints` → `goto reject-chain`
 *     (whose one rule is `reject`), `!hasExternalEndpoints` → `drop`;
 *   - only endpoints of the VIP's family;
 *   - `loadBalancerSourceRanges`: other sources are dropped (kube-proxy's firewall chain);
 *   - sessionAffinity ClientIP: the endpoint is a hash of the client address (kube-proxy
 *     uses a timed "recent" list; a hash keeps a client on one endpoint while the set is
 *     unchanged, which is what the lab tests observe).
 * It deliberately does not pick nodes (that is the LB host's Maglev table), answer health
 * checks (health-servers.ts) or handle NodePorts and ClusterIPs.
 */
import { categorizeEndpoints } from "../endpoints/categorize.ts";
import type { ServicePortEndpoints } from "../endpoints/merge.ts";
import type { IpFamily } from "../net/ip.ts";
import { parseCidr } from "../net/ip.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { listenerKey } from "../plan/load-balancer-plan.ts";

export interface AgentServiceInput {
  readonly plan: LoadBalancerPlan;
  /** the Service's endpoints merged per port (`mergeServiceEndpoints`) */
  readonly ports: readonly ServicePortEndpoints[];
}

export interface AgentRulesInput {
  readonly node: string;
  readonly zone: string | undefined;
  readonly services: readonly AgentServiceInput[];
}

export interface AgentTarget {
  readonly address: string;
  readonly port: number;
  /** on another node: masquerade (Cluster only) */
  readonly remote: boolean;
  /** `namespace/pod` when known */
  readonly target: string | undefined;
}

export interface AgentRule {
  /** `namespace/name` */
  readonly service: string;
  /** `TCP/80` */
  readonly listener: string;
  readonly family: IpFamily;
  readonly vip: string;
  readonly protocol: "tcp" | "udp" | "sctp";
  readonly port: number;
  readonly policy: "Cluster" | "Local";
  /** allowed client CIDRs of the VIP's family; null means every source */
  readonly sourceRanges: readonly string[] | null;
  readonly pick: "random" | "client-ip";
  /** sorted by address then port; empty means reject (`noEndpoints`) or drop */
  readonly targets: readonly AgentTarget[];
  /** no usable endpoint anywhere (ready, or serving and terminating): reject new connections */
  readonly noEndpoints: boolean;
  /** addresses of every serving endpoint of the VIP's family, whatever the policy, sorted:
   * what UDP/SCTP conntrack entries may still point at (`conntrack-cleanup.ts`, as
   * kube-proxy's `CleanStaleEntries` uses `IsServing`) */
  readonly serving: readonly string[];
  /** targets are serving but terminating endpoints (nothing else was left) */
  readonly terminatingFallback: boolean;
}

export function agentRules(input: AgentRulesInput): AgentRule[] {
  const rules: AgentRule[] = [];
  const services = [...input.services].sort((a, b) => compare(a.plan.service, b.plan.service));
  for (const { plan, ports } of services) {
    for (const vip of plan.vips) {
      const ranges =
        plan.sourceRanges.length === 0
          ? null
          : plan.sourceRanges.filter((r) => parseCidr(r, true)?.family === vip.family);
      for (const listener of plan.listeners) {
        const port = ports.find((p) => p.name === listener.name && p.protocol === listener.protocol);
        const sameFamily = (port?.endpoints ?? []).filter((e) => e.family === vip.family);
        const sets = categorizeEndpoints({ endpoints: sameFamily, nodeName: input.node, zone: input.zone });
        const chosen = plan.externalTrafficPolicy === "Local" ? sets.localEndpoints : sets.clusterEndpoints;
        const targets = chosen
          .map((e) => ({
            address: e.address,
            port: e.port,
            remote: plan.externalTrafficPolicy === "Cluster" && e.nodeName !== input.node,
            target: e.target,
          }))
          .sort((a, b) => compare(a.address, b.address) || a.port - b.port);
        rules.push({
          service: plan.service,
          listener: listenerKey(listener),
          family: vip.family,
          vip: vip.address,
          protocol: listener.protocol.toLowerCase() as AgentRule["protocol"],
          port: listener.port,
          policy: plan.externalTrafficPolicy,
          sourceRanges: ranges,
          pick: plan.sessionAffinity.type === "ClientIP" ? "client-ip" : "random",
          targets,
          noEndpoints: !sets.hasAnyEndpoints,
          serving: [...new Set(sameFamily.filter((e) => e.serving).map((e) => e.address))].sort(compare),
          terminatingFallback: chosen.length > 0 && chosen.every((e) => !e.ready),
        });
      }
    }
  }
  return rules;
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
