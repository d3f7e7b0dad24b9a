/**
 * The nftables path as an LbDataplane (lb-dataplane.ts; docs/dataplane-nftables.md): the
 * forwarding state per Service → the kernel. LbController (lb-controller.ts) decides that
 * state and drives this through `apply`; everything here comes in through narrow interfaces
 * (NftDriver, RouteApplier, ConntrackDriver, GenerationWatch), each with a fake.
 *
 * - start adopts: the table already in the kernel (a previous process's) becomes the
 *   current state, node marks and slot maps keep their names, and only differences are
 *   sent — no flush, so a restart does not interrupt traffic. No table: the first apply is
 *   a full sync.
 * - apply: desired NftState (render/desired-state.ts, visiting only the Services whose
 *   forwarding changed) → the smallest script that gets the kernel there → one nft
 *   transaction; policy routes around it (new next hops before, stale ones after); the TCP
 *   flow table (`<table>-flows`, render/flow-map.ts, with `flowTable`) ensured; then UDP
 *   flows pinned to a node that left a listener's tables (and still live for other
 *   Services) released (lb-flow-release.ts) through the optional ConntrackDriver. A failed
 *   transaction throws and means our picture of the kernel is wrong: the next apply is a
 *   full sync (atomic replace), as it is after drift or when a change is not expressible
 *   as updates. A wanted state that cannot be rendered throws UnrenderableState, nothing sent.
 * - A route failure does not hold back the nft update (one bad next hop must not freeze
 *   every Service): it is reported and retried by the next apply, which `schedule` asks for.
 * - check (issue 16): compares everything passlb owns in the kernel with what it last
 *   applied: the table (objects, chains by rule count and hash, every element) unless the
 *   kernel's nftables generation has not moved since the last clean comparison
 *   (GenerationWatch, nft-generation.ts), the policy rules and route tables
 *   (route-drift.ts), and the flow table (flow-table-keeper.ts). What drifted is restored:
 *   with `schedule` (the controller's pass runner) by asking for an apply, which then sends
 *   the full table / the routes / the flow table — a logged, counted pass with the runner's
 *   backoff like any other; without it, here and now from the last applied state.
 * - apply, check and counters run on one promise chain: never two at once.
 *
 * Does not: decide forwarding (forwarding-state.ts, lb-forwardings.ts), own timers (the
 * controller's runners), or read the flow table's fill (flow-table-usage.ts, paced by the
 * reporter: a listing costs O(entries)).
 */
import type { ConntrackDriver } from "../../drivers/conntrack-tool.ts";
import type { NftDriver } from "../../drivers/nft.ts";
import { nftScript } from "../../drivers/nft-transaction.ts";
import type { ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import {
  type ApplyReport,
  type DataplaneCounters,
  type LbDataplane,
  type LbDesiredState,
  type StartReport,
  UnrenderableState,
} from "../lb-dataplane.ts";
import type { Forward } from "../routing/encap.ts";
import {
  type PolicyRoute,
  policyRoutesOf,
  type RouteApplier,
  sameRoutes,
  unionRoutes,
} from "../routing/policy-routes.ts";
import { expectedRouting, routingDrift } from "../routing/route-drift.ts";
import { FlowTableKeeper } from "./flow-table-keeper.ts";
import { releasedFlows } from "./lb-flow-release.ts";
import type { LbEvent } from "./lb-ports.ts";
import { driftBetween } from "./nft-drift.ts";
import type { GenerationWatch } from "./nft-generation.ts";
import { nodeTrafficOf, serviceTrafficOf } from "./node-traffic.ts";
import { createDesiredCache, type DesiredUpdate, desiredNftUpdate } from "./render/desired-state.ts";
import type { FlowTableConfig } from "./render/flow-map.ts";
import type { NftState } from "./render/nft-state.ts";
import { needsFullSync, renderElementUpdates, renderRuleset } from "./render/render-ruleset.ts";

/** the events this data plane knows about (the controller's LbEvent, lb-ports.ts) */
export type NftablesEvent = Extract<
  LbEvent,
  { kind: "adopted" | "drift" | "routes_failed" | "flows_released" | "flows_release_failed" }
>;

export interface NftablesDataplaneOptions {
  readonly table: string;
  readonly seed: number;
  /** keep the TCP flow table (render/flow-map.ts) with this size and idle timeout; without
   * it TCP flows are pinned by conntrack mark only */
  readonly flowTable?: FlowTableConfig;
  readonly nft: NftDriver;
  readonly routes?: RouteApplier;
  /** how marked packets reach their node (encap.ts); default: policy route on the segment */
  readonly forward?: Forward;
  /** the kernel's nftables generation: lets a drift check skip listing an unchanged table */
  readonly generations?: GenerationWatch;
  /** releases pinned UDP flows of nodes that left a Service's table; none without it */
  readonly conntrack?: ConntrackDriver;
  readonly onEvent?: (event: NftablesEvent) => void;
  /** asks the owner for another apply within `withinMs` (drift: 0; failed routes: 1 s);
   * without it, check() restores itself and failed routes wait for the next apply */
  readonly schedule?: (withinMs: number) => void;
  /** monotonic milliseconds, for ApplyReport.ms (default performance.now) */
  readonly now?: () => number;
}

const ROUTE_RETRY_MS = 1000;

export class NftablesDataplane implements LbDataplane {
  readonly name = "nftables" as const;
  readonly #o: NftablesDataplaneOptions;
  #current: NftState | undefined;
  #needFull = true;
  #routes: readonly PolicyRoute[] | undefined;
  readonly #desiredCache = createDesiredCache();
  /** the last state apply was given (flow release compares against it; check restores it) */
  #last: LbDesiredState | undefined;
  /** the generation token at the last drift check that found the table as applied */
  #verifiedToken: string | undefined;
  #serial: Promise<unknown> = Promise.resolve();
  readonly #flows: FlowTableKeeper | undefined;

  constructor(options: NftablesDataplaneOptions) {
    this.#o = options;
    if (options.flowTable)
      this.#flows = new FlowTableKeeper(options.nft, options.table, options.seed, options.flowTable);
  }

  /** The state last applied (or adopted). */
  get current(): NftState | undefined {
    return this.#current;
  }

  /** The policy routes last installed (undefined before the first or after a failure). */
  get routes(): readonly PolicyRoute[] | undefined {
    return this.#routes;
  }

  start(): Promise<StartReport> {
    return this.#serialise(async () => {
      const observed = await this.#o.nft.dump(this.#o.table);
      if (!observed) return { adopted: false, replaced: false };
      this.#current = observed;
      this.#needFull = false;
      this.#o.onEvent?.({ kind: "adopted", sets: observed.sets.size, chains: observed.chains.size });
      return { adopted: true, replaced: false };
    });
  }

  apply(state: LbDesiredState): Promise<ApplyReport> {
    return this.#serialise(() => this.#apply(state));
  }

  check(): Promise<readonly string[]> {
    return this.#serialise(() => this.#check());
  }

  /** Per-Service and per-node packets and bytes from the table's named counters
   * (node-traffic.ts). No verdict reasons and no flow-table fill: the nft path has no
   * reason counters, and listing the flow maps costs O(entries) (flow-table-usage.ts, read
   * paced by the reporter) — those stay empty / absent. */
  counters(): Promise<DataplaneCounters> {
    return this.#serialise(async () => {
      const current = this.#current;
      const forwarding = this.#last?.forwarding ?? [];
      if (!current) return { services: new Map(), nodes: new Map(), reasons: new Map() };
      const counters = await this.#o.nft.counters(this.#o.table);
      return {
        services: new Map(
          serviceTrafficOf(forwarding, counters).map((t) => [
            t.service,
            { packets: t.packets, bytes: t.bytes },
          ]),
        ),
        nodes: new Map(
          nodeTrafficOf(current, forwarding, counters).map((t) => [
            t.node,
            { packets: t.packets, bytes: t.bytes },
          ]),
        ),
        reasons: new Map(),
      };
    });
  }

  /** Waits for what runs; no timers of its own. The kernel keeps forwarding as it is. */
  async stop(): Promise<void> {
    await this.#serial;
  }

  #serialise<T>(step: () => Promise<T>): Promise<T> {
    const next = this.#serial.then(step);
    this.#serial = next.catch(() => undefined);
    return next;
  }

  async #apply(state: LbDesiredState): Promise<ApplyReport> {
    const now = this.#o.now ?? (() => performance.now());
    const started = now();
    // only with a conntrack driver: the release compares the forwardings around the apply
    const before = this.#o.conntrack ? (this.#last?.forwarding ?? []) : undefined;
    this.#last = state;
    const { state: desired, touched } = this.#desired(state);
    const full = this.#needFull || !this.#current || needsFullSync(this.#current, desired, touched);
    const tx = full ? renderRuleset(desired) : renderElementUpdates(this.#current!, desired, touched);
    const wanted = policyRoutesOf(desired, this.#o.forward);
    // routes for new next hops go in before any mark can point at them
    if (!sameRoutes(this.#routes, wanted))
      await this.#syncRoutes(unionRoutes(this.#routes ?? [], wanted), false);
    try {
      if (tx.ops.length > 0) await this.#o.nft.run(tx);
      await this.#flows?.ensure();
      this.#current = desired;
      this.#needFull = false;
      if (!sameRoutes(this.#routes, wanted)) await this.#syncRoutes(wanted, true);
      if (before) await this.#releaseFlows(before, state.forwarding, desired);
    } catch (cause) {
      // an incremental transaction that failed means our picture of the kernel is wrong
      this.#needFull = true;
      throw cause;
    }
    const ops = tx.ops.length;
    return {
      ops,
      ms: now() - started,
      mode: ops === 0 ? "noop" : full ? "full" : "incremental",
      bytes: ops === 0 ? 0 : nftScript(tx).length,
    };
  }

  #desired(state: LbDesiredState): DesiredUpdate {
    try {
      return desiredNftUpdate({
        table: this.#o.table,
        seed: this.#o.seed,
        zones: state.zones,
        previous: this.#current ?? { table: this.#o.table, sets: new Map(), chains: new Map() },
        forwardings: state.forwarding,
        cache: this.#desiredCache,
      });
    } catch (cause) {
      throw new UnrenderableState(cause);
    }
  }

  /** Deletes the conntrack entries of flows pinned to nodes that left a listener's tables;
   * a failure is reported (the flows stay pinned until a later change or their timeout). */
  async #releaseFlows(
    before: readonly ServiceForwarding[],
    after: readonly ServiceForwarding[],
    applied: NftState,
  ): Promise<void> {
    for (const r of releasedFlows(before, after, applied)) {
      try {
        const flows = await this.#o.conntrack!.deleteFlows(r);
        if (flows > 0) this.#o.onEvent?.({ kind: "flows_released", service: r.service, node: r.node, flows });
      } catch (error) {
        this.#o.onEvent?.({ kind: "flows_release_failed", service: r.service, node: r.node, error });
      }
    }
  }

  async #syncRoutes(routes: readonly PolicyRoute[], final: boolean): Promise<void> {
    if (!this.#o.routes) return;
    try {
      await this.#o.routes.sync(routes);
      if (final) this.#routes = routes;
    } catch (error) {
      this.#routes = undefined;
      this.#o.onEvent?.({ kind: "routes_failed", error });
      if (final) this.#o.schedule?.(ROUTE_RETRY_MS);
    }
  }

  /** What differs (table, routes, flow table, in that order), each restored or scheduled. */
  async #check(): Promise<readonly string[]> {
    if (!this.#current) return [];
    const routes = await this.#checkRouteDrift();
    const table = await this.#checkTableDrift();
    const flows = await this.#checkFlowTable();
    const found = [table, routes, flows].filter((d) => d !== undefined);
    const drifted = found.filter((d) => d.repair).map((d) => d.what);
    if (drifted.length > 0 && this.#o.schedule) this.#o.schedule(0);
    else if (drifted.length > 0 && this.#last) {
      try {
        await this.#apply(this.#last);
      } catch (e) {
        return [...found.map((d) => d.what), `restore failed: ${(e as Error).message}`];
      }
    }
    return found.map((d) => d.what);
  }

  async #checkTableDrift(): Promise<Drift | undefined> {
    const current = this.#current!;
    const token = this.#o.generations?.token();
    if (token !== undefined && token === this.#verifiedToken) return undefined;
    let observed: NftState | undefined;
    try {
      observed = await this.#o.nft.dump(this.#o.table);
    } catch (e) {
      return { what: `dump failed: ${(e as Error).message}`, repair: false };
    }
    const what = driftBetween(current, observed, true);
    if (!what) {
      this.#verifiedToken = token;
      return undefined;
    }
    this.#verifiedToken = undefined;
    this.#o.onEvent?.({ kind: "drift", scope: "table", what });
    this.#needFull = true;
    return { what, repair: true };
  }

  /** the flow table (flow-table-keeper.ts): listed terse, and only after a commit named it */
  async #checkFlowTable(): Promise<Drift | undefined> {
    if (!this.#flows) return undefined;
    let what: string | undefined;
    try {
      what = await this.#flows.check(this.#o.generations?.tableToken?.(this.#flows.table));
    } catch (e) {
      return { what: `flow table dump failed: ${(e as Error).message}`, repair: false };
    }
    if (!what) return undefined;
    this.#o.onEvent?.({ kind: "drift", scope: "flows", what });
    return { what, repair: true };
  }

  async #checkRouteDrift(): Promise<Drift | undefined> {
    const routes = this.#routes;
    if (!this.#o.routes || !routes) return undefined;
    const expected = expectedRouting(routes);
    let what: string | undefined;
    try {
      what = routingDrift(expected, await this.#o.routes.read(expected.tables));
    } catch (e) {
      return { what: `routes read failed: ${(e as Error).message}`, repair: false };
    }
    if (!what) return undefined;
    this.#routes = undefined; // the next apply installs them again
    this.#o.onEvent?.({ kind: "drift", scope: "routes", what });
    return { what, repair: true };
  }
}

/** one check's finding; `repair` false when only the reading failed */
interface Drift {
  readonly what: string;
  readonly repair: boolean;
}
