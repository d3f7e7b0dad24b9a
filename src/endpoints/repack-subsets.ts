/**
 * Canonical Endpoints subsets, as the mirroring controller sees them (upstream kubernetes
 * pkg/api/v1/endpoints/util.go `RepackSubsets`, `mapAddressByPort`, `SortSubsets`).
 *
 * Addresses are de-duplicated by (IP, targetRef uid); every port is mapped to the addresses
 * offering it, and ports offered by exactly the same addresses (with the same readiness) are
 * regrouped into one subset. An address both ready and not ready for a port is not ready.
 * Addresses are sorted by IP text then uid; subsets without ports are kept, subsets with
 * ports but no addresses disappear. Upstream orders subsets and ports by a hash; we order
 * them by their ports' text, which is just as stable.
 */
import type { Endpoints } from "../k8s/objects.ts";

type Subset = NonNullable<Endpoints["subsets"]>[number];
export type EndpointAddress = NonNullable<Subset["addresses"]>[number];
export type SubsetPort = NonNullable<Subset["ports"]>[number];

export interface RepackedSubset {
  readonly ports: SubsetPort[];
  readonly addresses: EndpointAddress[];
  readonly notReadyAddresses: EndpointAddress[];
}

const portId = (p: SubsetPort | undefined) =>
  p ? JSON.stringify([p.name ?? "", p.port, p.protocol, p.appProtocol ?? null]) : "<no port>";

const compareAddress = (a: EndpointAddress, b: EndpointAddress) =>
  a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : (a.targetRef?.uid ?? "").localeCompare(b.targetRef?.uid ?? "");

export function repackSubsets(subsets: Endpoints["subsets"]): RepackedSubset[] {
  const addresses = new Map<string, EndpointAddress>(); // (ip, uid) → first address seen
  // port id → (address id → ready)
  const byPort = new Map<string, { port: SubsetPort | undefined; ready: Map<string, boolean> }>();
  for (const subset of subsets ?? []) {
    const ports: (SubsetPort | undefined)[] = subset.ports?.length ? subset.ports : [undefined];
    for (const port of ports) {
      const id = portId(port);
      let entry = byPort.get(id);
      if (!entry) {
        entry = { port, ready: new Map() };
        byPort.set(id, entry);
      }
      for (const [list, ready] of [
        [subset.addresses, true],
        [subset.notReadyAddresses, false],
      ] as const) {
        for (const a of list ?? []) {
          const key = `${a.ip}\u0000${a.targetRef?.uid ?? ""}`;
          if (!addresses.has(key)) addresses.set(key, a);
          // not ready always wins over ready
          if (entry.ready.get(key) !== false) entry.ready.set(key, ready);
        }
      }
    }
  }
  // Regroup ports by identical (address, readiness) sets.
  const groups = new Map<string, { ports: SubsetPort[]; ready: Map<string, boolean> }>();
  for (const { port, ready } of byPort.values()) {
    const setKey = [...ready]
      .map(([k, r]) => `${k}\u0000${r}`)
      .sort()
      .join("\u0001");
    let group = groups.get(setKey);
    if (!group) {
      group = { ports: [], ready };
      groups.set(setKey, group);
    }
    if (port) group.ports.push(port);
  }
  const out: RepackedSubset[] = [];
  for (const { ports, ready } of groups.values()) {
    if (ready.size === 0) continue;
    const readyList: EndpointAddress[] = [];
    const notReady: EndpointAddress[] = [];
    for (const [key, r] of ready) (r ? readyList : notReady).push(addresses.get(key)!);
    out.push({
      ports: ports.sort((a, b) => portId(a).localeCompare(portId(b))),
      addresses: readyList.sort(compareAddress),
      notReadyAddresses: notReady.sort(compareAddress),
    });
  }
  const subsetId = (s: RepackedSubset) => s.ports.map(portId).join(",");
  return out.sort((a, b) => subsetId(a).localeCompare(subsetId(b)));
}
