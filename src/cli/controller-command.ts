/**
 * `passlb controller`: the cluster's passlb controller (docs/controller.md). Watches
 * Services and LoadBalancerIPPools, assigns VIPs from the pools and writes Service status,
 * conditions, Events, finalizers and pool status — while it holds the `passlb-controller`
 * Lease in its namespace. Runs until the shutdown signal fires, then gives the Lease up.
 * `--manage-endpointslices` also writes EndpointSlices (passlb's own managed-by value) for
 * the Services it owns, for clusters without an EndpointSlice controller.
 */
import { hostname } from "node:os";
import type { Command } from "commander";
import type { KubeEnv } from "../cluster/kube-config.ts";
import { DEFAULT_ELECTION_TIMING, LEASE_NAME } from "../controller/leader-election.ts";
import type { PasslbError } from "../errors.ts";
import { realClock } from "../health/clock.ts";
import type { CliIo } from "./load-input.ts";
import { addObservabilityOptions, type ObservabilityFlags, startObservability } from "./observability.ts";

interface ControllerFlags extends ObservabilityFlags {
  kubeconfig?: string;
  inCluster?: boolean;
  namespace: string;
  defaultClass?: boolean;
  ipMode: string;
  leaseDuration: string;
  renewDeadline: string;
  retryPeriod: string;
  identity?: string;
  manageEndpointslices?: boolean;
}

export interface ControllerHost {
  readonly kubeEnv: KubeEnv;
}

const seconds = (text: string): number | undefined => {
  const n = Number(text);
  return Number.isFinite(n) && n > 0 ? n * 1000 : undefined;
};

export function registerControllerCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  deps: { shutdownSignal: () => AbortSignal; host: ControllerHost },
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
  command.action(async (opts: ControllerFlags) => {
    if (opts.ipMode !== "VIP" && opts.ipMode !== "Proxy") {
      io.stderr(`error: --ip-mode ${opts.ipMode}: expected VIP or Proxy\n`);
      return setExitCode(2);
    }
    const leaseDurationMs = seconds(opts.leaseDuration);
    const renewDeadlineMs = seconds(opts.renewDeadline);
    const retryPeriodMs = seconds(opts.retryPeriod);
    if (!leaseDurationMs || !renewDeadlineMs || !retryPeriodMs) {
      io.stderr(
        "error: --lease-duration, --renew-deadline and --retry-period take a positive number of seconds\n",
      );
      return setExitCode(2);
    }
    if (
      Math.round(leaseDurationMs) % 1000 !== 0 ||
      renewDeadlineMs >= leaseDurationMs ||
      retryPeriodMs >= renewDeadlineMs
    ) {
      io.stderr(
        "error: expected whole-second --lease-duration > --renew-deadline > --retry-period (defaults 15, 10, 2)\n",
      );
      return setExitCode(2);
    }
    // @kubernetes/client-node is loaded only by the commands that talk to a cluster: it
    // doubles the start-up time of every other command
    const { findKubeConfig } = await import("../cluster/kube-config.ts");
    const { ControllerRuntime } = await import("../controller/controller-runtime.ts");
    let found: ReturnType<typeof findKubeConfig>;
    try {
      found = findKubeConfig({ kubeconfig: opts.kubeconfig, inCluster: opts.inCluster }, deps.host.kubeEnv);
    } catch (e) {
      io.stderr(`error: ${(e as PasslbError).message}\n`);
      return setExitCode(2);
    }
    if (!found) {
      io.stderr("error: no Kubernetes configuration: pass --kubeconfig FILE or --in-cluster\n");
      return setExitCode(2);
    }
    const obs = await startObservability(opts, {
      io,
      process: "passlb controller",
      component: "controller",
      dataplane: "none",
    });
    if (typeof obs === "string") {
      io.stderr(`error: ${obs}\n`);
      return setExitCode(2);
    }
    await obs.serve();
    const { logger, metrics } = obs;
    const { kubeApiPolicy } = await import("../cluster/kube-api-health.ts");
    const { KubeApiMonitor } = await import("../web/kube-api-monitor.ts");
    const apiCalls = new KubeApiMonitor({
      now: Date.now,
      policy: kubeApiPolicy(leaseDurationMs),
      metrics,
      logger,
    });
    obs.observer.kubeApi(() => apiCalls.report());
    const identity = opts.identity ?? `${hostname()}_${Math.random().toString(36).slice(2, 10)}`;
    const runtime = new ControllerRuntime({
      kubeConfig: found.config,
      namespace: opts.namespace,
      identity,
      controller: { defaultClass: opts.defaultClass === true, ipMode: opts.ipMode },
      election: { leaseDurationMs, renewDeadlineMs, retryPeriodMs },
      manageEndpointSlices: opts.manageEndpointslices === true,
      clock: realClock(),
      random: Math.random,
      apiCalls,
      report: {
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
        onLeading: (leading) =>
          logger.log(
            "info",
            { event: leading ? "leader_acquired" : "leader_lost", identity },
            leading ? `${identity} leads` : `${identity} stopped leading`,
          ),
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
      },
    });
    logger.log(
      "info",
      {
        event: "controller_starting",
        server: found.server,
        from: found.from,
        identity,
        namespace: opts.namespace,
      },
      `passlb controller: ${found.server} (${found.from}) as ${identity}`,
    );
    const signal = deps.shutdownSignal();
    const stopped = new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener("abort", () => resolve(), { once: true });
    });
    await Promise.race([runtime.start(), stopped]);
    await stopped;
    await runtime.stop({ release: true });
    await obs.close();
    logger.log("info", { event: "controller_stopped" }, "passlb controller stopped; Lease released");
  });
}
