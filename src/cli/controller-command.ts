/**
 * `passlb controller`: the cluster's passlb controller (docs/controller.md). Watches
 * Services and LoadBalancerIPPools, assigns VIPs from the pools and writes Service status,
 * conditions, Events, finalizers and pool status — while it holds the `passlb-controller`
 * Lease in its namespace. Runs until the shutdown signal fires, then gives the Lease up.
 * `--manage-endpointslices` also writes EndpointSlices (passlb's own managed-by value) for
 * the Services it owns, for clusters without an EndpointSlice controller.
 *
 * The steps: flags → ControllerConfig (controller-config.ts, pure, errors name the flag) →
 * the kubeconfig → observability → one ControllerRuntime (src/controller/controller-runtime.ts)
 * until the signal, then the Lease given up.
 */
import { hostname } from "node:os";
import type { Command } from "commander";
import type { FoundKubeConfig, KubeEnv } from "../cluster/kube-config.ts";
import type { ControllerRuntimeOptions } from "../controller/controller-runtime.ts";
import { DEFAULT_ELECTION_TIMING, LEASE_NAME } from "../controller/leader-election.ts";
import type { PasslbError } from "../errors.ts";
import { realClock } from "../health/clock.ts";
import type { Logger } from "../web/logger.ts";
import type { Metrics } from "../web/metrics.ts";
import { type ControllerConfig, type ControllerFlags, controllerConfig } from "./controller-config.ts";
import type { CliIo } from "./load-input.ts";
import { addObservabilityOptions, startObservability } from "./observability.ts";

export interface ControllerHost {
  readonly kubeEnv: KubeEnv;
}

interface ControllerDeps {
  readonly shutdownSignal: () => AbortSignal;
  readonly host: ControllerHost;
}

export function registerControllerCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  deps: ControllerDeps,
): void {
  const command = program
    .command("controller")
    .description(
      "assign VIPs to LoadBalancer Services from LoadBalancerIPPools and report status (leader-elected)",
    )
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    .option("--in-cluster", "use the Pod's service account")
    .option("--namespace <ns>", `namespace of the ${LEASE_NAME} Lease`, "passlb-system")
    .option("--default-class", "also own LoadBalancer Services without a loadBalancerClass")
    .option(
      "--accept-class <class>",
      "also own Services of this foreign loadBalancerClass (io.cilium/l2-announcer, kube-vip.io/kube-vip-class, purelb.io/purelb, …); repeatable",
      (value: string, previous: string[]) => [...previous, value],
      [],
    )
    .option(
      "--ip-mode <mode>",
      "status ingress ipMode: VIP, or Proxy when the LB hosts proxy in userspace",
      "VIP",
    )
    .option(
      "--lease-duration <seconds>",
      "Lease duration",
      String(DEFAULT_ELECTION_TIMING.leaseDurationMs / 1000),
    )
    .option(
      "--renew-deadline <seconds>",
      "the leader stops writing when it could not renew for this long",
      String(DEFAULT_ELECTION_TIMING.renewDeadlineMs / 1000),
    )
    .option(
      "--retry-period <seconds>",
      "how often to try to acquire or renew",
      String(DEFAULT_ELECTION_TIMING.retryPeriodMs / 1000),
    )
    .option("--identity <name>", "this replica's name in the Lease (default: host name plus a random suffix)")
    .option(
      "--manage-endpointslices",
      "also write EndpointSlices for owned selector Services (clusters without an EndpointSlice controller)",
    );
  addObservabilityOptions(command, "127.0.0.1:9798");
  command.action(async (flags: ControllerFlags) => setExitCode(await runController(flags, io, deps)));
}

/** flags → ControllerConfig → the cluster's config → observability → ControllerRuntime until the signal. */
async function runController(flags: ControllerFlags, io: CliIo, deps: ControllerDeps): Promise<number> {
  const parsed = controllerConfig(flags);
  if (!parsed.ok) return fail(io, parsed.error);
  const { config } = parsed;
  // @kubernetes/client-node is loaded only by the commands that talk to a cluster: it
  // doubles the start-up time of every other command
  const found = await findCluster(config, deps.host.kubeEnv);
  if (typeof found === "string") return fail(io, found);
  const obs = await startObservability(flags, {
    io,
    process: "passlb controller",
    component: "controller",
    dataplane: "none",
  });
  if (typeof obs === "string") return fail(io, obs);
  await obs.serve();
  const { logger, metrics } = obs;
  const lease = `${config.namespace}/${LEASE_NAME}`;
  metrics.leading(lease, false); // the series shows from the start: 0 until the Lease is won
  const { kubeApiPolicy } = await import("../cluster/kube-api-health.ts");
  const { KubeApiMonitor } = await import("../web/kube-api-monitor.ts");
  const apiCalls = new KubeApiMonitor({
    now: Date.now,
    policy: kubeApiPolicy(config.election.leaseDurationMs),
    metrics,
    logger,
  });
  obs.observer.kubeApi(() => apiCalls.report());
  const identity = config.identity ?? `${hostname()}_${Math.random().toString(36).slice(2, 10)}`;
  const { ControllerRuntime } = await import("../controller/controller-runtime.ts");
  const runtime = new ControllerRuntime({
    kubeConfig: found.config,
    namespace: config.namespace,
    identity,
    controller: config.controller,
    election: config.election,
    manageEndpointSlices: config.manageEndpointSlices,
    clock: realClock(),
    random: Math.random,
    apiCalls,
    report: controllerReport(logger, metrics, lease, identity),
  });
  logger.log(
    "info",
    {
      event: "controller_starting",
      server: found.server,
      from: found.from,
      identity,
      namespace: config.namespace,
    },
    `passlb controller: ${found.server} (${found.from}) as ${identity}`,
  );
  const stopped = aborted(deps.shutdownSignal());
  await Promise.race([runtime.start(), stopped]);
  await stopped;
  await runtime.stop({ release: true });
  await obs.close();
  logger.log("info", { event: "controller_stopped" }, "passlb controller stopped; Lease released");
  return 0;
}

function fail(io: CliIo, message: string): number {
  io.stderr(`error: ${message}\n`);
  return 2;
}

/** The kubeconfig `--kubeconfig`, `--in-cluster` or the environment name, or what is wrong. */
async function findCluster(config: ControllerConfig, env: KubeEnv): Promise<FoundKubeConfig | string> {
  const { findKubeConfig } = await import("../cluster/kube-config.ts");
  try {
    return (
      findKubeConfig(config.kube, env) ??
      "no Kubernetes configuration: pass --kubeconfig FILE or --in-cluster"
    );
  } catch (e) {
    return (e as PasslbError).message;
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

/** The runtime's report as JSON log lines and metrics. */
function controllerReport(
  logger: Logger,
  metrics: Metrics,
  lease: string,
  identity: string,
): NonNullable<ControllerRuntimeOptions["report"]> {
  return {
    onPass: (outcome, ms) => {
      if (outcome.kind === "ok" && outcome.reason !== undefined) return;
      metrics.reconcile("controller", outcome.kind);
      const level = outcome.kind === "ok" ? (outcome.writes > 0 ? "info" : "debug") : "warn";
      logger.log(
        level,
        {
          event: "controller_pass",
          outcome: outcome.kind,
          writes: outcome.writes,
          duration_ms: Math.round(ms),
          cause: outcome.kind === "ok" ? undefined : outcome.cause,
        },
        `pass ${outcome.kind}: ${outcome.writes} write(s)`,
      );
    },
    onPoolUsage: (usage) => metrics.ipPools(usage),
    onEvent: (e) =>
      logger.log(
        "info",
        {
          event: "controller_event",
          reason: e.reason,
          type: e.type,
          object: `${e.target.namespace}/${e.target.name}`,
        },
        e.message,
      ),
    onWriteError: (what, err) =>
      logger.log(
        "warn",
        { event: "controller_write_failed", code: (err as PasslbError).code },
        `${what}: ${err.message}`,
      ),
    onLeading: (leading) => {
      metrics.leading(lease, leading);
      logger.log(
        "info",
        { event: leading ? "leader_acquired" : "leader_lost", identity },
        leading ? `${identity} leads` : `${identity} stopped leading`,
      );
    },
    onLeaseError: (e) =>
      logger.log(
        "warn",
        { event: "lease_failed", code: (e as PasslbError).code },
        `Lease: ${(e as Error).message}`,
      ),
    onSliceWrites: (n) =>
      logger.log("info", { event: "endpointslices_written", writes: n }, `${n} EndpointSlice write(s)`),
    onSliceError: (what, err) =>
      logger.log(
        "warn",
        { event: "endpointslice_write_failed", code: (err as PasslbError).code },
        `${what}: ${err.message}`,
      ),
    onSourceProblems: (problems) => {
      for (const p of problems)
        logger.finding({
          code: "object_undecodable",
          severity: "warning",
          subject: "Source",
          message: p,
        });
    },
  };
}
