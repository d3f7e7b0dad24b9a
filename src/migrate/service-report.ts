/**
 * The per-Service part of `passlb import`'s report: for every LoadBalancer Service, how passlb
 * would serve it (the flags it needs), the foreign keys honoured, ignored and unsupported, and
 * which addresses in its status it keeps, which it cannot and why — computed by the
 * controller's own address management (plan/ipam.ts) over the converted pools, so the report
 * says what `passlb controller` will do. Pure.
 */
import {
  type LoadBalancerIPPool,
  LoadBalancerIPPoolSchema,
  orderPools,
  poolOf,
} from "../k8s/load-balancer-ip-pool.ts";
import type { Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { parseIp } from "../net/ip.ts";
import { addressPools, type NamespaceLabels } from "../plan/address-pools.ts";
import { assignVips } from "../plan/ipam.ts";
import { FOREIGN_CLASSES, PASSLB_CLASS } from "../plan/ownership.ts";
import type { ImportedPool } from "./convert-pools.ts";

export interface ServiceReport {
  /** `namespace/name` */
  readonly service: string;
  readonly loadBalancerClass: string | null;
  /** how passlb would serve it, or why not */
  readonly servedBy: string;
  readonly honoured: readonly string[];
  readonly ignored: readonly string[];
  readonly unsupported: readonly string[];
  readonly kept: readonly string[];
  readonly notKept: readonly { readonly address: string; readonly why: string }[];
  /** addresses it would get that it does not show today */
  readonly assigned: readonly string[];
  readonly errors: readonly string[];
  /** warnings and information (deprecated keys, unsupported ones, behaviour that differs) */
  readonly notes: readonly string[];
}

/** Findings the report already states in its own words (kept / cannot keep), or that are
 * about endpoints rather than addresses. */
const NOT_NOTES: ReadonlySet<string> = new Set(["address_conflict", "status_address_not_in_pool"]);

export function serviceReports(
  services: readonly Service[],
  pools: readonly ImportedPool[],
  existing: readonly LoadBalancerIPPool[],
  labels: NamespaceLabels,
): { reports: ServiceReport[]; flags: string[] } {
  const classes = new Set<string>();
  let classless = false;
  const owned: Service[] = [];
  const others: Service[] = [];
  const servedBy = new Map<string, string>();
  for (const s of services) {
    const cls = s.spec.loadBalancerClass;
    const key = objectKey(s.metadata);
    if (cls === undefined) {
      classless = true;
      owned.push(s);
      servedBy.set(key, "passlb, with --default-class");
    } else if (cls === PASSLB_CLASS) {
      owned.push(s);
      servedBy.set(key, "passlb");
    } else if (FOREIGN_CLASSES.includes(cls)) {
      classes.add(cls);
      owned.push(s);
      servedBy.set(key, `passlb, with --accept-class ${cls}`);
    } else {
      others.push(s);
      servedBy.set(key, `not passlb: loadBalancerClass ${cls} is another implementation's (never touched)`);
    }
  }
  const flags = [
    ...(classless ? ["--default-class"] : []),
    ...[...classes].sort().map((c) => `--accept-class ${c}`),
  ];
  const planned = orderPools(
    [...pools.map((p) => LoadBalancerIPPoolSchema.parse(p)), ...existing].filter((p) => !p.spec.disabled),
  ).map(poolOf);
  const assignments = assignVips(owned, addressPools(planned), { others, namespaceLabels: labels });
  const reports: ServiceReport[] = [];
  for (const s of services) {
    const key = objectKey(s.metadata);
    const a = assignments.get(key);
    const shown = (s.status?.loadBalancer?.ingress ?? []).flatMap((i) => (i.ip ? [i.ip] : []));
    const keys = a?.request?.keys ?? [];
    const vips = a?.vips ?? [];
    const kept = vips.filter((v) => v.source === "status").map((v) => v.address);
    // another implementation's Service keeps its address: nothing passlb could keep
    const notKept = (a === undefined ? [] : shown)
      .filter((ip) => !kept.includes(ip))
      .map((address) => ({ address, why: whyNotKept(address, s, a?.issues ?? [], a === undefined) }));
    reports.push({
      service: key,
      loadBalancerClass: s.spec.loadBalancerClass ?? null,
      servedBy: servedBy.get(key) ?? "",
      honoured: keys.filter((k) => k.use === "honoured").map((k) => `${k.key}: ${k.how}`),
      ignored: keys.filter((k) => k.use === "ignored").map((k) => `${k.key}: ${k.how}`),
      unsupported: keys.filter((k) => k.use === "unsupported").map((k) => `${k.key}: ${k.how}`),
      kept,
      notKept,
      assigned: vips
        .filter((v) => v.source !== "status")
        .map((v) => `${v.address} (${v.source}, pool ${v.pool ?? "none"})`),
      errors: (a?.issues ?? []).filter((i) => i.severity === "error").map((i) => `${i.code}: ${i.message}`),
      notes: (a?.issues ?? [])
        .filter((i) => i.severity !== "error" && !NOT_NOTES.has(i.code))
        .map((i) => `${i.code}: ${i.message}`),
    });
  }
  return { reports: reports.sort((x, y) => (x.service < y.service ? -1 : 1)), flags };
}

function whyNotKept(
  address: string,
  s: Service,
  issues: readonly { code: string; message: string }[],
  notServed: boolean,
): string {
  if (notServed) return "passlb does not serve this Service (its class is another implementation's)";
  const ip = parseIp(address);
  const hit = issues.find(
    (i) =>
      (i.code === "address_conflict" || i.code === "status_address_not_in_pool") &&
      i.message.includes(address),
  );
  if (hit) return `${hit.code}: ${hit.message}`;
  const refused = issues.find((i) => i.code.startsWith("conflicting_"));
  if (refused) return `${refused.code}: ${refused.message}`;
  if (
    ip &&
    !(s.spec.ipFamilies ?? ["IPv4"]).includes(ip.family) &&
    s.spec.ipFamilyPolicy !== "PreferDualStack" &&
    s.spec.ipFamilyPolicy !== "RequireDualStack"
  )
    return `${ip.family} is not one of the Service's ipFamilies`;
  return "the Service's request names another address";
}
