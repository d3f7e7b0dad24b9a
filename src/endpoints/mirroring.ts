/**
 * The EndpointSliceMirroring controller for one Endpoints object: its subsets → at most one
 * slice per (address type, port list), owned by the Endpoints
 * (upstream kubernetes pkg/controller/endpointslicemirroring `syncEndpoints`, `shouldMirror`,
 * reconciler.go `reconcile`, `reconcileByPortMapping`, `finalize`, reconciler_helpers.go,
 * utils.go `newEndpointSlice`, `addressToEndpoint`, `recycleSlices`).
 *
 * Mirrored only when the Endpoints is not labelled skip-mirror=true, has no leader-election
 * annotation, and a selector-less Service of the same name exists; otherwise its mirrored
 * slices are deleted. Per repacked subset, ready then not-ready addresses are taken up to
 * `maxEndpointsPerSubset` (default 1000); addresses that are not IPs are skipped. Findings
 * mirror upstream's InvalidIPAddress and TooManyAddressesToMirror events.
 *
 * Deliberately not here: watching, and the `endpoints.kubernetes.io/last-change-trigger-time`
 * annotation (the mirroring controller copies the Endpoints' annotations minus that one).
 */
import type { Endpoint, EndpointSlice, Endpoints, Service } from "../k8s/objects.ts";
import { parseIp } from "../net/ip.ts";
import { endpointKey, endpointsEqualBeyondHash, portMapKey } from "./endpoint-set.ts";
import { SERVICE_NAME_LABEL } from "./merge.ts";
import { canonicalAddress } from "./pod-endpoints.ts";
import { type EndpointAddress, repackSubsets } from "./repack-subsets.ts";
import {
  type AddressType,
  generateNameFor,
  MANAGED_BY_LABEL,
  MIRRORING_CONTROLLER_NAME,
  SKIP_MIRROR_LABEL,
  TRIGGER_TIME_ANNOTATION,
} from "./service-slices.ts";
import { sliceWriteFindings } from "./slice-validation.ts";
import type { SliceFinding, SliceWrites } from "./slice-writes.ts";

export const DEFAULT_MAX_ENDPOINTS_PER_SUBSET = 1000;
export const LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader";
const LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration";

export interface MirrorInput {
  /** the Endpoints object, or undefined when it no longer exists */
  readonly endpoints: Endpoints | undefined;
  /** the Service of the same name, if any */
  readonly service: Service | undefined;
  /** slices in the namespace; only slices mirrored for this name are used */
  readonly slices: readonly EndpointSlice[];
  readonly namespace: string;
  readonly name: string;
}

export interface MirrorResult extends SliceWrites {
  readonly findings: SliceFinding[];
}

export function mirroredSlicesOf(namespace: string, name: string, slices: readonly EndpointSlice[]) {
  return slices
    .filter(
      (s) =>
        (s.metadata.namespace ?? "default") === namespace &&
        s.metadata.labels?.[SERVICE_NAME_LABEL] === name &&
        s.metadata.labels?.[MANAGED_BY_LABEL] === MIRRORING_CONTROLLER_NAME,
    )
    .sort((a, b) => ((a.metadata.name ?? "") < (b.metadata.name ?? "") ? -1 : 1));
}

/** Why an Endpoints object is not mirrored, or undefined when it is. */
export function mirrorSkipReason(endpoints: Endpoints | undefined, service: Service | undefined) {
  if (!endpoints) return "the Endpoints object does not exist";
  if (endpoints.metadata.labels?.[SKIP_MIRROR_LABEL] === "true")
    return `it is labelled ${SKIP_MIRROR_LABEL}=true`;
  if (endpoints.metadata.annotations?.[LEADER_ANNOTATION] !== undefined)
    return `it carries the leader-election annotation ${LEADER_ANNOTATION}`;
  if (!service) return "no Service of that name exists";
  if (service.spec.selector != null)
    return "its Service has a selector (the EndpointSlice controller serves it)";
  return undefined;
}

function mirroredAnnotations(endpoints: Endpoints): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(endpoints.metadata.annotations ?? {}))
    if (k !== TRIGGER_TIME_ANNOTATION && k !== LAST_APPLIED_ANNOTATION) out[k] = v;
  return out;
}

function sameRecord(
  a: Record<string, string> | null | undefined,
  b: Record<string, string> | null | undefined,
) {
  const x = Object.entries(a ?? {});
  const y = b ?? {};
  return x.length === Object.keys(y).length && x.every(([k, v]) => y[k] === v);
}

function addressToEndpoint(address: EndpointAddress, ip: string, ready: boolean): Endpoint {
  const ep: Endpoint = { addresses: [ip], conditions: { ready } };
  if (address.targetRef) ep.targetRef = address.targetRef;
  if (address.nodeName != null) ep.nodeName = address.nodeName;
  if (address.hostname) ep.hostname = address.hostname;
  return ep;
}

function newMirroredSlice(endpoints: Endpoints, group: Group, name: string | undefined): EndpointSlice {
  const epName = endpoints.metadata.name ?? "";
  const metadata: EndpointSlice["metadata"] = {
    namespace: endpoints.metadata.namespace ?? "default",
    labels: {
      ...(endpoints.metadata.labels ?? {}),
      [SERVICE_NAME_LABEL]: epName,
      [MANAGED_BY_LABEL]: MIRRORING_CONTROLLER_NAME,
    },
    annotations: mirroredAnnotations(endpoints),
    ownerReferences: [
      {
        apiVersion: "v1",
        kind: "Endpoints",
        name: epName,
        uid: endpoints.metadata.uid ?? "",
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
  };
  if (name) metadata.name = name;
  else metadata.generateName = generateNameFor(epName);
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata,
    addressType: group.type,
    endpoints: [...group.endpoints.values()],
    ports: group.ports,
  };
}

interface Group {
  readonly type: AddressType;
  readonly ports: NonNullable<EndpointSlice["ports"]>;
  readonly endpoints: Map<string, Endpoint>;
}

/** The first existing slice can stay when it holds exactly the desired endpoints, carries the
 * Endpoints' labels and annotations, and is not owned by an older Endpoints (PR #125359). */
function unchanged(slice: EndpointSlice, endpoints: Endpoints, desired: Map<string, Endpoint>): boolean {
  let matches = 0;
  for (const ep of slice.endpoints ?? []) {
    const want = desired.get(endpointKey(ep));
    if (!want || !endpointsEqualBeyondHash(want, ep)) return false;
    matches++;
  }
  if (matches !== desired.size) return false;
  const { [MANAGED_BY_LABEL]: _m, [SERVICE_NAME_LABEL]: _s, ...labels } = slice.metadata.labels ?? {};
  if (!sameRecord(endpoints.metadata.labels, labels)) return false;
  if (!sameRecord(mirroredAnnotations(endpoints), slice.metadata.annotations)) return false;
  return !(slice.metadata.ownerReferences ?? []).some(
    (o) =>
      o.kind === "Endpoints" &&
      o.name === endpoints.metadata.name &&
      o.uid !== (endpoints.metadata.uid ?? ""),
  );
}

export function mirrorEndpoints(
  input: MirrorInput,
  options: { maxEndpointsPerSubset?: number } = {},
): MirrorResult {
  const existing = mirroredSlicesOf(input.namespace, input.name, input.slices);
  const { endpoints } = input;
  if (!endpoints || mirrorSkipReason(endpoints, input.service) !== undefined)
    return { create: [], update: [], delete: existing, findings: [] };
  const max = options.maxEndpointsPerSubset ?? DEFAULT_MAX_ENDPOINTS_PER_SUBSET;
  const subject = `Endpoints ${input.namespace}/${input.name}`;
  const groups = new Map<string, Group>();
  let invalid = 0;
  let skipped = 0;
  for (const subset of repackSubsets(endpoints.subsets)) {
    const ports = subset.ports.map((p) => {
      const port: NonNullable<EndpointSlice["ports"]>[number] = {
        name: p.name ?? "",
        port: p.port,
        protocol: p.protocol,
      };
      if (p.appProtocol !== undefined) port.appProtocol = p.appProtocol;
      return port;
    });
    const keyFor = (type: AddressType) => `${type}|${portMapKey(ports)}`;
    for (const type of ["IPv4", "IPv6"] as const)
      if (!groups.has(keyFor(type))) groups.set(keyFor(type), { type, ports, endpoints: new Map() });
    let added = 0;
    const total = subset.addresses.length + subset.notReadyAddresses.length;
    for (const [list, ready] of [
      [subset.addresses, true],
      [subset.notReadyAddresses, false],
    ] as const) {
      for (const address of list) {
        if (added >= max) break;
        const ip = parseIp(address.ip);
        if (!ip) {
          invalid++;
          continue;
        }
        const ep = addressToEndpoint(address, canonicalAddress(address.ip), ready);
        groups.get(keyFor(ip.family))!.endpoints.set(endpointKey(ep), ep);
        added++;
      }
    }
    skipped += total - added;
  }
  const findings: SliceFinding[] = [];
  if (invalid > 0)
    findings.push({
      code: "endpoints_invalid_ip_skipped",
      severity: "warning",
      subject,
      message: `${invalid} address${invalid === 1 ? " is" : "es are"} not a valid IP and ${invalid === 1 ? "is" : "are"} not mirrored to EndpointSlices (event InvalidIPAddress)`,
    });
  if (skipped > invalid)
    findings.push({
      code: "endpoints_too_many_addresses",
      severity: "warning",
      subject,
      message: `at most ${max} addresses per Endpoints subset are mirrored to EndpointSlices; ${skipped} addresses were skipped (event TooManyAddressesToMirror)`,
    });

  const byKey = new Map<string, EndpointSlice[]>();
  for (const s of existing) {
    const key = `${s.addressType}|${portMapKey(s.ports)}`;
    byKey.set(key, [...(byKey.get(key) ?? []), s]);
  }
  let create: EndpointSlice[] = [];
  const update: EndpointSlice[] = [];
  const del: EndpointSlice[] = [];
  for (const [key, group] of groups) {
    const current = byKey.get(key) ?? [];
    if (group.endpoints.size === 0) {
      del.push(...current);
      continue;
    }
    del.push(...current.slice(1));
    const first = current[0];
    if (first && unchanged(first, endpoints, group.endpoints)) continue;
    const slice = newMirroredSlice(endpoints, group, first?.metadata.name);
    (first ? update : create).push(slice);
  }
  for (const [key, slices] of byKey) if (!groups.has(key)) del.push(...slices);

  // Recycling per address type: a pending create takes the name of a pending delete.
  for (let i = 0; i < del.length; ) {
    const victim = del[i]!;
    const j = create.findLastIndex((c) => c.addressType === victim.addressType);
    if (j < 0) {
      i++;
      continue;
    }
    const [recycled] = create.splice(j, 1);
    update.push({ ...recycled!, metadata: { ...recycled!.metadata, name: victim.metadata.name ?? "" } });
    del.splice(i, 1);
  }
  if (endpoints.metadata.deletionTimestamp) create = [];
  findings.push(...sliceWriteFindings(subject, [...create, ...update]));
  return { create, update, delete: del, findings };
}
