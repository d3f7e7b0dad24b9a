/**
 * Adapter: `passlb up`'s LB — the userspace LB host (lb-host/build-userspace-lb-host.ts:
 * proxy, prober, input and reporter as one `LbHost`) with the real drivers set up as the
 * quickstart always ran them: the prober at the demo's probe interval and the run's seed;
 * the proxy sending the PROXY protocol to the node proxies, with its UDP idle time, clock,
 * client zones (PasslbConfig zones) and events (for the live view's recent connections).
 * Its input is the Snapshots the run pushes (cluster/pushed-source.ts), already
 * loopback-rewritten, so the host does not rewrite them again.
 *
 * Deliberately not here: reading the folder, the rewrite, the echo pods and node agents
 * (quickstart-run.ts); passlb up's lines and the dashboard server (cli/up-command.ts) — the
 * host's own stdout/stderr lines are not shown.
 */
import type { SnapshotSource } from "../cluster/snapshot-source.ts";
import type { TcpPlumbingChoice } from "../lb-host/userspace/tcp-plumbing.ts";
import type { LbEvent } from "../lb-host/userspace/userspace-lb.ts";
import {
  buildUserspaceLbHost,
  type UserspaceLbHost,
} from "../lb-host/userspace-host/build-userspace-lb-host.ts";
import { userspaceHostDrivers } from "../lb-host/userspace-host/host-drivers.ts";
import type { UserspaceLbDrivers, UserspaceLbSink } from "../lb-host/userspace-host/lb-host-drivers.ts";
import type { Observer } from "../web/observer.ts";

export interface QuickstartLbOptions {
  readonly seed: number;
  readonly tcp: TcpPlumbingChoice;
  readonly probeIntervalMs: number;
  readonly udpIdleMs: number;
  readonly now: () => number;
  readonly clientZone: (address: string) => string | undefined;
  readonly onEvent: (e: LbEvent) => void;
  /** metrics, JSON logs and the dashboard, when passlb up runs them */
  readonly observer: Observer | undefined;
  /** what the run pushes */
  readonly input: SnapshotSource;
}

export function quickstartLb(o: QuickstartLbOptions): UserspaceLbHost {
  const config = {
    paths: [],
    pollMs: 1000, // no paths are watched: the input is pushed
    loopback: false, // the pushed Snapshots are rewritten already
    proxyProtocol: true,
    tcp: o.tcp,
    reason: "passlb up",
    seed: o.seed,
  };
  return buildUserspaceLbHost(config, quickstartLbDrivers(o), quickstartLbSink(o.observer), {
    pushed: o.input,
  });
}

function quickstartLbDrivers(o: QuickstartLbOptions): UserspaceLbDrivers {
  const real = userspaceHostDrivers();
  return {
    ...real,
    proxy: (p) =>
      real.proxy({ ...p, udpIdleMs: o.udpIdleMs, now: o.now, clientZone: o.clientZone, onEvent: o.onEvent }),
    health: (h) => real.health({ ...h, intervalMs: o.probeIntervalMs, seed: o.seed }),
  };
}

/**
 * The Observer's metrics, dashboard state and logs, as before; no lines of the host's own,
 * no plan issues logged (the quickstart never logged them), no dashboard served here.
 */
function quickstartLbSink(observer: Observer | undefined): UserspaceLbSink {
  const none = () => {};
  return {
    out: none,
    err: none,
    observer: observer ?? {
      traffic: none,
      forwarding: none,
      setFindings: none,
      proberEvent: none,
      probeFinished: none,
    },
    metrics: observer?.metrics ?? { programmed: none, ipPools: none },
    logger: { finding: none, log: none },
    serve: async () => undefined,
  };
}
