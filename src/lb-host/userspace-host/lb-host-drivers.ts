/**
 * What the userspace LB host needs from the machine, as narrow interfaces: the proxy's
 * sockets (`UserspaceLb`, an LbDataplane), the health prober (`ProberHealth`), the manifest source and a
 * monotonic clock for the programming latency; and where it reports (`UserspaceLbSink`:
 * stdout/stderr lines, logs, metrics and the dashboard). The real drivers are
 * userspace-host/host-drivers.ts; userspace-host/build-userspace-lb-host.test.ts passes fakes of the same
 * shape. Types only.
 */
import type { FolderOptions } from "../../cluster/manifest-folder-source.ts";
import type { SnapshotSource } from "../../cluster/snapshot-source.ts";
import type { HealthLookup } from "../../forwarding/forwarding-state.ts";
import type { ProberHealthOptions } from "../../health/prober-health.ts";
import type { LoadBalancerPlan } from "../../plan/load-balancer-plan.ts";
import type { Logger } from "../../web/logger.ts";
import type { Metrics } from "../../web/metrics.ts";
import type { Observer } from "../../web/observer.ts";
import type { LbDataplane } from "../lb-dataplane.ts";
import type { TrafficTotals } from "../userspace/traffic-counters.ts";
import type { UserspaceLbOptions } from "../userspace/userspace-lb.ts";

/** UserspaceLb's surface (userspace/userspace-lb.ts): the LbDataplane every data plane
 * implements, plus the proxy's TCP plumbing and its connection tallies */
export interface UserspaceProxy extends LbDataplane {
  readonly tcpPlumbing: "libuv" | "net";
  trafficTotals(): TrafficTotals[];
}

/** ProberHealth's surface (health/prober-health.ts) */
export interface UserspaceHealth {
  readonly lookup: HealthLookup;
  setPlans(plans: readonly LoadBalancerPlan[]): void;
  close(): Promise<void>;
}

export interface UserspaceLbDrivers {
  proxy(options: UserspaceLbOptions): UserspaceProxy;
  health(options: ProberHealthOptions): UserspaceHealth;
  /** the watched manifest paths (manifests mode) */
  folder(options: FolderOptions): SnapshotSource;
  /** milliseconds, monotonic (performance.now) */
  now(): number;
}

/** where the host reports: the CLI's Observability plus its two output streams */
export interface UserspaceLbSink {
  /** a line for stdout: the data plane, each VIP as it appears, the dashboard */
  out(line: string): void;
  /** a line for stderr: input problems, Services kept at their last good state */
  err(line: string): void;
  readonly observer: Pick<
    Observer,
    "traffic" | "forwarding" | "setFindings" | "proberEvent" | "probeFinished"
  >;
  readonly metrics: Pick<Metrics, "programmed" | "ipPools">;
  readonly logger: Pick<Logger, "finding" | "log">;
  /** starts the dashboard; its URL, or undefined when off */
  serve(): Promise<string | undefined>;
}
