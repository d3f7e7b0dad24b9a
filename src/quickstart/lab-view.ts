/**
 * The live view in lab mode, as pure functions: where the numbers come from and how they
 * become the same `LiveState` the userspace mode draws (live-view.ts).
 *
 * - Node health and weight per Service: the LB's own `/api/v1/state` (docs/dashboard.md),
 *   read through the relay into its namespace. Until it answers, the plans with every
 *   node `?` (unknown).
 * - Share per pod: the kernel counts new connections (conntrack state new) leaving each
 *   node towards each of its pods' veths, per pod port, in a small table of its own in the
 *   node's namespace (`inet plbview`, `podCounterScript`, rerun when the lab changes); the LB in nftables mode does not
 *   see pods, and the echo servers keep no counts. A port maps to a Service through the
 *   lab's EndpointSlices (`serviceTargets`); recent counts are differences over a window
 *   (counter-window.ts).
 * No I/O: scripts and JSON in, data out.
 */
import type { LabLayout } from "../lab/lab-layout.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import type { DashboardService } from "../web/dashboard-state.ts";
import type { LiveService, LiveState } from "./live-view.ts";

export const VIEW_TABLE = "plbview";

/**
 * One counter: `c_<pod>_<tcp|udp>_<port>` in node `node`, for `pod` (lab host names are
 * unique, so a counter never passes from one pod to another).
 */
export interface PodCounter {
  readonly node: string;
  readonly name: string;
  /** `namespace/name` */
  readonly pod: string;
  readonly protocol: "TCP" | "UDP";
  readonly port: number;
}

/**
 * Per node, the nft script of its counter table and the counters in it. The script can run
 * again on a changed layout: counters that stay keep their values (declaring an existing
 * counter leaves it alone), the rules are replaced, and the counters of `previous` (node →
 * what the last script installed) that are no longer wanted are deleted.
 */
export function podCounterScript(
  layout: LabLayout,
  previous: ReadonlyMap<string, readonly PodCounter[]> = new Map(),
): Map<string, { script: string; counters: PodCounter[] }> {
  const out = new Map<string, { script: string; counters: PodCounter[] }>();
  for (const n of layout.nodes) {
    const counters: PodCounter[] = [];
    const rules: string[] = [];
    for (const p of n.pods)
      for (const port of p.spec.ports) {
        const name = `c_${p.name}_${port.protocol.toLowerCase()}_${port.port}`;
        counters.push({
          node: n.name,
          name,
          pod: `${p.namespace}/${p.name}`,
          protocol: port.protocol,
          port: port.port,
        });
        rules.push(
          `add rule inet ${VIEW_TABLE} forward oifname "${p.veth}" meta l4proto ${port.protocol.toLowerCase()} th dport ${port.port} ct state new counter name "${name}"`,
        );
      }
    const wanted = new Set(counters.map((c) => c.name));
    const stale = (previous.get(n.name) ?? []).filter((c) => !wanted.has(c.name));
    const script = [
      `table inet ${VIEW_TABLE} {`,
      ...counters.map((c) => `  counter ${c.name} { }`),
      "  chain forward {",
      "    type filter hook forward priority 10; policy accept;",
      "  }",
      "}",
      `flush chain inet ${VIEW_TABLE} forward`,
      ...rules,
      ...stale.map((c) => `delete counter inet ${VIEW_TABLE} ${c.name}`),
      "",
    ].join("\n");
    out.set(n.name, { script, counters });
  }
  return out;
}

/** `nft -j list counters table inet plbview` → counter name → packets (one per new connection). */
export function parseCounters(json: string): Map<string, number> {
  const out = new Map<string, number>();
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch {
    return out;
  }
  const items = (doc as { nftables?: unknown[] } | null)?.nftables ?? [];
  for (const item of items) {
    const c = (item as { counter?: { name?: unknown; packets?: unknown } }).counter;
    if (c && typeof c.name === "string" && typeof c.packets === "number") out.set(c.name, c.packets);
  }
  return out;
}

interface SliceLike {
  readonly metadata?: { readonly namespace?: string; readonly labels?: Record<string, string> };
  readonly ports?: readonly { readonly port?: number; readonly protocol?: string }[];
  readonly endpoints?: readonly {
    readonly nodeName?: string;
    readonly targetRef?: { readonly namespace?: string; readonly name?: string };
  }[];
}

/** Service (`namespace/name`) → the `pod|protocol|port` keys its endpoints serve on. */
export function serviceTargets(endpointSlices: readonly object[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const s of endpointSlices as readonly SliceLike[]) {
    const name = s.metadata?.labels?.["kubernetes.io/service-name"];
    if (!name) continue;
    const svc = `${s.metadata?.namespace ?? "default"}/${name}`;
    const set = out.get(svc) ?? new Set<string>();
    out.set(svc, set);
    for (const e of s.endpoints ?? []) {
      const ref = e.targetRef;
      if (!ref?.name) continue;
      for (const p of s.ports ?? [])
        if (p.port !== undefined)
          set.add(`${ref.namespace ?? "default"}/${ref.name}|${p.protocol ?? "TCP"}|${p.port}`);
    }
  }
  return out;
}

export interface LabLiveInput {
  readonly now: number;
  readonly startedAt: number;
  readonly windowSeconds: number;
  readonly plans: readonly LoadBalancerPlan[];
  /** the LB's view, when its dashboard answered */
  readonly lb: readonly DashboardService[] | undefined;
  /** counter key `pod|protocol|port` → new connections within the window */
  readonly recent: ReadonlyMap<string, number>;
  readonly targets: ReadonlyMap<string, ReadonlySet<string>>;
  /** pod (`namespace/name`) → node */
  readonly podNodes: ReadonlyMap<string, string>;
  readonly events: readonly string[];
}

export function labLiveState(input: LabLiveInput): LiveState {
  const lbBy = new Map((input.lb ?? []).map((s) => [s.service, s]));
  const services: LiveService[] = input.plans.map((plan) => {
    const lb = lbBy.get(plan.service);
    const notes: string[] = [];
    if (plan.weighted) notes.push("weighted");
    if (plan.zonalAffinity) notes.push("zonal");
    if (plan.sessionAffinity.type === "ClientIP") notes.push("ClientIP affinity");
    if (plan.sourceRanges.length > 0) notes.push(`from ${plan.sourceRanges.join(" ")}`);
    const counts = new Map<string, number>();
    for (const key of input.targets.get(plan.service) ?? []) {
      const n = input.recent.get(key) ?? 0;
      const pod = key.split("|")[0]!;
      if (n > 0) counts.set(pod, (counts.get(pod) ?? 0) + n);
    }
    return {
      service: plan.service,
      listeners: plan.vips.flatMap((v) => plan.listeners.map((l) => `${l.protocol} ${v.address}:${l.port}`)),
      policy: plan.externalTrafficPolicy,
      notes,
      failOpen: lb?.listeners[0]?.failOpen ?? false,
      nodes: lb
        ? lb.nodes
            .filter((n) => n.state !== "excluded")
            .map((n) => ({
              node: n.node,
              zone: n.zone,
              health: n.state === "excluded" ? "unknown" : n.state,
              weight: n.weight,
              active: n.active,
            }))
        : plan.members.map((m) => ({
            node: m.node,
            zone: m.zone,
            health: "unknown",
            weight: m.weight,
            active: true,
          })),
      pods: [...counts.keys()]
        .sort()
        .map((pod) => ({ pod, node: input.podNodes.get(pod) ?? "?", connections: counts.get(pod)! })),
    };
  });
  return {
    now: input.now,
    startedAt: input.startedAt,
    windowSeconds: input.windowSeconds,
    services,
    events: [...input.events],
  };
}
