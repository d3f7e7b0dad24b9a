/**
 * The packing algorithm for one Service, one address type and one port list: upstream
 * `reconcileByPortMapping` (kubernetes/endpointslice reconciler.go).
 *
 * 1. Each existing slice keeps the desired version of each endpoint still desired (the first
 *    slice holding an endpoint keeps it; later copies drop). A slice that lost or changed an
 *    endpoint is updated (or deleted when empty); one whose labels drifted is updated; the
 *    rest are unchanged.
 * 2. Endpoints still to place go into the slices being updated anyway, fullest first.
 * 3. What remains goes into ONE unchanged slice only if fewer than `max` remain and one slice
 *    can take them all (the one left closest to full); otherwise into new slices. Remaining
 *    endpoints are never spread over several unchanged slices: one create beats many updates.
 *
 * Where upstream pops from a set in random order, we take endpoints in desired (Pod) order,
 * and ties go to the earlier slice, so the result is deterministic.
 */
import type { Endpoint, EndpointPort, EndpointSlice, Service } from "../k8s/objects.ts";
import { type DesiredSet, entryOf } from "./desired-index.ts";
import { endpointKey, endpointsEqualBeyondHash } from "./endpoint-set.ts";
import { type AddressType, labelsChanged, newServiceSlice, sliceLabels } from "./service-slices.ts";

export interface PackResult {
  readonly create: EndpointSlice[];
  readonly update: EndpointSlice[];
  readonly delete: EndpointSlice[];
  readonly unchanged: EndpointSlice[];
}

export interface PackInput {
  readonly service: Service;
  readonly addressType: AddressType;
  readonly ports: EndpointPort[];
  /** owned existing slices with this port-map key, in a stable order */
  readonly existing: readonly EndpointSlice[];
  /** the desired endpoints of this group */
  readonly desired: DesiredSet;
  readonly maxEndpointsPerSlice: number;
}

/** The endpoints still to place, taken from the front. (A cursor over an array: repeatedly
 * iterating a Map from the start after deletions is quadratic in V8.) */
class Remaining {
  private next = 0;
  constructor(private readonly list: readonly Endpoint[]) {}
  get size(): number {
    return this.list.length - this.next;
  }
  /** Appends endpoints to `into` until it holds `max` or none remain. */
  fill(into: Endpoint[], max: number): void {
    while (into.length < max && this.next < this.list.length) into.push(this.list[this.next++]!);
  }
}

export function packSlices(input: PackInput): PackResult {
  const { service, maxEndpointsPerSlice: max } = input;
  const { byId, entries } = input.desired;
  const placed = {}; // marks entries already kept in a slice during this call
  let placedCount = 0;
  const create: EndpointSlice[] = [];
  const update: EndpointSlice[] = [];
  const del: EndpointSlice[] = [];
  let unchanged: EndpointSlice[] = [];

  // Step 1: drop and refresh endpoints in existing slices.
  for (const slice of input.existing) {
    const existingEndpoints = slice.endpoints ?? [];
    const kept: Endpoint[] = [];
    let changed = false;
    for (const ep of existingEndpoints) {
      // Fast path: the endpoint object is the desired one itself (an unchanged Pod's).
      const own = entryOf(ep);
      const entry = own ? (input.desired.has(own) ? own : byId.get(own.id)) : byId.get(endpointKey(ep));
      if (!entry || entry.placed === placed) continue; // no longer desired, or a duplicate
      entry.placed = placed;
      placedCount++;
      const want = entry.ep;
      kept.push(want);
      if (!changed && want !== ep && !endpointsEqualBeyondHash(want, ep)) changed = true;
    }
    if (changed || kept.length !== existingEndpoints.length) {
      if (kept.length === 0) del.push(slice);
      else
        update.push({
          ...slice,
          metadata: { ...slice.metadata, labels: sliceLabels(service) },
          endpoints: kept,
        });
    } else if (labelsChanged(slice, service)) {
      update.push({ ...slice, metadata: { ...slice.metadata, labels: sliceLabels(service) } });
    } else unchanged.push(slice);
  }

  const remaining = new Remaining(
    placedCount === entries.length ? [] : entries.filter((e) => e.placed !== placed).map((e) => e.ep),
  );
  // Step 2: fill the slices being updated anyway, fullest first (stable on ties).
  if (remaining.size > 0 && update.length > 0) {
    const byFullness = update
      .map((s, i) => ({ s, i }))
      .sort((a, b) => (b.s.endpoints?.length ?? 0) - (a.s.endpoints?.length ?? 0) || a.i - b.i);
    for (const { s, i } of byFullness) {
      if (remaining.size === 0) break;
      const endpoints = [...(s.endpoints ?? [])];
      remaining.fill(endpoints, max);
      update[i] = { ...s, endpoints };
    }
  }

  // Step 3: one unchanged slice that can take everything left, else new slices.
  while (remaining.size > 0) {
    let target: EndpointSlice | undefined;
    if (remaining.size < max && unchanged.length > 0) {
      let closest = max;
      for (const s of unchanged) {
        const diff = max - (remaining.size + (s.endpoints?.length ?? 0));
        if (diff >= 0 && diff < closest) {
          closest = diff;
          target = s;
          if (diff === 0) break;
        }
      }
    }
    if (target) {
      const chosen = target;
      unchanged = unchanged.filter((s) => s !== chosen);
      const endpoints = [...(chosen.endpoints ?? [])];
      remaining.fill(endpoints, max);
      update.push({ ...chosen, endpoints });
    } else {
      const fresh = newServiceSlice(service, input.addressType, input.ports);
      const endpoints: Endpoint[] = [];
      remaining.fill(endpoints, max);
      create.push({ ...fresh, endpoints });
    }
  }
  return { create, update, delete: del, unchanged };
}
