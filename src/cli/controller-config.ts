/**
 * `passlb controller`'s flags as a validated ControllerConfig (docs/controller.md): which
 * Services it owns, the ingress ipMode it writes, the Lease timing, and whether it writes
 * EndpointSlices. Pure: every error names the flag and the value that is wrong.
 *
 * The Lease timing is ordered as client-go's leader election checks it (k8s.io/client-go
 * tools/leaderelection/leaderelection.go, `NewLeaderElector`): lease duration > renew
 * deadline > retry period, all positive (client-go also keeps the renew deadline above 1.2
 * retry periods, which passlb does not ask); the Lease stores its duration in whole seconds
 * (coordination.k8s.io/v1 `leaseDurationSeconds`).
 *
 * Not here: finding the kubeconfig, the default identity (host name plus a random suffix)
 * and the observability flags — controller-command.ts and observability.ts, which touch the
 * host.
 */
import type { KubeConfigRequest } from "../cluster/kube-config.ts";
import type { ControllerOptions } from "../controller/controller-writes.ts";
import type { ElectionConfig } from "../controller/leader-election.ts";
import type { ObservabilityFlags } from "./observability.ts";

/** The flags as commander gives them (defaults filled in). */
export interface ControllerFlags extends ObservabilityFlags {
  kubeconfig?: string;
  inCluster?: boolean;
  namespace: string;
  defaultClass?: boolean;
  acceptClass: string[];
  ipMode: string;
  leaseDuration: string;
  renewDeadline: string;
  retryPeriod: string;
  identity?: string;
  manageEndpointslices?: boolean;
}

export interface ControllerConfig {
  readonly kube: KubeConfigRequest;
  /** where the Lease lives */
  readonly namespace: string;
  /** `--identity`; undefined: the command makes one from the host name */
  readonly identity: string | undefined;
  readonly controller: ControllerOptions;
  readonly election: Omit<ElectionConfig, "identity">;
  readonly manageEndpointSlices: boolean;
}

export type ControllerConfigResult =
  | { readonly ok: true; readonly config: ControllerConfig }
  | { readonly ok: false; readonly error: string };

export function controllerConfig(flags: ControllerFlags): ControllerConfigResult {
  if (flags.ipMode !== "VIP" && flags.ipMode !== "Proxy")
    return { ok: false, error: `--ip-mode ${flags.ipMode}: expected VIP or Proxy` };
  const election = electionTiming(flags);
  if (typeof election === "string") return { ok: false, error: election };
  return {
    ok: true,
    config: {
      kube: { kubeconfig: flags.kubeconfig, inCluster: flags.inCluster },
      namespace: flags.namespace,
      identity: flags.identity,
      controller: {
        defaultClass: flags.defaultClass === true,
        acceptClasses: flags.acceptClass,
        ipMode: flags.ipMode,
      },
      election,
      manageEndpointSlices: flags.manageEndpointslices === true,
    },
  };
}

/** `--lease-duration > --renew-deadline > --retry-period`, in milliseconds; or the error. */
function electionTiming(flags: ControllerFlags): Omit<ElectionConfig, "identity"> | string {
  const leaseDurationMs = milliseconds(flags.leaseDuration);
  const renewDeadlineMs = milliseconds(flags.renewDeadline);
  const retryPeriodMs = milliseconds(flags.retryPeriod);
  const positive = "expected a positive number of seconds";
  if (leaseDurationMs === undefined) return `--lease-duration ${flags.leaseDuration}: ${positive}`;
  if (renewDeadlineMs === undefined) return `--renew-deadline ${flags.renewDeadline}: ${positive}`;
  if (retryPeriodMs === undefined) return `--retry-period ${flags.retryPeriod}: ${positive}`;
  if (Math.round(leaseDurationMs) % 1000 !== 0)
    return `--lease-duration ${flags.leaseDuration}: expected whole seconds (the Lease holds its duration in seconds)`;
  if (renewDeadlineMs >= leaseDurationMs)
    return `--renew-deadline ${flags.renewDeadline}: must be shorter than --lease-duration ${flags.leaseDuration} (defaults 10 and 15)`;
  if (retryPeriodMs >= renewDeadlineMs)
    return `--retry-period ${flags.retryPeriod}: must be shorter than --renew-deadline ${flags.renewDeadline} (defaults 2 and 10)`;
  return { leaseDurationMs, renewDeadlineMs, retryPeriodMs };
}

function milliseconds(text: string): number | undefined {
  const n = Number(text);
  return Number.isFinite(n) && n > 0 ? n * 1000 : undefined;
}
