/**
 * VIP address management: which addresses each owned Service gets, per family. Pure and
 * deterministic: the same Services and pools always give the same answer. A short list of
 * named steps, as MetalLB's allocator (internal/allocator/allocator.go) reads:
 *
 *   1. readRequests — each Service's request (address-request.ts: passlb's, MetalLB's,
 *      Cilium's, kube-vip's, PureLB's and OpenELB's keys, spec.loadBalancerIP) and the
 *      pools it may use, in the order they are tried (address-pools.ts);
 *   2. adopt — addresses already in `status.loadBalancer.ingress` are kept when a pool the
 *      Service may use holds them, they agree with its request and nobody else holds them
 *      (Cilium `stripOrImportIngresses`; MetalLB reconciles Services holding addresses
 *      first). Every Service is adopted before anything is claimed, so no address is
 *      "stolen" and a switch to passlb changes no address;
 *   3. claimRequested — requested addresses, in a pool that admits the Service;
 *   4. allocate — per family: share an address of the Service's sharing key (or of its
 *      pool's implicit sharing), else the first free address of the pools in order.
 *   5. summarise — the addresses per wanted family and the issues (dual stack).
 * Each pass goes over the Services by creation time, then name. Sharing follows the rules
 * of the tool the key came from (sharing-rules.ts). An address any Service still shows in
 * its status is never handed to another (address-ledger.ts). Failures are issues on the
 * Service that failed.
 */
import type { Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { formatIp, type IpAddress, type IpFamily, parseIp } from "../net/ip.ts";
import {
  blocker,
  createLedger,
  firstFree,
  type Ledger,
  noteShown,
  sharedCandidate,
  take,
} from "./address-ledger.ts";
import {
  type AddressPool,
  candidatePools,
  type NamespaceLabels,
  poolAdmits,
  poolContains,
} from "./address-pools.ts";
import { type AddressRequest, addressRequest } from "./address-request.ts";
import { PASSLB_IPS, PASSLB_POOL, PASSLB_SHARING } from "./foreign-keys.ts";
import type { PlanIssueCode } from "./issue-codes.ts";
import type { PlanIssue, Vip } from "./load-balancer-plan.ts";
import type { Sharer } from "./sharing-rules.ts";

export const REQUESTED_IPS_ANNOTATION = PASSLB_IPS;
export const SHARED_IP_ANNOTATION = PASSLB_SHARING;
export const POOL_ANNOTATION = PASSLB_POOL;

export interface VipAssignment {
  readonly families: readonly IpFamily[];
  readonly vips: readonly Vip[];
  readonly issues: readonly PlanIssue[];
  /** what the Service asked for, and which foreign keys were read (statusVips: none) */
  readonly request?: AddressRequest;
}

export interface AssignOptions {
  /** Services passlb does not plan: addresses in their status are never handed out */
  readonly others?: readonly Service[];
  /** namespace labels for pool namespace selectors (default: the name label only) */
  readonly namespaceLabels?: NamespaceLabels;
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

/** One Service in the pass: its request, its pools, and what it has got so far. */
interface Claim {
  readonly svc: Service;
  readonly name: string;
  readonly sharer: Sharer;
  readonly request: AddressRequest;
  readonly wanted: ReturnType<typeof wantedFamilies>;
  /** the pools it may use, in order; `explicit` when a pool was named */
  readonly pools: readonly AddressPool[];
  readonly explicit: boolean;
  readonly vips: Map<IpFamily, Vip>;
  readonly issues: PlanIssue[];
  /** why allocation found nothing for a family; made on first use (most have none) */
  failures: Map<IpFamily, { code: PlanIssueCode; message: string }> | undefined;
}

export function assignVips(
  services: readonly Service[],
  pools: readonly AddressPool[],
  options: AssignOptions = {},
): Map<string, VipAssignment> {
  const claims = readRequests(services, pools, options.namespaceLabels);
  const ledger = createLedger();
  adopt(claims, ledger, options.others ?? []);
  claimRequested(claims, pools, ledger);
  allocate(claims, ledger);
  return summarise(claims);
}

const note = (c: Claim, code: PlanIssueCode, severity: PlanIssue["severity"], message: string) =>
  c.issues.push({ code, severity, subject: `Service ${c.name}`, message });

/** Step 1: each Service's request and pools, ordered by creation time, then name. */
function readRequests(
  services: readonly Service[],
  pools: readonly AddressPool[],
  namespaceLabels: NamespaceLabels | undefined,
): Claim[] {
  const claims = services.map((svc): Claim => {
    const name = objectKey(svc.metadata);
    const request = addressRequest(svc);
    const c: Claim = {
      svc,
      name,
      request,
      sharer: sharerOf(svc, name, request),
      wanted: wantedFamilies(svc),
      pools: [],
      explicit: false,
      vips: new Map(),
      issues: [],
      failures: undefined,
    };
    for (const i of request.issues) note(c, i.code, i.severity, i.message);
    return { ...c, ...usablePools(c, pools, namespaceLabels) };
  });
  return claims.sort(
    (a, b) =>
      (a.svc.metadata.creationTimestamp ?? "").localeCompare(b.svc.metadata.creationTimestamp ?? "") ||
      a.name.localeCompare(b.name),
  );
}

function sharerOf(svc: Service, name: string, request: AddressRequest): Sharer {
  const ports = new Set<string>();
  const portNumbers = new Set<number>();
  for (const p of svc.spec.ports) {
    ports.add(`${p.protocol}/${p.port}`);
    portNumbers.add(p.port);
  }
  const selector = svc.spec.selector
    ? Object.entries(svc.spec.selector)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, v]) => `${k}=${v}`)
        .join(",")
    : "";
  return {
    name,
    namespace: svc.metadata.namespace ?? "default",
    sharing: request.sharing,
    implicit: false,
    ports,
    portNumbers,
    etp: svc.spec.externalTrafficPolicy === "Local" ? "Local" : "Cluster",
    selector,
  };
}

function usablePools(
  c: Claim,
  pools: readonly AddressPool[],
  namespaceLabels: NamespaceLabels | undefined,
): { pools: AddressPool[]; explicit: boolean } {
  const wanted = c.request.pool;
  if (!wanted) return { pools: candidatePools(pools, c.svc, namespaceLabels), explicit: false };
  const p = pools.find((x) => x.name === wanted.name);
  if (!p) {
    note(
      c,
      "unknown_pool",
      "error",
      `annotation ${wanted.source} names pool "${wanted.name}", which ${wanted.source === PASSLB_POOL ? "PasslbConfig does not define" : "no LoadBalancerIPPool is named (passlb import keeps pool names)"}`,
    );
    return { pools: [], explicit: true };
  }
  if (!poolAdmits(p, c.svc, namespaceLabels)) {
    note(
      c,
      "pool_not_allowed",
      "error",
      `pool "${wanted.name}" does not admit this Service (its namespaces or serviceSelector exclude it)`,
    );
    return { pools: [], explicit: true };
  }
  return { pools: [p], explicit: true };
}

/** Step 2: keep what status already says; note every status address in the ledger. */
function adopt(claims: readonly Claim[], ledger: Ledger, others: readonly Service[]): void {
  for (const svc of others)
    for (const ing of svc.status?.loadBalancer?.ingress ?? []) {
      const ip = ing.ip ? parseIp(ing.ip) : undefined;
      if (ip) noteShown(ledger, ip, objectKey(svc.metadata));
    }
  // each status address parsed once: the ledger first learns every one, then each is adopted
  const shown = claims.map((c) => {
    const ips: IpAddress[] = [];
    for (const ing of c.svc.status?.loadBalancer?.ingress ?? []) {
      const ip = ing.ip ? parseIp(ing.ip) : undefined;
      if (ip) {
        noteShown(ledger, ip, c.name);
        ips.push(ip);
      }
    }
    return ips;
  });
  for (let i = 0; i < claims.length; i++) {
    const c = claims[i]!;
    for (const ip of shown[i]!) {
      if (!c.wanted.families.includes(ip.family) || c.vips.has(ip.family)) continue;
      const requested = c.request.addresses.find((r) => r.family === ip.family);
      if (requested && requested.value !== ip.value) continue; // the request changed: honour it below
      const pool = c.pools.find((p) => poolContains(p, ip));
      if (!pool) {
        note(
          c,
          "status_address_not_in_pool",
          "warning",
          `current address ${formatIp(ip)} is in no pool this Service may use; a new one is assigned`,
        );
        continue;
      }
      const why = blocker(ledger, c.sharer, ip, pool);
      if (why) {
        note(
          c,
          "address_conflict",
          "warning",
          `current address ${formatIp(ip)} cannot be kept: ${why.message}`,
        );
        continue;
      }
      c.vips.set(ip.family, take(ledger, c.sharer, ip, pool, "status"));
    }
  }
}

/** Step 3: requested addresses. */
function claimRequested(claims: readonly Claim[], pools: readonly AddressPool[], ledger: Ledger): void {
  for (const c of claims) {
    if (c.request.refused) continue;
    for (const ip of c.request.addresses) {
      const family = ip.family;
      if (c.vips.has(family)) continue;
      if (!c.wanted.families.includes(family)) {
        note(
          c,
          "requested_address_wrong_family",
          "error",
          `requested ${family} address ${formatIp(ip)}, but the Service's ipFamilies are ${c.wanted.families.join(", ")}`,
        );
        continue;
      }
      const pool = c.explicit
        ? c.pools.find((p) => poolContains(p, ip))
        : pools.find((p) => poolContains(p, ip));
      if (!pool) {
        const named = c.request.pool;
        note(
          c,
          "requested_address_not_in_pool",
          "error",
          c.explicit && named
            ? `requested address ${formatIp(ip)} is not in pool "${named.name}" (${named.source})`
            : `requested address ${formatIp(ip)} is in no pool`,
        );
        continue;
      }
      if (!c.explicit && !c.pools.includes(pool)) {
        note(
          c,
          "pool_not_allowed",
          "error",
          `requested address ${formatIp(ip)} is in pool "${pool.name}", which does not admit this Service`,
        );
        continue;
      }
      const why = blocker(ledger, c.sharer, ip, pool);
      if (why) {
        note(c, why.code, "error", why.message);
        continue;
      }
      c.vips.set(family, take(ledger, c.sharer, ip, pool, "requested"));
    }
  }
}

function fail(c: Claim, family: IpFamily, why: { code: PlanIssueCode; message: string }): void {
  c.failures ??= new Map();
  c.failures.set(family, why);
}

/** Step 4: per family still missing, share an address of the key, else the first free one. */
function allocate(claims: readonly Claim[], ledger: Ledger): void {
  for (const c of claims) {
    if (c.request.refused) continue;
    if (c.explicit && c.pools.length === 0) continue; // the pool annotation's problem is already reported
    const candidates = c.explicit ? c.pools : c.pools.filter((p) => p.autoAssign);
    for (const family of c.wanted.families) {
      if (c.vips.has(family) || c.request.addresses.some((r) => r.family === family)) continue;
      const inFamily = candidates.filter((p) => p.ranges.some((r) => r.family === family));
      if (inFamily.length === 0) {
        fail(c, family, {
          code: "no_pool_for_service",
          message: `no ${c.explicit ? "" : "auto-assign "}pool with ${family} addresses admits this Service`,
        });
        continue;
      }
      const shared = sharedCandidate(ledger, c.sharer, family, inFamily, poolContains);
      if (shared) {
        c.vips.set(family, take(ledger, c.sharer, shared.ip, shared.pool, "shared"));
        continue;
      }
      const fresh = firstFree(ledger, c.sharer, family, inFamily);
      if (fresh) c.vips.set(family, take(ledger, c.sharer, fresh.ip, fresh.pool, "allocated"));
      else
        fail(c, family, {
          code: "pool_exhausted",
          message: `every ${family} address in ${inFamily.map((p) => `"${p.name}"`).join(", ")} is in use`,
        });
    }
  }
}

/** Step 5: the addresses per wanted family, and the dual-stack verdict. */
function summarise(claims: readonly Claim[]): Map<string, VipAssignment> {
  const out = new Map<string, VipAssignment>();
  for (const c of claims) {
    const vips = c.wanted.families.flatMap((f) => {
      const v = c.vips.get(f);
      return v ? [v] : [];
    });
    const missing = c.wanted.families.filter((f) => !c.vips.has(f));
    const failed = missing.flatMap((f) => {
      const why = c.failures?.get(f);
      return why ? [{ family: f, ...why }] : [];
    });
    if (vips.length === 0) for (const f of failed) note(c, f.code, "error", f.message);
    else if (missing.some((f) => c.wanted.required.includes(f)))
      note(
        c,
        "dual_stack_unavailable",
        "error",
        `RequireDualStack, but no ${missing.join(" or ")} address could be assigned` +
          (failed.length > 0 ? `: ${failed.map((f) => f.message).join("; ")}` : ""),
      );
    else
      for (const f of failed)
        note(
          c,
          "dual_stack_partial",
          "info",
          `served on ${vips.map((v) => v.family).join(", ")} only (PreferDualStack): ${f.message}`,
        );
    out.set(c.name, {
      families: c.wanted.families,
      vips,
      issues: c.issues,
      request: c.request,
    });
  }
  return out;
}
