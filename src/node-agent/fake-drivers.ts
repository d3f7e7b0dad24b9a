/**
 * Fakes of every node-agent driver (agent-drivers.ts), for unit tests: each answers from
 * memory and writes what it was asked to one ordered `calls` list (`"health.close"`,
 * `"nft.run"`, …), so a test can read the order of a start and a stop. `fail` makes the
 * named call throw (a refused `nft`, an `ip link add` that fails, a source that cannot
 * start). `nft` is the fake nft driver (drivers/fake-nft.ts): it applies what the agent
 * runs to an in-memory table a test can read. The input is a source the test feeds: `push`
 * delivers a read.
 */
import type { SnapshotSource, SourceHandlers, SourceRead } from "../cluster/snapshot-source.ts";
import { FakeNft } from "../drivers/fake-nft.ts";
import type { Transaction } from "../drivers/nft-transaction.ts";
import { FakeClock } from "../health/clock.ts";
import type { AgentDrivers, HealthServing, NodeProxying } from "./agent-drivers.ts";

export type FakeCall =
  | "decap.ensure"
  | "health.update"
  | "health.queued"
  | "health.updated"
  | "health.close"
  | "proxy.new"
  | "proxy.update"
  | "proxy.close"
  | "source.start"
  | "source.close"
  | "nft.run"
  | "conntrack.delete";

export interface FakeAgentDrivers extends AgentDrivers {
  readonly clock: FakeClock;
  readonly nft: FakeNft;
  readonly calls: FakeCall[];
  /** the calls that throw from now on */
  readonly fail: Set<FakeCall>;
  /** delivers a read to the running agent, as the folder source would */
  push(read: SourceRead): Promise<void>;
}

export function fakeAgentDrivers(options: { firstRead?: SourceRead } = {}): FakeAgentDrivers {
  const calls: FakeCall[] = [];
  const fail = new Set<FakeCall>();
  const call = (name: FakeCall) => {
    calls.push(name);
    if (fail.has(name)) throw new Error(`fake ${name} refused`);
  };
  let handlers: SourceHandlers | undefined;
  const source: SnapshotSource = {
    async start(h) {
      call("source.start");
      handlers = h;
      if (options.firstRead) await h.onRead(options.firstRead);
    },
    async close() {
      call("source.close");
      handlers = undefined;
    },
  };
  const health: HealthServing = {
    update: async () => call("health.update"),
    markQueued: () => call("health.queued"),
    markUpdated: () => call("health.updated"),
    addresses: () => ({ healthz: { port: 10256 }, services: new Map() }),
    close: async () => call("health.close"),
  };
  const proxy: NodeProxying = {
    update: async () => {
      call("proxy.update");
      return [];
    },
    close: async () => call("proxy.close"),
  };
  return {
    calls,
    fail,
    clock: new FakeClock(),
    nft: new RecordingNft(call),
    conntrack: {
      deleteFlows: async () => {
        call("conntrack.delete");
        return 0;
      },
      listReplySources: async () => [],
    },
    ensureDecap: async () => {
      call("decap.ensure");
      return { created: [], notes: [] };
    },
    healthServers: () => health,
    nodeProxy: () => {
      call("proxy.new");
      return proxy;
    },
    source: () => source,
    async push(read) {
      handlers?.onChange();
      await handlers?.onRead(read);
    },
  };
}

/** FakeNft whose runs are also calls (and fail when `fail` names "nft.run") */
class RecordingNft extends FakeNft {
  readonly #call: (name: FakeCall) => void;
  constructor(call: (name: FakeCall) => void) {
    super();
    this.#call = call;
  }
  override async run(tx: Transaction): Promise<void> {
    this.#call("nft.run");
    await super.run(tx);
  }
}
