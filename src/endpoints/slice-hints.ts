/**
 * Hints on the endpoints of written slices, from `spec.trafficDistribution`
 * (upstream kubernetes/endpointslice trafficdist/trafficdist.go).
 *
 * - PreferClose (always) and PreferSameZone (with the PreferSameTrafficDistribution option):
 *   each ready endpoint gets `forZones: [its zone]`; PreferSameNode adds `forNodes: [its node]`.
 *   Not-ready endpoints keep whatever they have.
 * - Otherwise hints are removed from every endpoint.
 * Slices being created or updated get the hints; an unchanged slice whose hints are wrong
 * becomes an update.
 *
 * Not modelled: the CPU-proportional topology cache behind the `topology-mode: Auto` (or
 * deprecated `topology-aware-hints`) annotation; the reconciler leaves hints alone for such
 * Services and reports it.
 */
import type { Endpoint, EndpointSlice, Service } from "../k8s/objects.ts";

type Hints = NonNullable<Endpoint["hints"]>;
type Heuristic = (ep: Endpoint) => Hints | undefined;

const TOPOLOGY_MODE_ANNOTATIONS = [
  "service.kubernetes.io/topology-aware-hints",
  "service.kubernetes.io/topology-mode",
] as const;

/** Whether the Service asks for the topology cache (annotation `Auto`/`auto`); the
 * deprecated annotation wins when both are set. */
export function usesTopologyCache(service: Service): boolean {
  const annotations = service.metadata.annotations ?? {};
  for (const key of TOPOLOGY_MODE_ANNOTATIONS) {
    const value = annotations[key];
    if (value !== undefined) return value === "Auto" || value === "auto";
  }
  return false;
}

function heuristicFor(service: Service, preferSame: boolean): Heuristic {
  const td = service.spec.trafficDistribution;
  const zoneOnly = td === "PreferClose" || (preferSame && td === "PreferSameZone");
  const withNode = preferSame && td === "PreferSameNode";
  if (!zoneOnly && !withNode) return () => undefined;
  return (ep) => {
    const hints: Hints = {};
    if (ep.zone) hints.forZones = [{ name: ep.zone }];
    if (withNode && ep.nodeName) hints.forNodes = [{ name: ep.nodeName }];
    return hints.forZones || hints.forNodes ? hints : undefined;
  };
}

type NameList = readonly { name: string }[] | null | undefined;
function sameNames(a: NameList, b: NameList): boolean {
  const x = a ?? [];
  const y = b ?? [];
  return x.length === y.length && x.every((v, i) => v.name === y[i]?.name);
}
const hintsEqual = (a: Endpoint["hints"], b: Endpoint["hints"]) =>
  (!a && !b) || (sameNames(a?.forZones, b?.forZones) && sameNames(a?.forNodes, b?.forNodes));

/** Whether the heuristic would change this endpoint; not-ready endpoints are left alone
 * unless hints are being stripped. */
function wants(h: Heuristic, stripping: boolean, ep: Endpoint): Hints | undefined | "keep" {
  if (!stripping && ep.conditions.ready === false) return "keep";
  const want = h(ep);
  return hintsEqual(want, ep.hints) ? "keep" : want;
}

function withHints(slice: EndpointSlice, h: Heuristic, stripping: boolean): EndpointSlice {
  let changed = false;
  const endpoints = (slice.endpoints ?? []).map((ep) => {
    const w = wants(h, stripping, ep);
    if (w === "keep") return ep;
    changed = true;
    const { hints: _drop, ...rest } = ep;
    return w === undefined ? rest : { ...rest, hints: w };
  });
  return changed ? { ...slice, endpoints } : slice;
}

const hintsVerified = new WeakMap<EndpointSlice, string>();

export function reconcileHints(
  service: Service,
  preferSame: boolean,
  slices: { create: EndpointSlice[]; update: EndpointSlice[]; unchanged: EndpointSlice[] },
): { create: EndpointSlice[]; update: EndpointSlice[]; unchanged: EndpointSlice[] } {
  const h = heuristicFor(service, preferSame);
  const td = service.spec.trafficDistribution;
  const stripping = !(td === "PreferClose" || (preferSame && td !== undefined));
  const unchanged: EndpointSlice[] = [];
  const update = slices.update.map((s) => withHints(s, h, stripping));
  const mode = `${stripping ? "strip" : (td ?? "")}/${preferSame}`;
  for (const s of slices.unchanged) {
    // A slice object never changes, so "its hints are right under this mode" is remembered.
    if (hintsVerified.get(s) === mode) {
      unchanged.push(s);
      continue;
    }
    const fixed = withHints(s, h, stripping);
    if (fixed === s) {
      hintsVerified.set(s, mode);
      unchanged.push(s);
    } else update.push(fixed);
  }
  return { create: slices.create.map((s) => withHints(s, h, stripping)), update, unchanged };
}
