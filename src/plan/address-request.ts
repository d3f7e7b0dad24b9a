/**
 * The one reader of what a Service asks of address management: addresses, pool and sharing
 * key — from passlb's annotations, those of MetalLB, Cilium LB-IPAM, kube-vip, PureLB and
 * OpenELB (foreign-keys.ts), and `spec.loadBalancerIP` — with where each came from, the
 * foreign keys read and how, and the findings. Pure; reads one Service, nothing else.
 *
 * Rules (docs/migrate.md "What passlb reads on a Service"):
 *   - within one tool the current key beats its older name (MetalLB reads `metallb.io/`
 *     before `metallb.universe.tf/`; Cilium `lbipam.cilium.io/` before `io.cilium/`);
 *   - the address sources are passlb's annotation, each tool's annotation and
 *     `spec.loadBalancerIP`; per family they must agree, or the request is refused
 *     (`conflicting_ip_request`, MetalLB's rule, controller/service.go). One exception: a
 *     Service with Cilium keys only gets Cilium's union (operator/pkg/lbipam/lbipam.go);
 *   - one address per family: a second one is an error, except that a Cilium list keeps
 *     its first address of each family with a warning;
 *   - pool names and sharing keys of different tools must agree, or the request is refused;
 *   - each sharing key carries the rules of its tool (sharing-rules.ts); OpenELB's pinned
 *     address and kube-vip's pinned address share with no key, so they imply one.
 * Not here: whether the address is free or the pool admits the Service (ipam.ts).
 */
import type { Service } from "../k8s/objects.ts";
import { formatIp, type IpAddress, type IpFamily, parseIp } from "../net/ip.ts";
import {
  type ForeignKey,
  foreignKey,
  mayBeKnownKey,
  ORIGIN_NAMES,
  type Origin,
  PASSLB_IPS,
  PASSLB_POOL,
  PASSLB_SHARING,
} from "./foreign-keys.ts";
import type { PlanIssueCode } from "./issue-codes.ts";
import type { ForeignKeyRead, Severity } from "./load-balancer-plan.ts";
import { SHARING_RULES, type SharingRules } from "./sharing-rules.ts";

/** A foreign key as read: the plan's `foreignKeys` entries (load-balancer-plan.ts). */
export type KeyRead = ForeignKeyRead;

export interface SharingRequest {
  /** as written, or implied (`203.0.113.5` for OpenELB and kube-vip pins) */
  readonly key: string;
  /** `origin:key`: keys share only with the same key of the same tool */
  readonly id: string;
  /** the annotation, or `implied by <annotation>` */
  readonly source: string;
  readonly rules: SharingRules;
  /** Cilium: the namespaces this Service lets share with it (`*`: all) */
  readonly allowNamespaces: readonly string[];
}

export interface RequestIssue {
  readonly code: PlanIssueCode;
  readonly severity: Severity;
  readonly message: string;
}

export interface AddressRequest {
  /** at most one per family, in the order written */
  readonly addresses: readonly IpAddress[];
  /** where the addresses came from (annotation names, `spec.loadBalancerIP`) */
  readonly addressSources: readonly string[];
  readonly pool: { readonly name: string; readonly source: string } | undefined;
  readonly sharing: SharingRequest | undefined;
  /** the foreign keys read (passlb's own are not listed), in annotation order */
  readonly keys: readonly KeyRead[];
  readonly issues: readonly RequestIssue[];
  /** conflicting requests: nothing new is assigned (an address in status may be kept) */
  readonly refused: boolean;
}

const NOTHING: AddressRequest = {
  addresses: [],
  addressSources: [],
  pool: undefined,
  sharing: undefined,
  keys: [],
  issues: [],
  refused: false,
};

interface Found {
  readonly key: string;
  readonly value: string;
  readonly meaning: ForeignKey;
}

const SPEC_IP = "spec.loadBalancerIP";

/** passlb's key for each role, named in the deprecation notice (compat.md §2). */
const PASSLB_NAME: Partial<Record<string, string>> = {
  ips: PASSLB_IPS,
  pool: PASSLB_POOL,
  sharing: PASSLB_SHARING,
};

export function addressRequest(svc: Service): AddressRequest {
  const ann = svc.metadata.annotations;
  const specIp = svc.spec.loadBalancerIP || undefined;
  if (!ann && specIp === undefined) return NOTHING;

  // 1. every key of a tool we know, in annotation order
  const found: Found[] = [];
  if (ann)
    for (const key in ann) {
      if (!mayBeKnownKey(key)) continue;
      const meaning = foreignKey(key);
      if (meaning) found.push({ key, value: ann[key] ?? "", meaning });
    }
  if (found.length === 0 && specIp === undefined) return NOTHING;

  const issues: RequestIssue[] = [];
  const reads = new Map<string, KeyRead>();
  const read = (f: Found, use: KeyRead["use"], how: string) => {
    if (f.meaning.origin !== "passlb")
      reads.set(f.key, { key: f.key, value: f.value, origin: f.meaning.origin, use, how });
  };
  const issue = (code: PlanIssueCode, severity: Severity, message: string) =>
    issues.push({ code, severity, message });

  // 2. per tool and role, the current key beats its older name
  const chosen = new Map<string, Found>();
  for (const f of found) {
    const { role, origin } = f.meaning;
    if (role === "output" || role === "no-effect" || role === "unsupported" || role === "marker") continue;
    const slot = `${origin}|${role}`;
    const had = chosen.get(slot);
    if (!had || (had.meaning.aliasOf !== undefined && f.meaning.aliasOf === undefined)) chosen.set(slot, f);
  }
  const isChosen = (f: Found) => chosen.get(`${f.meaning.origin}|${f.meaning.role}`) === f;
  for (const f of found) {
    const m = f.meaning;
    const tool = ORIGIN_NAMES[m.origin];
    if (m.role === "output") read(f, "ignored", `written by ${tool}, not a request`);
    else if (m.role === "no-effect") read(f, "ignored", `no effect on passlb: ${m.note ?? ""}`);
    else if (m.role === "unsupported") {
      read(f, "unsupported", `not supported (${m.note ?? tool}): ignored`);
      issue("unsupported_annotation", "warning", `${f.key} is not supported (${m.note ?? tool}); ignored`);
    } else if (m.role === "marker") read(f, "honoured", `${tool}'s opt-in: an ordinary LoadBalancer request`);
    else if (!isChosen(f)) {
      const winner = chosen.get(`${m.origin}|${m.role}`)!;
      read(f, "ignored", `${winner.key} takes precedence, as in ${tool}`);
    } else if (m.deprecated)
      issue(
        "deprecated_annotation",
        "info",
        `${f.key} is deprecated (MetalLB v0.14.9); passlb reads it as ${m.aliasOf ?? f.key}${PASSLB_NAME[m.role] ? ` (passlb's own key: ${PASSLB_NAME[m.role]})` : ""}`,
      );
  }

  // 3. addresses, pool, sharing; each marks the keys it honours
  const addresses = requestedAddresses(found.filter(isChosen), specIp, read, issue);
  const pool = requestedPool(found.filter(isChosen), read, issue);
  const sharing = requestedSharing(found.filter(isChosen), addresses, read, issue);
  for (const f of found)
    if (f.meaning.role === "protocol") {
      if (f.value === "layer2") read(f, "honoured", "layer2: passlb announces on the LB hosts' segment");
      else {
        read(f, "unsupported", `${f.value}: not supported, announced as passlb announces`);
        issue("unsupported_annotation", "warning", `${f.key}: ${f.value} is not supported; ignored`);
      }
    }
  if (
    sharing?.rules.origin === "purelb" &&
    svc.spec.externalTrafficPolicy === "Local" &&
    ann?.["purelb.io/allow-local"] === undefined
  )
    issue(
      "foreign_behaviour_differs",
      "warning",
      "PureLB rewrites a shared externalTrafficPolicy Local Service on a local pool to Cluster; passlb never rewrites the spec, so it stays Local",
    );

  const refused = addresses.refused || pool.refused || sharing === null;
  return {
    addresses: addresses.ips,
    addressSources: addresses.sources,
    pool: pool.value,
    sharing: sharing ?? undefined,
    keys: [...reads.values()],
    issues,
    refused,
  };
}

type Read = (f: Found, use: KeyRead["use"], how: string) => void;
type Issue = (code: PlanIssueCode, severity: Severity, message: string) => void;

interface Source {
  readonly name: string;
  readonly origin: Origin | "kubernetes";
  readonly ips: IpAddress[];
  readonly found: Found | undefined;
}

const splitList = (text: string) =>
  text
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean);

function requestedAddresses(
  chosen: readonly Found[],
  specIp: string | undefined,
  read: Read,
  issue: Issue,
): { ips: IpAddress[]; sources: string[]; refused: boolean } {
  const sources: Source[] = [];
  const parse = (name: string, origin: Source["origin"], texts: string[], f: Found | undefined) => {
    const ips: IpAddress[] = [];
    for (const t of texts) {
      const ip = parseIp(t);
      if (!ip) issue("requested_address_invalid", "error", `requested address "${t}" is not an IP address`);
      else if (ips.some((x) => x.family === ip.family && x.value === ip.value)) continue;
      else if (ips.some((x) => x.family === ip.family) && origin !== "cilium")
        issue("requested_address_invalid", "error", `more than one ${ip.family} address requested`);
      else ips.push(ip);
    }
    sources.push({ name, origin, ips, found: f });
  };
  for (const f of chosen) {
    if (f.meaning.role !== "ips") continue;
    const texts = splitList(f.value);
    if (f.meaning.origin === "kube-vip" && texts.some((t) => t === "0.0.0.0")) {
      read(f, "unsupported", "0.0.0.0 asks kube-vip for an address by DHCP: not supported");
      issue("unsupported_annotation", "warning", `${f.key}: 0.0.0.0 (DHCP) is not supported; ignored`);
      continue;
    }
    parse(f.key, f.meaning.origin, texts, f);
  }
  if (specIp !== undefined) parse(SPEC_IP, "kubernetes", [specIp], undefined);
  if (sources.length === 0) return { ips: [], sources: [], refused: false };

  const ciliumOnly =
    sources.some((s) => s.origin === "cilium") &&
    sources.every((s) => s.origin === "cilium" || s.origin === "kubernetes");
  // per family, the distinct addresses each source names (spec first, as Cilium unions)
  const ordered = ciliumOnly
    ? [
        ...sources.filter((s) => s.origin === "kubernetes"),
        ...sources.filter((s) => s.origin !== "kubernetes"),
      ]
    : sources;
  const byFamily = new Map<IpFamily, { ip: IpAddress; from: string }[]>();
  for (const s of ordered)
    for (const ip of s.ips) {
      const list = byFamily.get(ip.family) ?? [];
      if (!list.some((x) => x.ip.value === ip.value)) list.push({ ip, from: s.name });
      byFamily.set(ip.family, list);
    }
  let refused = false;
  const ips: IpAddress[] = [];
  for (const [family, list] of byFamily) {
    if (list.length === 1) {
      ips.push(list[0]!.ip);
      continue;
    }
    if (ciliumOnly) {
      issue(
        "unsupported_annotation",
        "warning",
        `Cilium's request names ${list.length} ${family} addresses (${list.map((x) => formatIp(x.ip)).join(", ")}); passlb gives one per family: ${formatIp(list[0]!.ip)}`,
      );
      ips.push(list[0]!.ip);
      continue;
    }
    refused = true;
    issue(
      "conflicting_ip_request",
      "error",
      `conflicting ${family} requests: ${list.map((x) => `${x.from} asks for ${formatIp(x.ip)}`).join(", ")}; refused until they agree (as MetalLB refuses an annotation together with a different spec.loadBalancerIP)`,
    );
  }
  const united = ciliumOnly && sources.some((s) => s.origin === "kubernetes");
  const used = sources.filter((s) => s.ips.length > 0);
  for (const s of used)
    if (s.found)
      read(
        s.found,
        refused ? "ignored" : "honoured",
        refused
          ? "conflicts with another request: refused"
          : `requested address${s.ips.length > 1 ? "es" : ""} ${s.ips.map(formatIp).join(", ")}${united ? " (Cilium: united with spec.loadBalancerIP)" : ""}`,
      );
  return { ips: refused ? [] : ips, sources: used.map((s) => s.name), refused };
}

function requestedPool(
  chosen: readonly Found[],
  read: Read,
  issue: Issue,
): { value: { name: string; source: string } | undefined; refused: boolean } {
  const named = chosen.filter((f) => f.meaning.role === "pool" && f.value.trim() !== "");
  if (named.length === 0) return { value: undefined, refused: false };
  const names = new Set(named.map((f) => f.value.trim()));
  if (names.size > 1) {
    for (const f of named) read(f, "ignored", "conflicts with another pool request: refused");
    issue(
      "conflicting_pool_request",
      "error",
      `conflicting pool requests: ${named.map((f) => `${f.key} names "${f.value.trim()}"`).join(", ")}; refused until they agree`,
    );
    return { value: undefined, refused: true };
  }
  for (const f of named)
    read(f, "honoured", `allocate from pool "${f.value.trim()}" (the imported pool's name)`);
  const first = named[0]!;
  return { value: { name: first.value.trim(), source: first.key }, refused: false };
}

/** The sharing request; null when keys of different tools conflict (refused). */
function requestedSharing(
  chosen: readonly Found[],
  addresses: { ips: IpAddress[]; sources: string[] },
  read: Read,
  issue: Issue,
): SharingRequest | undefined | null {
  const keys = chosen.filter((f) => f.meaning.role === "sharing" && f.value !== "");
  const ids = new Set(keys.map((f) => `${f.meaning.origin}:${f.value}`));
  if (ids.size > 1) {
    for (const f of keys) read(f, "ignored", "conflicts with another sharing key: refused");
    issue(
      "conflicting_sharing_key",
      "error",
      `conflicting sharing keys: ${keys.map((f) => `${f.key}="${f.value}"`).join(", ")}; refused until one is left`,
    );
    return null;
  }
  const cross = chosen.find((f) => f.meaning.role === "cross-namespace");
  const allowNamespaces = cross ? splitList(cross.value) : [];
  const key = keys[0];
  if (key) {
    const rules = SHARING_RULES[key.meaning.origin];
    read(key, "honoured", `sharing key "${key.value}" under ${rules.summary}`);
    if (cross)
      read(
        cross,
        key.meaning.origin === "cilium" ? "honoured" : "ignored",
        key.meaning.origin === "cilium"
          ? `shares across namespaces ${allowNamespaces.join(", ")} when the other Service allows it too`
          : "only applies to a Cilium sharing key",
      );
    return {
      key: key.value,
      id: `${key.meaning.origin}:${key.value}`,
      source: key.key,
      rules,
      allowNamespaces,
    };
  }
  if (cross) read(cross, "ignored", "no Cilium sharing key: nothing to share");
  // OpenELB shares an address pinned twice with no checks, kube-vip a pinned address on
  // disjoint ports: passlb implies a key and checks ports (compat.md §2)
  const pin = addresses.sources.find(
    (s) => s === "eip.openelb.kubesphere.io/v1alpha1" || s === "kube-vip.io/loadbalancerIPs",
  );
  if (pin && addresses.ips.length > 0) {
    const origin: Origin = pin.startsWith("eip.") ? "openelb" : "kube-vip";
    const implied = addresses.ips.map(formatIp).join(",");
    return {
      key: implied,
      id: `${origin}:${implied}`,
      source: `implied by ${pin}`,
      rules: SHARING_RULES[origin],
      allowNamespaces: [],
    };
  }
  return undefined;
}
