/**
 * The facts about one Service that every GKE resource builder shares: names, IP families
 * that get forwarding rules (docs/providers-gke.md), whether the Service mixes TCP and UDP and
 * whether this path may build that mix (§6.2), and the addresses already known from the
 * Service (status ingress, spec.loadBalancerIP). Built once per Service by gke-plan.ts.
 */
import type { Service } from "../../k8s/objects.ts";
import { canonicalIp } from "../../net/ip.ts";
import type { ControllerChoice } from "./gke-controller-choice.ts";
import { type L4Names, l4Names, legacyName } from "./gke-names.ts";
import { type L4Protocol, protocolsOf } from "./gke-ports.ts";
import type { GkeFinding, GkeOptions } from "./gke-types.ts";

export type Family = "IPv4" | "IPv6";

export interface GkeContext {
  readonly service: Service;
  readonly subject: string;
  readonly choice: ControllerChoice;
  readonly options: GkeOptions;
  readonly legacy: string;
  readonly clusterId: string;
  readonly l4: L4Names;
  /** ingress-gce paths (subsetting ILB, RBS NetLB) rather than the CCM's */
  readonly ig: boolean;
  readonly external: boolean;
  readonly protocols: readonly L4Protocol[];
  /** TCP and UDP together, and this path builds the mix (flag on) */
  readonly mixed: boolean;
  /** the families asked for in spec.ipFamilies that this path builds, before subnet checks */
  readonly families: readonly Family[];
  readonly address: { readonly IPv4?: string; readonly IPv6?: string };
}

export function gkeContext(
  service: Service,
  choice: ControllerChoice,
  options: GkeOptions,
  kubeSystemUid: string,
): { context: GkeContext; findings: GkeFinding[] } {
  const namespace = service.metadata.namespace ?? "default";
  const name = service.metadata.name ?? "";
  const subject = `${namespace}/${name}`;
  const findings: GkeFinding[] = [];
  const ig =
    choice.path === "subsetting-ilb" || choice.path === "rbs-neg" || choice.path === "rbs-instance-groups";
  const external = choice.scheme === "EXTERNAL";
  const protocols = protocolsOf(service);
  const mixFlag = external
    ? options.flags["enable-l4netlb-mixed-protocol"]
    : options.flags["enable-l4ilb-mixed-protocol"];
  const mixed = ig && protocols.length > 1 && mixFlag;
  const asked = service.spec.ipFamilies ?? [];
  const wantV4 = asked.length === 0 || asked.includes("IPv4");
  const wantV6 = asked.includes("IPv6");
  const families: Family[] = [];
  if (ig) {
    if (wantV4) families.push("IPv4");
    const v6Flag = external
      ? options.flags["enable-l4netlb-dual-stack"]
      : options.flags["enable-l4ilb-dual-stack"];
    if (wantV6 && v6Flag) families.push("IPv6");
    else if (wantV6)
      findings.push({
        code: "gke_ipv6_flag_off",
        severity: "warning",
        subject,
        message: `IPv6 is asked for but ${external ? "enable-l4netlb-dual-stack" : "enable-l4ilb-dual-stack"} is off: no IPv6 rule.`,
      });
  } else if (choice.path !== "none") {
    families.push("IPv4");
    if (wantV6)
      findings.push({
        code: "gke_ipv6_unsupported_path",
        severity: "warning",
        subject,
        message:
          "The CCM's target-pool and instance-group ILB paths have no IPv6 code: only an IPv4 load balancer is built (§6.3).",
      });
  }
  const address: { IPv4?: string; IPv6?: string } = {};
  for (const ingress of service.status?.loadBalancer?.ingress ?? []) {
    const ip = ingress.ip ? canonicalIp(ingress.ip) : undefined;
    if (ip) address[ip.includes(":") ? "IPv6" : "IPv4"] ??= ip;
  }
  const requested = service.spec.loadBalancerIP ? canonicalIp(service.spec.loadBalancerIP) : undefined;
  if (requested) address[requested.includes(":") ? "IPv6" : "IPv4"] ??= requested;
  return {
    context: {
      service,
      subject,
      choice,
      options,
      legacy: legacyName(service.metadata.uid ?? ""),
      clusterId: kubeSystemUid,
      l4: l4Names(kubeSystemUid, namespace, name),
      ig,
      external,
      protocols,
      mixed,
      families,
      address,
    },
    findings,
  };
}
