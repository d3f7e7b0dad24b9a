/**
 * Test-only: what kube-apiserver validates on the objects passlb writes, with its messages
 * (field errors: fake-api-field-errors.ts). Runs after decoding (fake-api-wire.ts) and after
 * the strategy's PrepareForCreate/Update, before storage; any error is one 422 Invalid.
 *
 * - Every object (apiserver pkg/registry/rest/create.go BeforeCreate + apimachinery
 *   pkg/api/validation/objectmeta.go ValidateObjectMetaAccessor / …Update): name or
 *   generateName required, name a path segment, namespace a DNS-1123 label, labels
 *   (qualified keys, label values), finalizers qualified names, and on update
 *   ValidateNoNewFinalizers once deletionTimestamp is set.
 * - Service (pkg/apis/core/validation/validation.go ValidateService: name DNS-1035;
 *   ValidateLoadBalancerStatus: ingress ip a valid canonical IP, ipMode only with ip and
 *   VIP|Proxy, hostname a DNS subdomain and not an IP; status.conditions by apimachinery
 *   pkg/apis/meta/v1/validation ValidateCondition).
 * - EndpointSlice (pkg/apis/discovery/validation/validation.go): name DNS subdomain,
 *   addressType, ≤ 1000 endpoints, 1–100 addresses each matching addressType and not special
 *   (ValidateNonSpecialIP: unspecified, loopback, link-local, link-local multicast), ≤ 100
 *   ports with DNS-1123 label names, unique, protocol TCP|UDP|SCTP, appProtocol qualified.
 * - Event, core/v1 (pkg/apis/core/validation/events.go legacyValidateEvent, the v1 path):
 *   involvedObject.namespace equals the Event's (or, with none, the Event is in "" or
 *   "default"), namespace a DNS subdomain; with eventTime set also reportingController,
 *   reportingInstance ≤ 128, action ≤ 128, reason ≤ 128, message ≤ 1024.
 * - Lease (pkg/apis/coordination/validation/validation.go ValidateLeaseSpec): name DNS
 *   subdomain, leaseDurationSeconds > 0, leaseTransitions ≥ 0.
 *
 * Deliberately not: the Service spec rules (ports, clusterIPs, allocation — passlb never
 * writes a spec, and the fixtures come in through put()), annotation size limits, Pod, Node
 * and Namespace validation (passlb only reads them).
 */
import {
  asPrefix,
  type FieldError,
  fe,
  invalid,
  isDns1035Label,
  isDns1123Label,
  isDns1123Subdomain,
  isLabelValue,
  isQualifiedName,
  type NameCheck,
  pathSegmentErrors,
  regexError,
} from "./fake-api-field-errors.ts";
import { ipErrors, nonSpecialIpErrors, parseIp } from "./fake-api-ip.ts";
import type { FakeResource } from "./fake-api-resources.ts";
import { resourceKey } from "./fake-api-resources.ts";
import type { Obj } from "./fake-api-store.ts";

// biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON, read defensively
type Any = any;

const NAME_RULES: Record<string, NameCheck> = {
  services: isDns1035Label,
  namespaces: isDns1123Label,
};

function validateMeta(res: FakeResource, obj: Obj, old: Obj | undefined): FieldError[] {
  const m = obj.metadata as Any;
  const errs: FieldError[] = [];
  // core/v1 Events get no name rule of their own (events.go), only BeforeCreate's
  // path-segment one (for a generateName prefix: no '/' or '%')
  const coreEvent = res.resource === "events" && res.group === "";
  const nameRule = coreEvent ? pathSegmentErrors : (NAME_RULES[res.resource] ?? isDns1123Subdomain);
  if (!old && m.generateName) {
    const prefixRule = coreEvent
      ? (v: string) => pathSegmentErrors(v).filter((e) => !e.startsWith("may not be '"))
      : asPrefix(nameRule);
    for (const msg of prefixRule(String(m.generateName)))
      errs.push(fe("Invalid value", "metadata.generateName", m.generateName, msg));
  }
  if (!m.name)
    errs.push(fe("Required value", "metadata.name", undefined, "name or generateName is required"));
  else {
    const msgs = nameRule(String(m.name));
    if (nameRule !== pathSegmentErrors) msgs.push(...pathSegmentErrors(String(m.name)));
    for (const msg of msgs) errs.push(fe("Invalid value", "metadata.name", m.name, msg));
  }
  if (res.namespaced && m.namespace) {
    for (const msg of isDns1123Label(String(m.namespace)))
      errs.push(fe("Invalid value", "metadata.namespace", m.namespace, msg));
  }
  for (const [k, v] of Object.entries((m.labels ?? {}) as Record<string, unknown>)) {
    for (const msg of isQualifiedName(k)) errs.push(fe("Invalid value", "metadata.labels", k, msg));
    for (const msg of isLabelValue(String(v))) errs.push(fe("Invalid value", "metadata.labels", v, msg));
  }
  for (const [i, f] of ((m.finalizers ?? []) as string[]).entries()) {
    for (const msg of isQualifiedName(f)) errs.push(fe("Invalid value", `metadata.finalizers[${i}]`, f, msg));
  }
  if (old?.metadata.deletionTimestamp) {
    const before = new Set(old.metadata.finalizers ?? []);
    const extra = ((m.finalizers ?? []) as string[]).filter((f) => !before.has(f)).sort();
    if (extra.length > 0)
      errs.push(
        fe(
          "Forbidden",
          "metadata.finalizers",
          undefined,
          `no new finalizers can be added if the object is being deleted, found new finalizers []string{${extra.map((x) => JSON.stringify(x)).join(", ")}}`,
        ),
      );
  }
  return errs;
}

const CONDITION_REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;

function conditionErrors(path: string, conditions: Any[]): FieldError[] {
  const errs: FieldError[] = [];
  for (const [i, c] of conditions.entries()) {
    const p = `${path}[${i}]`;
    if (!c.type) errs.push(fe("Required value", `${p}.type`, undefined, "is required"));
    else for (const msg of isQualifiedName(c.type)) errs.push(fe("Invalid value", `${p}.type`, c.type, msg));
    if (!c.status) errs.push(fe("Required value", `${p}.status`, undefined));
    else if (!["True", "False", "Unknown"].includes(c.status))
      errs.push(
        fe("Unsupported value", `${p}.status`, c.status, 'supported values: "False", "True", "Unknown"'),
      );
    if ((c.observedGeneration ?? 0) < 0)
      errs.push(
        fe(
          "Invalid value",
          `${p}.observedGeneration`,
          c.observedGeneration,
          "must be greater than or equal to zero",
        ),
      );
    if (!c.lastTransitionTime) errs.push(fe("Required value", `${p}.lastTransitionTime`, undefined));
    if (!c.reason) errs.push(fe("Required value", `${p}.reason`, undefined));
    else if (!CONDITION_REASON.test(c.reason))
      errs.push(
        fe(
          "Invalid value",
          `${p}.reason`,
          c.reason,
          regexError(
            "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
            "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?",
            "my_name",
            "MY_NAME",
            "MyName",
            "ReasonA,ReasonB",
            "ReasonA:ReasonB",
          ),
        ),
      );
    if (String(c.message ?? "").length > 32768)
      errs.push(fe("Too long", `${p}.message`, undefined, "may not be more than 32768 bytes"));
  }
  return errs;
}

function validateServiceStatus(obj: Any): FieldError[] {
  const errs: FieldError[] = [];
  const ingress: Any[] = obj.status?.loadBalancer?.ingress ?? [];
  if (obj.spec?.type !== "LoadBalancer" && ingress.length > 0)
    errs.push(
      fe(
        "Forbidden",
        "status.loadBalancer.ingress",
        undefined,
        "may only be used when `spec.type` is 'LoadBalancer'",
      ),
    );
  for (const [i, ing] of ingress.entries()) {
    const p = `status.loadBalancer.ingress[${i}]`;
    if (ing.ip) errs.push(...ipErrors(`${p}.ip`, String(ing.ip)));
    if (ing.ipMode != null && !ing.ip)
      errs.push(fe("Forbidden", `${p}.ipMode`, undefined, "may not be specified when `ip` is not set"));
    else if (ing.ipMode != null && !["VIP", "Proxy"].includes(ing.ipMode))
      errs.push(fe("Unsupported value", `${p}.ipMode`, ing.ipMode, 'supported values: "Proxy", "VIP"'));
    if (ing.hostname) {
      for (const msg of isDns1123Subdomain(ing.hostname))
        errs.push(fe("Invalid value", `${p}.hostname`, ing.hostname, msg));
      if (parseIp(ing.hostname))
        errs.push(
          fe("Invalid value", `${p}.hostname`, ing.hostname, "must be a DNS name, not an IP address"),
        );
    }
  }
  errs.push(...conditionErrors("status.conditions", obj.status?.conditions ?? []));
  return errs;
}

function validateEndpointSlice(obj: Any): FieldError[] {
  const errs: FieldError[] = [];
  const type = obj.addressType;
  if (!type) errs.push(fe("Required value", "addressType", undefined));
  else if (!["FQDN", "IPv4", "IPv6"].includes(type))
    errs.push(fe("Unsupported value", "addressType", type, 'supported values: "FQDN", "IPv4", "IPv6"'));
  const endpoints: Any[] = obj.endpoints ?? [];
  if (endpoints.length > 1000)
    errs.push(fe("Too many", "endpoints", endpoints.length, "must have at most 1000 items"));
  else
    for (const [i, ep] of endpoints.entries()) {
      const p = `endpoints[${i}].addresses`;
      const addrs: string[] = ep.addresses ?? [];
      if (addrs.length === 0)
        errs.push(fe("Required value", p, undefined, "must contain at least 1 address"));
      else if (addrs.length > 100) errs.push(fe("Too many", p, addrs.length, "must have at most 100 items"));
      for (const [j, a] of addrs.entries()) {
        const f = `${p}[${j}]`;
        if (type === "IPv4" || type === "IPv6") {
          const ip = parseIp(a);
          if (!ip || ip.family !== (type === "IPv4" ? 4 : 6))
            errs.push(fe("Invalid value", f, a, `must be a valid ${type} address`));
          else errs.push(...ipErrors(f, a), ...nonSpecialIpErrors(f, a));
        }
      }
      const topo = ep.deprecatedTopology ?? {};
      if (Object.keys(topo).length > 16)
        errs.push(
          fe(
            "Too many",
            `endpoints[${i}].deprecatedTopology`,
            Object.keys(topo).length,
            "must have at most 16 items",
          ),
        );
      if (ep.hostname != null)
        for (const msg of isDns1123Label(ep.hostname))
          errs.push(fe("Invalid value", `endpoints[${i}].hostname`, ep.hostname, msg));
    }
  const ports: Any[] = obj.ports ?? [];
  if (ports.length > 100) errs.push(fe("Too many", "ports", ports.length, "must have at most 100 items"));
  else {
    const names = new Set<string>();
    for (const [i, port] of ports.entries()) {
      const p = `ports[${i}]`;
      const name = String(port.name ?? "");
      if (name !== "")
        for (const msg of isDns1123Label(name)) errs.push(fe("Invalid value", `${p}.name`, name, msg));
      if (names.has(name)) errs.push(fe("Duplicate value", `${p}.name`, name));
      names.add(name);
      if (port.protocol == null) errs.push(fe("Required value", `${p}.protocol`, undefined));
      else if (!["SCTP", "TCP", "UDP"].includes(port.protocol))
        errs.push(
          fe("Unsupported value", `${p}.protocol`, port.protocol, 'supported values: "SCTP", "TCP", "UDP"'),
        );
      if (port.appProtocol != null)
        for (const msg of isQualifiedName(port.appProtocol))
          errs.push(fe("Invalid value", `${p}.appProtocol`, port.appProtocol, msg));
    }
  }
  return errs;
}

function validateEvent(obj: Any): FieldError[] {
  const errs: FieldError[] = [];
  const ns = String(obj.metadata?.namespace ?? "");
  const involved = String(obj.involvedObject?.namespace ?? "");
  const mismatch = () =>
    fe("Invalid value", "involvedObject.namespace", involved, "does not match event.namespace");
  if (!obj.eventTime) {
    if (involved === "" ? ns !== "" && ns !== "default" : ns !== involved) errs.push(mismatch());
  } else {
    if (involved === "" && ns !== "default" && ns !== "kube-system") errs.push(mismatch());
    if (!obj.reportingController) errs.push(fe("Required value", "reportingController", undefined));
    else
      for (const msg of isQualifiedName(obj.reportingController))
        errs.push(fe("Invalid value", "reportingController", obj.reportingController, msg));
    if (!obj.reportingInstance) errs.push(fe("Required value", "reportingInstance", undefined));
    const limits: [string, number][] = [
      ["reportingInstance", 128],
      ["action", 128],
      ["reason", 128],
      ["message", 1024],
    ];
    for (const [f, max] of limits) {
      if (f === "action" && !obj.action) errs.push(fe("Required value", "action", undefined));
      if (f === "reason" && !obj.reason) errs.push(fe("Required value", "reason", undefined));
      if (String(obj[f] ?? "").length > max)
        errs.push(fe("Invalid value", f, "", `can have at most ${max} characters`));
    }
  }
  for (const msg of isDns1123Subdomain(ns)) errs.push(fe("Invalid value", "namespace", ns, msg));
  return errs;
}

function validateLease(obj: Any): FieldError[] {
  const errs: FieldError[] = [];
  const d = obj.spec?.leaseDurationSeconds;
  if (d != null && d <= 0)
    errs.push(fe("Invalid value", "spec.leaseDurationSeconds", d, "must be greater than 0"));
  const t = obj.spec?.leaseTransitions;
  if (t != null && t < 0)
    errs.push(fe("Invalid value", "spec.leaseTransitions", t, "must be greater than or equal to 0"));
  return errs;
}

const BY_RESOURCE: Record<string, (obj: Any, sub: string) => FieldError[]> = {
  // ValidateServiceStatusUpdate runs on /status writes only (ValidateService ignores status)
  services: (obj, sub) => (sub === "status" ? validateServiceStatus(obj) : []),
  "discovery.k8s.io/endpointslices": validateEndpointSlice,
  events: validateEvent,
  "coordination.k8s.io/leases": validateLease,
};

/** Throws the 422 the real server answers, or returns when `obj` (as it would be stored) is valid. */
export function validateObject(res: FakeResource, obj: Obj, old: Obj | undefined, sub = ""): void {
  const errs = [...(BY_RESOURCE[resourceKey(res)]?.(obj, sub) ?? []), ...validateMeta(res, obj, old)];
  if (errs.length > 0) throw invalid(res.kind, res.group, String(obj.metadata.name ?? ""), errs);
}
