/**
 * `passlb lb` in Kubernetes mode: which input the LB reads (manifests or the API server),
 * and the Kubernetes source wired to the logs and metrics. Wiring only; the rules live in
 * cluster/kube-config.ts (where the config comes from), cluster/kube-source.ts (watching)
 * and plan/status-vips.ts (VIPs from status only: the controller assigns them; an LB host
 * never runs address management of its own in this mode). With `--announce bgp` and no
 * `--bgp-peer`, the source also watches LoadBalancerBGPPeers (the routers to announce to).
 */

import type { BgpObjectConditions } from "../announce/bgp/bgp-conditions.ts";
import { BgpStatusWriter } from "../cluster/bgp-status-writer.ts";
import { kubeApiPolicy } from "../cluster/kube-api-health.ts";
import { type FoundKubeConfig, findKubeConfig, type KubeEnv } from "../cluster/kube-config.ts";
import { KubeSnapshotSource } from "../cluster/kube-source.ts";
import { clientNodeTransport } from "../cluster/kube-transport.ts";
import type { SourceRead } from "../cluster/snapshot-source.ts";
import { sourceReadsReport } from "../cluster/source-reads-report.ts";
import { PasslbError } from "../errors.ts";
import { realClock } from "../health/clock.ts";
import { DEFAULT_CONFIG, type Snapshot } from "../k8s/snapshot.ts";
import { withStatusAddresses } from "../plan/status-vips.ts";
import { KubeApiMonitor } from "../web/kube-api-monitor.ts";
import type { Observability } from "./observability.ts";

export interface KubeFlags {
  filename: string[];
  manifests?: string[];
  kubeconfig?: string;
  inCluster?: boolean;
  defaultClass?: boolean;
  acceptClass?: string[];
}

export type LbInput =
  | { readonly kind: "manifests" }
  | {
      readonly kind: "kube";
      readonly found: FoundKubeConfig;
      readonly defaultClass: boolean;
      readonly acceptClasses?: readonly string[];
    };

/** -f/--manifests wins; then --kubeconfig / --in-cluster; then a kubeconfig found in the
 * environment. A string is the error to print. */
export function chooseLbInput(flags: KubeFlags, env: KubeEnv): LbInput | string {
  const manifests = flags.filename.length + (flags.manifests?.length ?? 0) > 0;
  const explicit = flags.kubeconfig !== undefined || flags.inCluster === true;
  if (manifests && explicit) return "pass either -f/--manifests or --kubeconfig/--in-cluster, not both";
  if (manifests) return { kind: "manifests" };
  try {
    const found = findKubeConfig({ kubeconfig: flags.kubeconfig, inCluster: flags.inCluster }, env);
    if (!found)
      return "nothing to read: pass -f/--manifests DIR, or --kubeconfig PATH / --in-cluster (no kubeconfig found)";
    return {
      kind: "kube",
      found,
      defaultClass: flags.defaultClass ?? false,
      acceptClasses: flags.acceptClass ?? [],
    };
  } catch (e) {
    return e instanceof PasslbError ? `${e.message} (${e.code})` : String(e);
  }
}

/** The API server as the LB's SnapshotSource, its watch restarts and states in metrics and
 * logs, and its failing reads in the error log, `passlb_kube_api_failing` and `/readyz`. */
export function kubeLbSource(
  input: Extract<LbInput, { kind: "kube" }>,
  obs: Observability | undefined,
  /** also watch LoadBalancerBGPPeers (`--announce bgp` without --bgp-peer) */
  bgpPeers = false,
) {
  const monitor =
    obs &&
    new KubeApiMonitor({ now: Date.now, policy: kubeApiPolicy(0), metrics: obs.metrics, logger: obs.logger });
  if (monitor) obs?.observer.kubeApi(() => monitor.report());
  const reads = monitor && sourceReadsReport(monitor);
  const source = new KubeSnapshotSource({
    transport: clientNodeTransport(input.found.config),
    clock: realClock(),
    random: Math.random,
    bgpPeers,
    config: {
      ...DEFAULT_CONFIG,
      defaultClass: input.defaultClass,
      acceptClasses: [...(input.acceptClasses ?? [])],
    },
    onRestart: (resource, reason, detail, delayMs, status) => {
      reads?.onRestart?.(resource, reason, detail, delayMs, status);
      obs?.metrics.kubeWatchRestart(resource, reason);
      obs?.logger.log(
        reason === "closed" ? "debug" : reason === "error" ? "warn" : "info",
        { event: "kube_watch_restart", reason, resource, delay_ms: delayMs },
        `${resource}: ${detail}`,
      );
    },
    onState: (resource, state, detail) => {
      reads?.onState?.(resource, state, detail);
      obs?.logger.log(
        state === "backoff" ? "warn" : "debug",
        { event: "kube_watch", reason: state, resource },
        `${resource}: ${state}${detail ? ` (${detail})` : ""}`,
      );
    },
  });
  return source;
}

/**
 * Turns each read of the source into what the LB plans: Services the controller has not
 * given an address yet are left out. Logs the objects that failed decoding and the waiting
 * Services when they change (not on every read).
 */
export function kubeReadHandler(obs: Observability | undefined, log: (line: string) => void) {
  let lastProblems = new Set<string>();
  let lastWaiting = "";
  let lastInput: Snapshot["services"] | undefined;
  let lastOutput: Snapshot["services"] | undefined;
  return (read: Extract<SourceRead, { ok: true }>): { snapshot: Snapshot; degraded: boolean } => {
    const current = new Set(read.problems);
    for (const p of current)
      if (!lastProblems.has(p)) {
        log(`object left out: ${p}`);
        obs?.logger.log("warn", { event: "input_problem", reason: "invalid_object" }, p);
      }
    lastProblems = current;
    const { snapshot, waiting } = withStatusAddresses(read.snapshot);
    const key = waiting.join(",");
    if (key !== lastWaiting) {
      lastWaiting = key;
      for (const w of waiting) {
        log(`${w}: no address in status.loadBalancer.ingress yet (the controller assigns it); skipped`);
        obs?.logger.log(
          "info",
          { event: "service_skipped", reason: "no_status_address", service: w },
          `${w}: no status address yet; skipped`,
        );
      }
    }
    // keep the filtered array while its input is the same, so the planner's memo holds
    let services = snapshot.services;
    if (read.snapshot.services === lastInput && lastOutput) services = lastOutput;
    lastInput = read.snapshot.services;
    lastOutput = services;
    return { snapshot: { ...snapshot, services }, degraded: read.problems.length > 0 };
  };
}

/** `--announce bgp` from the objects: this host's conditions onto their status. */
export function kubeBgpStatusWriter(input: Extract<LbInput, { kind: "kube" }>, host: string) {
  const writer = new BgpStatusWriter({ kubeConfig: input.found.config, host, now: Date.now });
  return (objects: readonly BgpObjectConditions[]) => writer.write(objects);
}
