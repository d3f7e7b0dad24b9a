/**
 * Fakes of every nftables LB host driver (lb-host-drivers.ts), for tests: the in-memory
 * `nft` (drivers/fake-nft.ts), policy routes (drivers/fake-ip-routes.ts), tunnel check
 * routes that change nothing, a generation watch that never knows the generation (so a
 * drift check always lists the table), conntrack sysctls with sizes that need nothing,
 * a `conntrack` that deletes nothing, usage readers with nothing to read, FakeAnnouncers
 * for both engines and no wire checks. Each start of a driver is written to one ordered
 * `calls` list ("nft.dump", "generations.open", "announcer.start", …), and `fail` makes
 * the named call throw.
 *
 * The clock is the real one: the data plane's debounce and retries run in real time, as
 * the Kubernetes-mode tests need. Pass `overrides` to replace a driver (a FakeNft the
 * test reads, a conntrack sysctl with chosen sizes, an engine).
 */
import type { Announcer } from "../../announce/announcer.ts";
import { FakeAnnouncer } from "../../announce/fake-announcer.ts";
import { FakePolicyRoutes } from "../../drivers/fake-ip-routes.ts";
import { FakeNft } from "../../drivers/fake-nft.ts";
import { realClock } from "../../health/clock.ts";
import type { NftablesLbHostDrivers } from "./lb-host-drivers.ts";

export type FakeLbHostCall =
  | "nft.dump"
  | "nft.run"
  | "generations.open"
  | "generations.close"
  | "announcer.start"
  | "announcer.stop";

export interface FakeLbHostDrivers extends NftablesLbHostDrivers {
  readonly calls: FakeLbHostCall[];
  /** the calls that throw from now on */
  readonly fail: Set<FakeLbHostCall>;
}

export function fakeLbHostDrivers(overrides: Partial<NftablesLbHostDrivers> = {}): FakeLbHostDrivers {
  const calls: FakeLbHostCall[] = [];
  const fail = new Set<FakeLbHostCall>();
  const call = (name: FakeLbHostCall) => {
    calls.push(name);
    if (fail.has(name)) throw new Error(`fake ${name} refused`);
  };
  const fakeNft = overrides.nft ?? new FakeNft();
  const nft: NftablesLbHostDrivers["nft"] = {
    run: async (tx) => {
      call("nft.run");
      return fakeNft.run(tx);
    },
    check: (tx) => fakeNft.check(tx),
    dump: async (table, options) => {
      call("nft.dump");
      return fakeNft.dump(table, options);
    },
    counters: (table) => fakeNft.counters(table),
  };
  const engine = (announcer: Announcer): Announcer => ({
    start: async (input) => {
      call("announcer.start");
      return announcer.start(input);
    },
    update: (input) => announcer.update(input),
    status: () => announcer.status(),
    stop: async (how) => {
      call("announcer.stop");
      return announcer.stop(how);
    },
  });
  return {
    calls,
    fail,
    clock: realClock(),
    policyRoutes: () => new FakePolicyRoutes(),
    encapCheckRoutes: () => ({ sync: async () => ({ changed: false }) }),
    nftGenerations: () => {
      call("generations.open");
      return { token: () => undefined, close: () => void calls.push("generations.close") };
    },
    conntrackSysctl: { read: async () => ({ max: 262144, buckets: 262144 }), writeMax: async () => {} },
    conntrack: { deleteFlows: async () => 0, listReplySources: async () => [] },
    flowTableUsage: async () => undefined,
    conntrackUsage: async () => undefined,
    keepalived: (config) => engine(new FakeAnnouncer(config.self)),
    bird: (_config, host) => engine(new FakeAnnouncer(host, "bird")),
    wireChecks: () => undefined,
    ...overrides,
    nft,
  };
}
