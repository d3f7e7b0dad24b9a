/**
 * Fakes of the userspace LB host's drivers (userspace-host/lb-host-drivers.ts) for
 * userspace-host/build-userspace-lb-host.test.ts: one journal of every call in order; a source the test
 * feeds (`push` delivers a read, as the folder source or the cluster would); a proxy that
 * records what it was asked to serve (`served`: `ns/name VIP:port` per listener); health
 * that calls every member healthy; a sink that keeps its lines.
 */
import type { FolderOptions } from "../../cluster/manifest-folder-source.ts";
import type { SnapshotSource, SourceHandlers, SourceRead } from "../../cluster/snapshot-source.ts";
import type { UserspaceLbDrivers, UserspaceLbSink } from "./lb-host-drivers.ts";

export interface FakeUserspaceDrivers extends UserspaceLbDrivers {
  readonly journal: string[];
  /** the listeners of the last update: `ns/name VIP:port` */
  readonly served: () => readonly string[];
  /** the options the folder source was built with */
  readonly folderOptions: () => FolderOptions | undefined;
  /** delivers a read to the running host */
  push(read: SourceRead): Promise<void>;
  readonly source: SnapshotSource;
}

export function fakeUserspaceDrivers(firstRead: SourceRead): FakeUserspaceDrivers {
  const journal: string[] = [];
  let handlers: SourceHandlers | undefined;
  let served: string[] = [];
  let folderOptions: FolderOptions | undefined;
  const source: SnapshotSource = {
    async start(h) {
      journal.push("source.start");
      handlers = h;
      h.onChange();
      await h.onRead(firstRead);
    },
    async close() {
      journal.push("source.close");
      handlers = undefined;
    },
  };
  return {
    journal,
    source,
    served: () => served,
    folderOptions: () => folderOptions,
    async push(read) {
      handlers?.onChange();
      await handlers?.onRead(read);
    },
    proxy: () => ({
      name: "userspace",
      tcpPlumbing: "net",
      start: async () => ({ adopted: false, replaced: false }),
      async apply({ forwarding }) {
        journal.push("proxy.apply");
        served = forwarding.flatMap((s) =>
          s.plan.vips.flatMap((v) => s.listeners.map((l) => `${s.service} ${v.address}:${l.port}`)),
        );
        return { ops: served.length, ms: 0, findings: [] };
      },
      check: async () => [],
      counters: async () => ({ services: new Map(), nodes: new Map(), reasons: new Map() }),
      trafficTotals: () => [],
      async stop() {
        journal.push("proxy.stop");
      },
    }),
    health: () => ({
      lookup: () => ({ state: "healthy" }),
      setPlans: (plans) => void journal.push(`health.setPlans ${plans.map((p) => p.service).join(",")}`),
      async close() {
        journal.push("health.close");
      },
    }),
    folder: (o) => {
      folderOptions = o;
      return source;
    },
    now: () => 0,
  };
}

/** a sink that keeps its stdout and stderr lines; the observability calls do nothing */
export function fakeUserspaceSink(): {
  readonly sink: UserspaceLbSink;
  readonly out: string[];
  readonly err: string[];
} {
  const out: string[] = [];
  const err: string[] = [];
  const none = () => {};
  const sink: UserspaceLbSink = {
    out: (line) => void out.push(line),
    err: (line) => void err.push(line),
    observer: { traffic: none, forwarding: none, setFindings: none, proberEvent: none, probeFinished: none },
    metrics: { programmed: none, ipPools: none },
    logger: { finding: none, log: none },
    serve: async () => "http://127.0.0.1:9797/",
  };
  return { sink, out, err };
}
