/**
 * Which other load-balancer controllers are still running, from their Deployments,
 * DaemonSets and ConfigMaps (docs/migrate.md "The cut-over order"), and the cut-over order that keeps two
 * controllers from ever writing one Service's status (the status loop of KBVE/kbve#14105,
 * the leftovers of vehagn/homelab#7). Pure.
 *
 * Recognised: MetalLB controller and speaker (images `metallb/controller`,
 * `metallb/speaker`, FRR-K8s); Cilium LB-IPAM and L2 announcements (`cilium-config`:
 * `enable-lb-ipam` defaults to true, `default-lb-service-ipam`, `enable-l2-announcements`;
 * existing CiliumLoadBalancerIPPools); kube-vip with `svc_enable=true` and the kube-vip
 * cloud-provider; k3s ServiceLB (`svclb-*` DaemonSets); the PureLB allocator and
 * lbnodeagent; the OpenELB manager.
 */
import type { ConfigMap, Workload } from "./foreign-objects.ts";

export interface ForeignController {
  readonly tool: "metallb" | "cilium" | "kube-vip" | "k3s-servicelb" | "purelb" | "openelb";
  /** what assigns addresses (`controller`) or answers for them (`announcer`) */
  readonly role: "controller" | "announcer";
  /** `Deployment metallb-system/controller`, `ConfigMap kube-system/cilium-config` */
  readonly object: string;
  /** how to stop it, in a phrase */
  readonly stop: string;
}

const images = (w: Workload) => (w.spec.template?.spec.containers ?? []).map((c) => c.image ?? "");
const envOf = (w: Workload, name: string) =>
  (w.spec.template?.spec.containers ?? []).flatMap((c) => c.env ?? []).find((e) => e.name === name)?.value;
const label = (kind: string, m: { namespace?: string | undefined; name: string }) =>
  `${kind} ${m.namespace ?? "default"}/${m.name}`;

export function foreignControllers(
  workloads: readonly Workload[],
  configMaps: readonly ConfigMap[],
  ciliumPools: number,
): ForeignController[] {
  const out: ForeignController[] = [];
  for (const w of workloads) {
    const object = label(w.kind, w.metadata);
    if (w.spec.replicas === 0) continue; // scaled to zero: stopped
    const img = images(w);
    const has = (re: RegExp) => img.some((i) => re.test(i));
    if (has(/metallb\/controller/))
      out.push({
        tool: "metallb",
        role: "controller",
        object,
        stop: `kubectl -n ${w.metadata.namespace ?? "default"} scale deployment ${w.metadata.name} --replicas=0`,
      });
    else if (has(/metallb\/speaker|frr-k8s/))
      out.push({
        tool: "metallb",
        role: "announcer",
        object,
        stop: `kubectl -n ${w.metadata.namespace ?? "default"} delete daemonset ${w.metadata.name}`,
      });
    else if (has(/kube-vip-cloud-provider/))
      out.push({
        tool: "kube-vip",
        role: "controller",
        object,
        stop: `kubectl -n ${w.metadata.namespace ?? "default"} scale deployment ${w.metadata.name} --replicas=0`,
      });
    else if (has(/kube-vip\/kube-vip|plndr\/kube-vip/) && envOf(w, "svc_enable") === "true")
      out.push({
        tool: "kube-vip",
        role: "announcer",
        object,
        stop: "set svc_enable=false on kube-vip (it keeps serving the control-plane VIP)",
      });
    else if (w.kind === "DaemonSet" && w.metadata.name.startsWith("svclb-"))
      out.push({
        tool: "k3s-servicelb",
        role: "announcer",
        object,
        stop: "restart the k3s servers with --disable servicelb",
      });
    else if (has(/purelb\/allocator/))
      out.push({
        tool: "purelb",
        role: "controller",
        object,
        stop: `kubectl -n ${w.metadata.namespace ?? "default"} scale deployment ${w.metadata.name} --replicas=0`,
      });
    else if (has(/purelb\/lbnodeagent/))
      out.push({
        tool: "purelb",
        role: "announcer",
        object,
        stop: `kubectl -n ${w.metadata.namespace ?? "default"} delete daemonset ${w.metadata.name}`,
      });
    else if (has(/openelb/))
      out.push({
        tool: "openelb",
        role: "controller",
        object,
        stop: `kubectl -n ${w.metadata.namespace ?? "default"} scale deployment ${w.metadata.name} --replicas=0`,
      });
  }
  for (const cm of configMaps) {
    if (cm.metadata.name !== "cilium-config") continue;
    const d = cm.data ?? {};
    const object = label("ConfigMap", cm.metadata);
    // enable-lb-ipam defaults to true; LB-IPAM acts once a pool exists
    const lbIpam =
      d["enable-lb-ipam"] !== "false" && (ciliumPools > 0 || d["default-lb-service-ipam"] === "lbipam");
    if (lbIpam)
      out.push({
        tool: "cilium",
        role: "controller",
        object,
        stop: "set enable-lb-ipam: false in cilium-config and restart cilium-operator (not default-lb-service-ipam: none, which releases the addresses), then delete the CiliumLoadBalancerIPPools",
      });
    if (d["enable-l2-announcements"] === "true")
      out.push({
        tool: "cilium",
        role: "announcer",
        object,
        stop: "delete the CiliumL2AnnouncementPolicies (or set enable-l2-announcements: false and restart the agents)",
      });
  }
  return out;
}

/**
 * The cut-over, step by step. compat.md §7.5 proposes four steps; the controller swap is
 * placed in the middle so that the old controller is stopped before passlb's starts, and no
 * Service's status has two writers at any moment (docs/migrate.md says why).
 */
export function cutoverOrder(
  found: readonly ForeignController[],
  flags: readonly string[],
  /** bgp: LoadBalancerBGPPeers were imported; the LB hosts announce before the old speakers stop */
  announce: "l2" | "bgp" = "l2",
): string[] {
  const controllers = found.filter((f) => f.role === "controller");
  const announcers = found.filter((f) => f.role === "announcer");
  const list = (xs: readonly ForeignController[]) =>
    xs.length === 0 ? "none found running" : xs.map((x) => `${x.object}: ${x.stop}`).join("; ");
  const start = [
    "apply the LoadBalancerIPPools printed on standard output (nothing reads them yet)",
    "install the passlb LB hosts with --announce none: they program the addresses already in status",
    `stop the old controller, so that only one writer of status exists: ${list(controllers)}`,
    `start passlb controller${flags.length > 0 ? ` ${flags.join(" ")}` : ""}: it adopts every address in status before it assigns any`,
  ];
  const end = "remove the old controller's remaining objects and its CRDs";
  // BGP: make before break. The routers hold both sets of paths for a while (both deliver to
  // the Service); stopping the old speakers then withdraws theirs, with no gap without a path.
  if (announce === "bgp")
    return [
      ...start,
      "apply the LoadBalancerBGPPeers printed on standard output and turn BGP on (passlb lb --announce bgp, no --bgp-peer): the routers learn paths through the LB hosts next to the old ones",
      `stop the old announcer: ${list(announcers)}: the routers withdraw its paths; its flows move to the LB hosts once`,
      end,
    ];
  return [
    ...start,
    `stop the old announcer: ${list(announcers)}`,
    "turn announcing on (passlb lb --announce l2 …): the LB hosts send gratuitous ARP / unsolicited NA",
    end,
  ];
}
