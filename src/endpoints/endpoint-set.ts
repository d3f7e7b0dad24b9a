/**
 * Endpoint identity and equality, and the port-map key that groups endpoints into slices
 * (upstream kubernetes/endpointslice
 * util/endpointset.go `hashEndpoint`, utils.go `EndpointsEqualBeyondHash`, `NewPortMapKey`).
 *
 * Identity is the sorted addresses, the hostname and the target's namespace and name (not its
 * uid): two Pods with one IP but different names are two endpoints. Upstream hashes these
 * with FNV; we use the joined text itself, which is collision-free and as stable.
 *
 * The port-map key differs from upstream on purpose in form only: upstream sorts ports by a
 * hash of a Go debug dump; we sort by (name, protocol, port, appProtocol), which groups
 * exactly the same port lists together and also fixes the order of `ports` in new slices.
 */
import type { Endpoint, EndpointPort } from "../k8s/objects.ts";

const keys = new WeakMap<Endpoint, string>();

/** The identity of an endpoint within one Service's desired set (memoised per endpoint
 * object; endpoints are never mutated). */
export function endpointKey(ep: Endpoint): string {
  const known = keys.get(ep);
  if (known !== undefined) return known;
  const key = endpointIdentity(ep);
  keys.set(ep, key);
  return key;
}

/** The identity, computed afresh (for endpoints built once and never looked up again by object). */
export function endpointIdentity(ep: Endpoint): string {
  const addresses = ep.addresses.length === 1 ? (ep.addresses[0] ?? "") : [...ep.addresses].sort().join(",");
  const ref = ep.targetRef;
  return `${addresses}|${ep.hostname ?? ""}|${ref?.namespace ?? ""}/${ref?.name ?? ""}`;
}

const same = <T>(a: T | null | undefined, b: T | null | undefined): boolean =>
  (a ?? undefined) === (b ?? undefined);

/** Whether two endpoints with the same identity differ in what the controller writes:
 * nodeName, zone, the three conditions (unset differs from set) and the target reference
 * field by field without its resourceVersion. Hints are deliberately not compared. */
export function endpointsEqualBeyondHash(a: Endpoint, b: Endpoint): boolean {
  const ca = a.conditions;
  const cb = b.conditions;
  if (!same(ca.ready, cb.ready) || !same(ca.serving, cb.serving) || !same(ca.terminating, cb.terminating))
    return false;
  if (!same(a.nodeName, b.nodeName) || !same(a.zone, b.zone)) return false;
  const ra = a.targetRef;
  const rb = b.targetRef;
  if (!ra || !rb) return !ra && !rb;
  return (
    same(ra.kind, rb.kind) &&
    same(ra.namespace, rb.namespace) &&
    same(ra.name, rb.name) &&
    same(ra.uid, rb.uid) &&
    same(ra.apiVersion as string | undefined, rb.apiVersion as string | undefined) &&
    same(ra.fieldPath as string | undefined, rb.fieldPath as string | undefined)
  );
}

const comparePorts = (a: EndpointPort, b: EndpointPort): number =>
  (a.name ?? "").localeCompare(b.name ?? "") ||
  (a.protocol ?? "").localeCompare(b.protocol ?? "") ||
  (a.port ?? 0) - (b.port ?? 0) ||
  (a.appProtocol ?? "").localeCompare(b.appProtocol ?? "");

/** Ports in the canonical order used for keys and for new slices. */
export function sortPorts(ports: readonly EndpointPort[]): EndpointPort[] {
  return [...ports].sort(comparePorts);
}

/** The grouping key of a port list; an absent and an empty list give the same key. */
export function portMapKey(ports: readonly EndpointPort[] | null | undefined): string {
  if (!ports || ports.length === 0) return "[]";
  return JSON.stringify(
    sortPorts(ports).map((p) => [p.name ?? null, p.protocol ?? null, p.port ?? null, p.appProtocol ?? null]),
  );
}
