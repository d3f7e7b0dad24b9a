/**
 * Config + drivers → the userspace LB host (`passlb lb --dataplane userspace`) as an
 * `LbHost` (lb-host.ts) of named parts, started in this order and stopped in the reverse:
 *
 * - **dataplane**: the userspace proxy (`UserspaceLb`), one listener per VIP:port; says
 *   which TCP plumbing runs; undo: closes every listener;
 * - **health**: the prober (`ProberHealth`); each transition runs the forwarding step
 *   again; undo: stops probing;
 * - **input**: the source of Snapshots — the `-f` paths, watched (manifest-folder-source.ts:
 *   a changed file is read again; a read with a problem keeps the last good state), the
 *   cluster (`KubeLbRun.source`, lb-kube.ts), or what `passlb up` pushes (a `PushedSource`,
 *   cluster/pushed-source.ts; quickstart/quickstart-lb.ts) — each good read planned and
 *   applied by `UserspaceLbSync` (userspace-host/lb-sync.ts, the last good rule); undo: stops
 *   watching and waits for the pass in flight;
 * - **reporter**: the dashboard, metrics and the lines (userspace-host/reporter.ts).
 *
 * In manifests mode the input part waits for the first read, and one with problems is
 * refused: the part fails to start after the reporter printed the problems, as `passlb lb
 * -f` always did. In Kubernetes mode it does not wait: while the API server refuses, the
 * host runs and its dashboard and /readyz say so (lb-kube.ts). A pushed input starts at
 * once and its first read comes with the owner's first push. Deliberately not here: flags
 * (cli/lb-command.ts), the Kubernetes client (lb-kube.ts), passlb up's folder and rewrite.
 */
import type { SnapshotSource } from "../../cluster/snapshot-source.ts";
import type { HealthLookup } from "../../forwarding/forwarding-state.ts";
import { LbHost, type LbHostPart } from "../lb-host.ts";
import { describeTcpPlumbing, type TcpPlumbingChoice } from "../userspace/tcp-plumbing.ts";
import type { UserspaceLbDrivers, UserspaceLbSink } from "./lb-host-drivers.ts";
import { type PrepareRead, UserspaceLbSync } from "./lb-sync.ts";
import { UserspaceLbReporter } from "./reporter.ts";

/** the seed of the userspace proxy's Maglev tables and affinity (as it always was) */
const SEED = 0x5eed;
/** the folder source's quiet time after a change before it reads (manifest-folder-source.ts) */
const DEBOUNCE_MS = 200;
/** the manifests are read again at the latest this long after the last read */
const REREAD_MS = 30_000;

export interface UserspaceLbHostConfig {
  /** manifests mode: the -f paths (files, folders, `-`); unused in Kubernetes mode */
  readonly paths: readonly string[];
  /** how often the paths' files are compared (manifest-folder-source.ts) */
  readonly pollMs: number;
  readonly loopback: boolean;
  readonly proxyProtocol: boolean;
  readonly tcp: TcpPlumbingChoice;
  /** why this data plane runs (choose-dataplane.ts), for the start line */
  readonly reason: string;
  /** the proxy's Maglev tables and affinity, and the forwarding step's (default 0x5eed) */
  readonly seed?: number;
}

export interface UserspaceLbHostInput {
  /** Kubernetes mode: the cluster and how a read becomes a Snapshot (lb-kube.ts) */
  readonly kube?: { readonly source: SnapshotSource; readonly prepare: PrepareRead };
  /** the text of `-` among the paths (read once by the caller) */
  readonly readStdin?: () => Promise<string>;
  /** passlb up: the Snapshots its run pushes (cluster/pushed-source.ts), read instead of the paths */
  readonly pushed?: SnapshotSource;
}

export interface UserspaceLbHost {
  readonly host: LbHost;
  readonly sync: UserspaceLbSync;
  /** the prober's verdicts, for a view of the members (passlb up's live view, quickstart-run.ts) */
  readonly lookup: HealthLookup;
  /** which TCP plumbing the proxy runs: "libuv" or "net" (userspace/tcp-plumbing.ts) */
  readonly tcpPlumbing: "libuv" | "net";
}

export class InputRefusedError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`the input has ${problems.length} problem${problems.length === 1 ? "" : "s"}`);
    this.name = "InputRefusedError";
  }
}

export function buildUserspaceLbHost(
  config: UserspaceLbHostConfig,
  drivers: UserspaceLbDrivers,
  sink: UserspaceLbSink,
  input: UserspaceLbHostInput = {},
): UserspaceLbHost {
  const reporter = new UserspaceLbReporter(sink);
  const seed = config.seed ?? SEED;
  const proxy = drivers.proxy({ seed, proxyProtocol: config.proxyProtocol, tcp: config.tcp });
  const source =
    input.kube?.source ??
    input.pushed ??
    drivers.folder({
      path: config.paths,
      rereadMs: REREAD_MS,
      debounceMs: DEBOUNCE_MS,
      pollMs: config.pollMs,
      ...(input.readStdin && { readStdin: input.readStdin }),
    });
  const sync: UserspaceLbSync = new UserspaceLbSync({
    seed,
    vipSource: input.kube ? "status" : "ipam",
    loopback: config.loopback,
    reportBadReads: !input.kube,
    prepare:
      input.kube?.prepare ?? ((read) => ({ snapshot: read.snapshot, degraded: read.problems.length > 0 })),
    proxy,
    health: () => health,
    reporter,
    sink,
    now: drivers.now,
  });
  const health = drivers.health({
    onChange: () => void sync.apply(),
    onEvent: (e) => sink.observer.proberEvent(e),
    onProbe: (node, ok, seconds) => sink.observer.probeFinished(node, ok, seconds),
  });
  const parts: LbHostPart[] = [
    {
      name: "dataplane",
      start: () => {
        sink.out(
          `passlb lb: data plane userspace (${config.reason}); ${describeTcpPlumbing(proxy.tcpPlumbing, config.tcp)}\n`,
        );
        // connections and bytes: the proxy's own tallies, read at each scrape and dashboard refresh
        sink.observer.traffic(() => proxy.trafficTotals());
        return async () => {
          await sync.idle(); // a prober change may have queued a pass
          await proxy.stop();
        };
      },
    },
    { name: "health", start: () => () => health.close() },
    {
      name: "input",
      start: async () => {
        let first: readonly string[] | undefined;
        const started = source.start({
          onChange: () => sync.changed(),
          onRead: (read) => {
            if (!read.ok && !sync.hasGood && !input.kube) first ??= read.problems;
            return sync.read(read);
          },
        });
        const undo = async () => {
          await source.close();
          await started;
          await sync.idle();
        };
        // a cluster may not answer yet: the host runs (and its dashboard says so) meanwhile
        if (input.kube) return undo;
        await started;
        if (first && !sync.hasGood) {
          await undo();
          reporter.firstReadFailed(first);
          throw new InputRefusedError(first);
        }
        return undo;
      },
    },
    {
      name: "reporter",
      start: async () => {
        const dashboard = await sink.serve();
        if (dashboard) sink.out(`  dashboard: ${dashboard} (metrics at ${dashboard}metrics)\n`);
        return undefined;
      },
    },
  ];
  return { host: new LbHost(parts), sync, lookup: health.lookup, tcpPlumbing: proxy.tcpPlumbing };
}
