/**
 * VIP address management: which addresses each owned Service gets, per family. Pure and
 * deterministic: the same Services and pools always give the same answer.
 *
 * Order of claims (each pass over the Services ordered by creation time, then name):
 *   1. addresses already in `status.loadBalancer.ingress` (a Service keeps its VIP), when
 *      a pool that admits the Service holds them and they agree with any request;
 *   2. requested addresses: `passlb.io/load-balancer-ips` or `spec.loadBalancerIP`;
 *   3. auto-assignment from the pools the Service may use, in pool order, first free.
 * Sharing (MetalLB's allow-shared-ip): Services with the same `passlb.io/allow-shared-ip`
 * key share an address when no protocol/port pair clashes. Unlike MetalLB, eTP Local
 * Services need not select the same pods: the data plane dispatches per VIP:port.
 * Failures are issues on the Service that failed; no Service ever gets an address that
 * another, clashing Service holds.
 */
import type { Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { formatIp, type IpAddress, type IpFamily, parseIp } from "../net/ip.ts";
import { type AddressPool, poolAdmits, poolContains } from "./address-pools.ts";
import type { PlanIssueCode } from "./issue-codes.ts";
import type { PlanIssue, Vip } from "./load-balancer-plan.ts";

export const REQUESTED_IPS_ANNOTATION = "passlb.io/load-balancer-ips";
export const SHARED_IP_ANNOTATION = "passlb.io/allow-shared-ip";
export const POOL_ANNOTATION = "passlb.io/address-pool";

export interface VipAssignment {
  readonly families: readonly IpFamily[];
  readonly vips: readonly Vip[];
  readonly issues: readonly PlanIssue[];
}

/** The families a Service wants, in order, and which of them it cannot do without
 * (Kubernetes ipFamilies / ipFamilyPolicy; an unset policy is SingleStack). */
export function wantedFamilies(svc: Service): { families: IpFamily[]; required: IpFamily[] } {
  const given = svc.spec.ipFamilies ?? [];
  const policy = svc.spec.ipFamilyPolicy ?? "SingleStack";
  if (policy === "SingleStack") {
    const f = given[0] ?? "IPv4";
    return { families: [f], required: [f] };
  }
  const first = given[0] ?? "IPv4";
  const families: IpFamily[] = [first, first === "IPv4" ? "IPv6" : "IPv4"];
  return { families, required: policy === "RequireDualStack" ? families : [] };
}

/** The addresses a Service asks for, as written: `passlb.io/load-balancer-ips` (comma
 * separated, any families) or else the deprecated `spec.loadBalancerIP`. */
export function requestedAddressTexts(svc: Service): string[] {
  const annotated = svc.metadata.annotations?.[REQUESTED_IPS_ANNOTATION];
  if (annotated !== undefined)
    return annotated
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean);
  return svc.spec.loadBalancerIP ? [svc.spec.loadBalancerIP] : [];
}

interface Usage {
  sharingKey: string | undefined;
  services: string[];
  ports: Set<string>;
  pool: string;
}

interface ServiceState {
  readonly vips: Map<IpFamily, Vip>;
  readonly issues: PlanIssue[];
  readonly wanted: ReturnType<typeof wantedFamilies>;
  /** why auto-assignment found nothing for a family; made on the first failure (most
   * Services have none) */
  failures: Map<IpFamily, { code: PlanIssueCode; message: string }> | undefined;
}

/** Records why auto-assignment found nothing for a family (the map is made on first use). */
function fail(st: ServiceState, family: IpFamily, why: { code: PlanIssueCode; message: string }): void {
  st.failures ??= new Map();
  st.failures.set(family, why);
}

// hex, not decimal: a 128-bit bigint prints in linear time in a power-of-two radix
const ipKey = (ip: IpAddress) => `${ip.family}|${ip.value.toString(16)}`;

export function assignVips(
  services: readonly Service[],
  pools: readonly AddressPool[],
): Map<string, VipAssignment> {
  // each Service's `namespace/name` and ports, worked out once rather than on every use
  const names = new Map<Service, string>();
  for (const svc of services) names.set(svc, objectKey(svc.metadata));
  const nameOf = (svc: Service) => names.get(svc) ?? objectKey(svc.metadata);
  const ports = new Map<Service, ReadonlySet<string>>();
  const portsOf = (svc: Service): ReadonlySet<string> => {
    let set = ports.get(svc);
    if (!set) {
      set = new Set(svc.spec.ports.map((p) => `${p.protocol}/${p.port}`));
      ports.set(svc, set);
    }
    return set;
  };
  const ordered = [...services].sort(
    (a, b) =>
      (a.metadata.creationTimestamp ?? "").localeCompare(b.metadata.creationTimestamp ?? "") ||
      nameOf(a).localeCompare(nameOf(b)),
  );
  const used = new Map<string, Usage>();
  const bySharingKey = new Map<string, IpAddress[]>();
  const cursors = new Map<string, { range: number; offset: bigint }>();
  const state = new Map<string, ServiceState>();
  for (const svc of ordered)
    state.set(nameOf(svc), {
      vips: new Map(),
      issues: [],
      wanted: wantedFamilies(svc),
      failures: undefined,
    });

  const sharingKeyOf = (svc: Service) => svc.metadata.annotations?.[SHARED_IP_ANNOTATION] || undefined;

  /** why the Service may not take the address, or undefined when it may */
  const blocker = (svc: Service, ip: IpAddress): string | undefined => {
    const u = used.get(ipKey(ip));
    if (!u) return undefined;
    const key = sharingKeyOf(svc);
    const holder = u.services.join(", ");
    if (key === undefined || u.sharingKey !== key)
      return (
        `${formatIp(ip)} is already used by Service ${holder}` +
        (key === undefined ? "" : ` (sharing key "${u.sharingKey ?? ""}", not "${key}")`)
      );
    const clash = [...portsOf(svc)].filter((p) => u.ports.has(p));
    if (clash.length > 0)
      return `${formatIp(ip)} is shared with Service ${holder}, and both use ${clash.join(", ")}`;
    return undefined;
  };
  const take = (svc: Service, ip: IpAddress, pool: AddressPool, source: Vip["source"]) => {
    const k = ipKey(ip);
    const u = used.get(k);
    const name = nameOf(svc);
    if (u) {
      u.services.push(name);
      for (const p of portsOf(svc)) u.ports.add(p);
    } else {
      const sharingKey = sharingKeyOf(svc);
      used.set(k, { sharingKey, services: [name], ports: new Set(portsOf(svc)), pool: pool.name });
      if (sharingKey !== undefined) {
        const list = bySharingKey.get(sharingKey);
        if (list) list.push(ip);
        else bySharingKey.set(sharingKey, [ip]);
      }
    }
    const shared = u !== undefined;
    state.get(name)?.vips.set(ip.family, {
      family: ip.family,
      address: formatIp(ip),
      pool: pool.name,
      source: shared && source === "allocated" ? "shared" : source,
    });
  };
  const issue = (svc: Service, code: PlanIssueCode, severity: PlanIssue["severity"], message: string) =>
    state.get(nameOf(svc))?.issues.push({ code, severity, subject: `Service ${nameOf(svc)}`, message });

  const usablePools = (svc: Service): { pools: AddressPool[]; explicit: boolean } => {
    const wanted = svc.metadata.annotations?.[POOL_ANNOTATION];
    if (wanted !== undefined) {
      const p = pools.find((x) => x.name === wanted);
      if (!p) {
        issue(
          svc,
          "unknown_pool",
          "error",
          `annotation ${POOL_ANNOTATION} names pool "${wanted}", which PasslbConfig does not define`,
        );
        return { pools: [], explicit: true };
      }
      if (!poolAdmits(p, svc)) {
        issue(
          svc,
          "pool_not_allowed",
          "error",
          `pool "${wanted}" does not admit this Service (its namespaces or serviceSelector exclude it)`,
        );
        return { pools: [], explicit: true };
      }
      return { pools: [p], explicit: true };
    }
    return { pools: pools.filter((p) => poolAdmits(p, svc)), explicit: false };
  };

  // Requests: the annotation (any families) beats the deprecated spec.loadBalancerIP.
  const requests = new Map<string, Map<IpFamily, IpAddress>>();
  for (const svc of ordered) {
    const name = nameOf(svc);
    const annotated = svc.metadata.annotations?.[REQUESTED_IPS_ANNOTATION];
    const texts = requestedAddressTexts(svc);
    if (annotated !== undefined && svc.spec.loadBalancerIP)
      issue(
        svc,
        "requested_address_conflict",
        "warning",
        `both ${REQUESTED_IPS_ANNOTATION} and spec.loadBalancerIP are set; the annotation wins`,
      );
    const byFamily = new Map<IpFamily, IpAddress>();
    for (const t of texts) {
      const ip = parseIp(t);
      if (!ip)
        issue(svc, "requested_address_invalid", "error", `requested address "${t}" is not an IP address`);
      else if (byFamily.has(ip.family))
        issue(svc, "requested_address_invalid", "error", `more than one ${ip.family} address requested`);
      else byFamily.set(ip.family, ip);
    }
    // only Services that ask for something have an entry (most ask for nothing)
    if (byFamily.size > 0) requests.set(name, byFamily);
    else requests.delete(name);
  }

  const poolChoice = new Map(ordered.map((svc) => [nameOf(svc), usablePools(svc)]));

  // 1. Keep what status already says.
  for (const svc of ordered) {
    const name = nameOf(svc);
    const st = state.get(name)!;
    const allowed = poolChoice.get(name)?.pools ?? [];
    for (const ing of svc.status?.loadBalancer?.ingress ?? []) {
      const ip = ing.ip ? parseIp(ing.ip) : undefined;
      if (!ip || !st.wanted.families.includes(ip.family) || st.vips.has(ip.family)) continue;
      const requested = requests.get(name)?.get(ip.family);
      if (requested && requested.value !== ip.value) continue; // the request changed: honour it below
      const pool = allowed.find((p) => poolContains(p, ip));
      if (!pool) {
        issue(
          svc,
          "status_address_not_in_pool",
          "warning",
          `current address ${formatIp(ip)} is in no pool this Service may use; a new one is assigned`,
        );
        continue;
      }
      const why = blocker(svc, ip);
      if (why) {
        issue(svc, "address_conflict", "warning", `current address ${formatIp(ip)} cannot be kept: ${why}`);
        continue;
      }
      take(svc, ip, pool, "status");
    }
  }
  // 2. Requested addresses.
  for (const svc of ordered) {
    const name = nameOf(svc);
    const st = state.get(name)!;
    for (const [family, ip] of requests.get(name) ?? []) {
      if (st.vips.has(family)) continue;
      if (!st.wanted.families.includes(family)) {
        issue(
          svc,
          "requested_address_wrong_family",
          "error",
          `requested ${family} address ${formatIp(ip)}, but the Service's ipFamilies are ${st.wanted.families.join(", ")}`,
        );
        continue;
      }
      const pool = pools.find((p) => poolContains(p, ip));
      if (!pool) {
        issue(
          svc,
          "requested_address_not_in_pool",
          "error",
          `requested address ${formatIp(ip)} is in no pool`,
        );
        continue;
      }
      if (!poolAdmits(pool, svc)) {
        issue(
          svc,
          "pool_not_allowed",
          "error",
          `requested address ${formatIp(ip)} is in pool "${pool.name}", which does not admit this Service`,
        );
        continue;
      }
      const why = blocker(svc, ip);
      if (why) {
        issue(
          svc,
          sharingKeyOf(svc) !== undefined && why.includes("both use")
            ? "port_clash_on_shared_ip"
            : "address_in_use",
          "error",
          why,
        );
        continue;
      }
      take(svc, ip, pool, "requested");
    }
  }
  // 3. Auto-assignment.
  for (const svc of ordered) {
    const name = nameOf(svc);
    const st = state.get(name)!;
    const { pools: allowed, explicit } = poolChoice.get(name) ?? { pools: [], explicit: false };
    if (explicit && allowed.length === 0) continue; // the pool annotation's problem is already reported
    const candidates = explicit ? allowed : allowed.filter((p) => p.autoAssign);
    for (const family of st.wanted.families) {
      if (st.vips.has(family) || requests.get(name)?.has(family)) continue;
      const inFamily = candidates.filter((p) => p.ranges.some((r) => r.family === family));
      if (inFamily.length === 0) {
        fail(st, family, {
          code: "no_pool_for_service",
          message: `no ${explicit ? "" : "auto-assign "}pool with ${family} addresses admits this Service`,
        });
        continue;
      }
      const shared = sharedCandidate(svc, family, inFamily);
      if (shared) {
        take(svc, shared.ip, shared.pool, "shared");
        continue;
      }
      const fresh = firstFree(svc, family, inFamily);
      if (fresh) take(svc, fresh.ip, fresh.pool, "allocated");
      else
        fail(st, family, {
          code: "pool_exhausted",
          message: `every ${family} address in ${inFamily.map((p) => `"${p.name}"`).join(", ")} is in use`,
        });
    }
  }

  function sharedCandidate(
    svc: Service,
    family: IpFamily,
    allowed: AddressPool[],
  ): { ip: IpAddress; pool: AddressPool } | undefined {
    const key = sharingKeyOf(svc);
    if (key === undefined) return undefined;
    for (const ip of bySharingKey.get(key) ?? []) {
      if (ip.family !== family || blocker(svc, ip)) continue;
      const pool = allowed.find((p) => poolContains(p, ip));
      if (pool) return { ip, pool };
    }
    return undefined;
  }

  function firstFree(
    svc: Service,
    family: IpFamily,
    allowed: AddressPool[],
  ): { ip: IpAddress; pool: AddressPool } | undefined {
    for (const pool of allowed) {
      const cursorKey = `${pool.name}|${family}`;
      const cursor = cursors.get(cursorKey) ?? { range: 0, offset: 0n };
      const ranges = pool.ranges.filter((r) => r.family === family);
      for (let r = cursor.range; r < ranges.length; r++) {
        const range = ranges[r]!;
        for (let v = range.first + (r === cursor.range ? cursor.offset : 0n); v <= range.last; v++) {
          const ip = { family, value: v };
          if (used.has(ipKey(ip))) continue;
          cursors.set(cursorKey, { range: r, offset: v - range.first });
          if (!blocker(svc, ip)) return { ip, pool };
        }
      }
      cursors.set(cursorKey, { range: ranges.length, offset: 0n });
    }
    return undefined;
  }

  const out = new Map<string, VipAssignment>();
  for (const [name, st] of state) {
    const vips = st.wanted.families.flatMap((f) => {
      const v = st.vips.get(f);
      return v ? [v] : [];
    });
    const subject = `Service ${name}`;
    const missing = st.wanted.families.filter((f) => !st.vips.has(f));
    const failed = missing.flatMap((f) => {
      const why = st.failures?.get(f);
      return why ? [{ family: f, ...why }] : [];
    });
    if (vips.length === 0)
      for (const f of failed)
        st.issues.push({ code: f.code, severity: "error", subject, message: f.message });
    else if (missing.some((f) => st.wanted.required.includes(f)))
      st.issues.push({
        code: "dual_stack_unavailable",
        severity: "error",
        subject,
        message:
          `RequireDualStack, but no ${missing.join(" or ")} address could be assigned` +
          (failed.length > 0 ? `: ${failed.map((f) => f.message).join("; ")}` : ""),
      });
    else
      for (const f of failed)
        st.issues.push({
          code: "dual_stack_partial",
          severity: "info",
          subject,
          message: `served on ${vips.map((v) => v.family).join(", ")} only (PreferDualStack): ${f.message}`,
        });
    out.set(name, { families: st.wanted.families, vips, issues: st.issues });
  }
  return out;
}
