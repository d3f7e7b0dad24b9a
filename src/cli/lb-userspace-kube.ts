/**
 * `passlb lb --dataplane userspace` in Kubernetes mode: the userspace proxy following the
 * cluster. Each read of the source (already debounced) is planned with VIPs from status
 * (the controller's), the prober gets the new probe targets, and the proxy's listeners
 * follow. A read with objects left out (decoding problems) keeps the last good plan of
 * every Service that vanished from it; while the API server is away there are no reads
 * and the proxy keeps serving what it has.
 *
 * Wiring only (the manifest mode stays in lb-command.ts, unchanged).
 */

import { serviceForwarding } from "../forwarding/forwarding-state.ts";
import { ProberHealth } from "../health/prober-health.ts";
import { describeTcpPlumbing, type TcpPlumbingChoice } from "../lb-host/userspace/tcp-plumbing.ts";
import { UserspaceLb } from "../lb-host/userspace/userspace-lb.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { createPlanCache, planSnapshot } from "../plan/planner.ts";
import { loopbackSnapshot } from "../quickstart/loopback-rewrite.ts";
import { poolUsage } from "../web/pool-usage.ts";
import type { KubeLbRun } from "./lb-nftables.ts";
import type { CliIo } from "./load-input.ts";
import type { Observability } from "./observability.ts";
import { runUntil } from "./run-until.ts";
import type { RunEnv } from "./up-command.ts";

export interface UserspaceKubeFlags {
  proxyProtocol?: boolean;
  /** node:net (the default) or the experimental libuv handles (tcp-plumbing.ts) */
  tcp?: TcpPlumbingChoice;
  loopback?: boolean;
  duration?: string;
}

export async function runUserspaceKube(
  kube: KubeLbRun,
  opts: UserspaceKubeFlags,
  io: CliIo,
  env: RunEnv,
  obs: Observability,
): Promise<void> {
  const tcp = opts.tcp ?? "net";
  const lb = new UserspaceLb({ seed: 0x5eed, proxyProtocol: opts.proxyProtocol ?? false, tcp });
  io.stdout(`  ${describeTcpPlumbing(lb.tcpPlumbing, tcp)}\n`);
  // connections and bytes: the LB's own tallies, read at each scrape (as in manifest mode)
  obs.observer.traffic(() => lb.trafficTotals());
  const cache = createPlanCache();
  let plans: readonly LoadBalancerPlan[] = [];
  let previous = new Map<string, LoadBalancerPlan>();
  let pendingSince: number | undefined;
  let announced = new Set<string>();
  let chain: Promise<void> = Promise.resolve();
  const apply = (): Promise<void> => {
    chain = chain.then(async () => {
      const since = pendingSince ?? performance.now();
      pendingSince = undefined;
      const fw = plans.map((p) => serviceForwarding(p, prober.lookup, { seed: 0x5eed }));
      const findings = await lb.update(fw);
      obs.observer.forwarding(fw, prober.lookup);
      obs.metrics.programmed("userspace", (performance.now() - since) / 1000);
      obs.observer.setFindings(findings);
    });
    return chain;
  };
  const prober: ProberHealth = new ProberHealth({
    onChange: () => void apply(),
    onEvent: (e) => obs.observer.proberEvent(e),
    onProbe: (node, ok, seconds) => obs.observer.probeFinished(node, ok, seconds),
  });
  const first = kube.source.start({
    onChange: () => {
      pendingSince ??= performance.now();
    },
    onRead: async (read) => {
      if (!read.ok) return;
      const next = kube.prepare(read);
      const snapshot = opts.loopback ? loopbackSnapshot(next.snapshot).snapshot : next.snapshot;
      let planned = planSnapshot(snapshot, { ipMode: "Proxy", vipSource: "status", previous }, cache).plans;
      if (next.degraded) {
        const present = new Set(planned.map((p) => p.service));
        const kept = [...previous.values()].filter((p) => !present.has(p.service));
        planned = [...planned, ...kept].sort((a, b) => (a.service < b.service ? -1 : 1));
      }
      plans = planned;
      previous = new Map(plans.map((p) => [p.service, p]));
      obs.metrics.ipPools(poolUsage(snapshot.config.pools, plans));
      // issues and VIPs are announced when they appear, not on every read
      const seen = new Set<string>();
      for (const p of plans) {
        for (const i of p.issues) {
          const key = `issue ${i.code} ${i.subject} ${i.message}`;
          seen.add(key);
          if (!announced.has(key)) obs.logger.finding(i, "plan_issue");
        }
        for (const v of p.vips) {
          const key = `${p.service}: ingress ${v.address}`;
          seen.add(key);
          if (!announced.has(key)) io.stdout(`  ${key} ipMode ${p.ipMode}\n`);
        }
      }
      announced = seen;
      prober.setPlans(plans);
      await apply();
    },
  });
  const dashboard = await obs.serve();
  if (dashboard) io.stdout(`  dashboard: ${dashboard} (metrics at ${dashboard}metrics)\n`);
  await runUntil(env.shutdownSignal(), opts.duration);
  await kube.source.close();
  await first;
  await chain;
  await prober.close();
  await lb.close();
  await obs.close();
}
