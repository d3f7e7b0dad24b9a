/**
 * What every good read (a manifests read or a read from the API server) tells the parts,
 * in this order: the pass bookkeeping (its plans and Nodes), the fast path (zones), the
 * cluster's BGP configuration, the announcer (through the book), the prober (its targets;
 * manifests reads also make the health answers new), the tunnel check's routes, the pool
 * metrics, and the programming latency's start. The data plane gets the snapshot from the
 * input part itself.
 */
import type { Observability } from "../../../cli/observability.ts";
import type { Snapshot } from "../../../k8s/snapshot.ts";
import type { LoadBalancerPlan } from "../../../plan/load-balancer-plan.ts";
import { poolUsage } from "../../../web/pool-usage.ts";
import type { FastPath } from "../../fast-path.ts";
import type { PassBook } from "../pass-book.ts";
import type { ClusterBgp } from "./cluster-bgp.ts";
import type { HealthPart } from "./health-part.ts";
import type { TunnelCheckPart } from "./tunnel-check-part.ts";

export interface ReadListeners {
  readonly book: PassBook;
  readonly fastPath: FastPath | undefined;
  readonly cluster: ClusterBgp | undefined;
  readonly health: HealthPart | undefined;
  readonly tunnelCheck: TunnelCheckPart | undefined;
  readonly obs: Observability | undefined;
  readonly changed: () => void;
}

export type PlannedRead = (
  snapshot: Snapshot,
  plans: readonly LoadBalancerPlan[],
  newTargets: boolean,
) => void;

export function plannedRead(l: ReadListeners): PlannedRead {
  return (snapshot, plans, newTargets) => {
    l.book.read(plans, snapshot.nodes);
    l.fastPath?.setZones(snapshot.config.zones);
    l.cluster?.read(snapshot);
    l.book.told();
    l.health?.setPlans(plans);
    l.tunnelCheck?.sync();
    if (newTargets) l.health?.targetsChanged();
    l.obs?.metrics.ipPools(poolUsage(snapshot.config.pools, plans));
    l.changed();
  };
}
