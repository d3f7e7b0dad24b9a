/**
 * Adapter: one `passlb controller` replica — the Kubernetes source (Services and
 * LoadBalancerIPPools; cluster/kube-source.ts), the Lease elector and the reconcile loop,
 * wired together. Every read and every change of leadership runs a pass; only the leader
 * writes. A replica that becomes leader decides from the source's current state, which
 * already holds every address in status, so an address is never handed out twice.
 *
 * With `manageEndpointSlices` it also watches Pods and writes passlb's own EndpointSlices for
 * the Services it owns (slice-sync.ts).
 *
 * With `apiCalls`, every request's outcome goes to that sink (observed-api.ts for the loop's
 * and the elector's, source-reads-report.ts for the source's lists and watches, SliceSync's
 * own), which turns repeated refusals into the loud failure signals (docs/kubernetes.md
 * "When the API server refuses").
 *
 * Deliberately not here: flags, logging format, process signals (cli/controller-command.ts).
 */
import type { KubeConfig } from "@kubernetes/client-node";
import type { KubeApiCallSink } from "../cluster/kube-api-health.ts";
import { KubeSnapshotSource } from "../cluster/kube-source.ts";
import { clientNodeTransport } from "../cluster/kube-transport.ts";
import { sourceReadsReport } from "../cluster/source-reads-report.ts";
import type { Clock } from "../health/clock.ts";
import { ControllerLoop, type ControllerLoop as Loop, type LoopReport } from "./controller-loop.ts";
import type { ControllerOptions } from "./controller-writes.ts";
import { KubeControllerApi, KubeLeaseApi } from "./kube-controller-api.ts";
import { DEFAULT_ELECTION_TIMING, type ElectionConfig, LEASE_NAME } from "./leader-election.ts";
import { LeaseElector } from "./lease-elector.ts";
import { observedControllerApi, observedLeaseApi } from "./observed-api.ts";
import { SliceSync } from "./slice-sync.ts";

export const CONTROLLER_COMPONENT = "passlb-controller";

export interface ControllerRuntimeOptions {
  readonly kubeConfig: KubeConfig;
  /** the controller's namespace: where its Lease lives */
  readonly namespace: string;
  /** this replica's name in the Lease (the Pod name, plus a random suffix) */
  readonly identity: string;
  readonly controller: ControllerOptions;
  readonly election?: Partial<Omit<ElectionConfig, "identity">>;
  /** also write EndpointSlices for owned selector Services (clusters without the controller) */
  readonly manageEndpointSlices?: boolean;
  readonly clock: Clock;
  readonly random: () => number;
  /** told of every API call's outcome (web/kube-api-monitor.ts): the loud failure signals */
  readonly apiCalls?: KubeApiCallSink;
  /** test speed-ups: source debounce and reflector backoff, loop backoff */
  readonly tuning?: {
    readonly debounce?: { quietMs: number; maxMs: number };
    readonly sourceBackoff?: { initialMs: number; maxMs: number };
    readonly loopBackoff?: { initialMs: number; maxMs: number };
  };
  readonly report?: LoopReport & {
    readonly onLeading?: (leading: boolean) => void;
    readonly onLeaseError?: (error: unknown) => void;
    /** objects left out of the source's read (decoding problems), each once when it appears */
    readonly onSourceProblems?: (problems: readonly string[]) => void;
    readonly onSliceWrites?: (n: number) => void;
    readonly onSliceError?: (what: string, error: Error) => void;
  };
}

export class ControllerRuntime {
  readonly source: KubeSnapshotSource;
  readonly elector: LeaseElector;
  readonly loop: Loop;
  readonly slices: SliceSync | undefined;
  #started = false;

  constructor(o: ControllerRuntimeOptions) {
    const tuning = o.tuning ?? {};
    this.source = new KubeSnapshotSource({
      transport: clientNodeTransport(o.kubeConfig),
      clock: o.clock,
      random: o.random,
      pools: true,
      pods: o.manageEndpointSlices === true,
      ...(tuning.debounce && { debounce: tuning.debounce }),
      ...(tuning.sourceBackoff && { backoff: tuning.sourceBackoff }),
      ...(o.apiCalls && sourceReadsReport(o.apiCalls)),
    });
    const election: ElectionConfig = { ...DEFAULT_ELECTION_TIMING, ...o.election, identity: o.identity };
    if (election.renewDeadlineMs >= election.leaseDurationMs)
      throw new Error("the renew deadline must be shorter than the lease duration");
    const calls = o.apiCalls;
    const leaseApi = new KubeLeaseApi(o.kubeConfig, o.namespace, LEASE_NAME);
    const controllerApi = new KubeControllerApi(o.kubeConfig, {
      component: CONTROLLER_COMPONENT,
      instance: o.identity,
    });
    this.elector = new LeaseElector(calls ? observedLeaseApi(leaseApi, calls) : leaseApi, election, o.clock, {
      onLeading: (leading) => {
        o.report?.onLeading?.(leading);
        if (leading) {
          this.loop.notify();
          this.slices?.notify();
        }
      },
      onError: (e) => o.report?.onLeaseError?.(e),
      onSettled: () => calls?.ok("lease"),
    });
    this.loop = new ControllerLoop({
      api: calls ? observedControllerApi(controllerApi, calls) : controllerApi,
      view: () => {
        const snapshot = this.source.snapshot;
        return snapshot ? { services: snapshot.services, pools: this.source.ipPools } : undefined;
      },
      isLeader: () => this.elector.isLeader(),
      options: o.controller,
      clock: o.clock,
      ...(tuning.loopBackoff && { backoff: tuning.loopBackoff }),
      ...(o.report && { report: o.report }),
    });
    this.slices = o.manageEndpointSlices
      ? new SliceSync({
          kubeConfig: o.kubeConfig,
          defaultClass: o.controller.defaultClass,
          isLeader: () => this.elector.isLeader(),
          snapshot: () => this.source.snapshot,
          clock: o.clock,
          ...(calls && { calls }),
          ...(o.report?.onSliceError && { onError: o.report.onSliceError }),
          ...(o.report?.onSliceWrites && { onWrites: o.report.onSliceWrites }),
        })
      : undefined;
    this.#report = o.report;
  }

  readonly #report: ControllerRuntimeOptions["report"];

  /** Starts electing and watching; resolves once the source delivered its first read. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    this.elector.start();
    // a problem is reported when it appears, not again on every read while it lasts
    let reported = new Set<string>();
    await this.source.start({
      onChange: () => {},
      onRead: (read) => {
        const fresh = read.problems.filter((p) => !reported.has(p));
        reported = new Set(read.problems);
        if (fresh.length > 0) this.#report?.onSourceProblems?.(fresh);
        if (read.ok) {
          this.loop.notify();
          this.slices?.notify();
        }
      },
    });
  }

  /** Stops writing at once, then the source; gives the Lease up unless `crash` (tests). */
  async stop(options: { release: boolean } = { release: true }): Promise<void> {
    await this.elector.stop(options);
    await this.loop.stop();
    await this.slices?.stop();
    await this.source.close();
  }
}
