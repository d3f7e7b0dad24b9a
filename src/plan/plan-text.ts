/**
 * The text view of `passlb plan`: per Service what an operator wants to read — VIPs,
 * listeners, health checks, backends by zone with weights, what was left out and why,
 * and the issues; with `announce` (`--announce l2|bgp`), which LB hosts announce each VIP
 * and why (src/announce/announce-plan.ts decides). With `explain`, every backend's reason
 * and every condition under which a host gives a VIP up, in plain words. Pure: plans in,
 * a string out.
 */
import type { Backend, HealthCheck, LoadBalancerPlan, PlanIssue } from "./load-balancer-plan.ts";
import type { SkippedService } from "./planner.ts";

/** What the text view needs of src/announce/announce-plan.ts's result (kept structural). */
export interface AnnounceTextView {
  readonly mode: string;
  readonly forService: (service: string) => readonly {
    readonly vip: string;
    readonly group?: string;
    readonly hosts: readonly {
      readonly host: string;
      readonly role: string;
      readonly priority?: number;
      readonly reason: string;
    }[];
    readonly withdrawsWhen: readonly string[];
  }[];
}

export interface PlanTextOptions {
  readonly explain: boolean;
  /** `passlb plan --announce`: per VIP, the LB hosts that announce it */
  readonly announce?: AnnounceTextView;
  /** per Service, node → how the LB host reaches it (`route`, `encap vxlan-gpe:4790`);
   * shown after each member when given (`passlb plan --forward encap`) */
  readonly paths?: (service: string) => ReadonlyMap<string, string> | undefined;
  /** per Service, the LB host's data plane lines (`passlb plan --dataplane xdp`) */
  readonly dataplane?: (service: string) => readonly string[];
}

const SEVERITY_MARK: Record<PlanIssue["severity"], string> = {
  error: "ERROR",
  warning: "warning",
  info: "info",
};

function healthLine(h: HealthCheck): string {
  const target = h.protocol === "TCP" ? `TCP :${h.port}` : `${h.protocol} :${h.port}${h.path ?? ""}`;
  return (
    `${target} every ${h.intervalSeconds}s, timeout ${h.timeoutSeconds}s, healthy after ${h.healthyThreshold}, ` +
    `unhealthy after ${h.unhealthyThreshold}${h.readsWeight ? ", weight from X-Load-Balancing-Endpoint-Weight" : ""}` +
    ` — for ${h.listeners.join(", ")}`
  );
}

function memberLine(b: Backend, explain: boolean, path?: string): string {
  const address = [b.addresses.IPv4, b.addresses.IPv6].filter(Boolean).join(", ");
  const endpoints = b.localReadyEndpoints === null ? "" : `, ${b.localReadyEndpoints} ready endpoint(s)`;
  const unready = b.ready ? "" : "  (node not Ready)";
  const via = path === undefined ? "" : `, path ${path}`;
  const line = `      ${b.node.padEnd(20)} ${address.padEnd(28)} weight ${b.weight}${endpoints}${via}${unready}`;
  return explain ? `${line}\n        why: ${b.explanation}` : line;
}

export function renderPlansText(
  plans: readonly LoadBalancerPlan[],
  skipped: readonly SkippedService[],
  options: PlanTextOptions,
): string {
  const out: string[] = [];
  for (const plan of plans) {
    const traits = [`externalTrafficPolicy ${plan.externalTrafficPolicy}`];
    if (plan.weighted) traits.push("weighted pods-per-node");
    if (plan.zonalAffinity) traits.push("zonal affinity");
    out.push(`Service ${plan.service}  (${traits.join(", ")})`);
    const vips = plan.vips.map(
      (v) => `${v.address} (${v.family}, ${v.pool ? `pool ${v.pool}` : "no pool"}, ${v.source})`,
    );
    out.push(`  VIPs:        ${vips.length > 0 ? vips.join("; ") : "none assigned"}`);
    for (const k of plan.foreignKeys ?? [])
      out.push(`  Read:        ${k.key}: ${JSON.stringify(k.value)} — ${k.use}: ${k.how}`);
    out.push(
      `  Listeners:   ${plan.listeners
        .map(
          (l) => `${l.protocol} ${l.port} → ${l.targetPort}${l.nodePort ? ` (nodePort ${l.nodePort})` : ""}`,
        )
        .join("; ")}`,
    );
    for (const h of plan.healthChecks) out.push(`  Health:      ${healthLine(h)}`);
    if (plan.sessionAffinity.type === "ClientIP")
      out.push(`  Affinity:    ClientIP, ${plan.sessionAffinity.timeoutSeconds}s`);
    if (plan.sourceRanges.length > 0) out.push(`  Sources:     only ${plan.sourceRanges.join(", ")}`);
    (options.dataplane?.(plan.service) ?? []).forEach((line, i) => {
      out.push(`  ${i === 0 ? "Data plane:  " : "             "}${line}`);
    });
    const members = plan.members;
    const all = plan.backends;
    out.push(`  Backends:    ${members.length} of ${all.length} nodes`);
    const zones = new Map<string, Backend[]>();
    for (const b of members) {
      const list = zones.get(b.zone);
      if (list) list.push(b);
      else zones.set(b.zone, [b]);
    }
    for (const [zone, list] of zones) {
      out.push(`    ${zone === "" ? "(no zone)" : zone}: ${list.length}`);
      const paths = options.paths?.(plan.service);
      for (const b of list) out.push(memberLine(b, options.explain, paths?.get(b.node)));
    }
    const excluded = all.filter((b) => !b.included);
    if (options.explain) {
      if (excluded.length > 0) out.push("    left out:");
      for (const b of excluded)
        out.push(`      ${b.node.padEnd(20)} ${b.reason}\n        why: ${b.explanation}`);
    } else {
      const byReason = new Map<string, string[]>();
      for (const b of excluded) {
        const list = byReason.get(b.reason);
        if (list) list.push(b.node);
        else byReason.set(b.reason, [b.node]);
      }
      for (const [reason, names] of byReason) {
        const shown = names.slice(0, 5).join(", ") + (names.length > 5 ? `, … ${names.length - 5} more` : "");
        out.push(`    left out (${reason}): ${shown}`);
      }
    }
    if (options.announce) out.push(...announceLines(options.announce, plan.service, options.explain));
    for (const i of plan.issues) out.push(`  ${SEVERITY_MARK[i.severity]} ${i.code}: ${i.message}`);
    out.push("");
  }
  if (plans.length === 0) out.push("No LoadBalancer Service is owned by passlb in this input.", "");
  if (skipped.length > 0) {
    out.push(`Not passlb's (${skipped.length}):`);
    for (const s of skipped) out.push(`  ${s.service}: ${s.reason}`);
    out.push("");
  }
  return out.join("\n");
}

function announceLines(view: AnnounceTextView, service: string, explain: boolean): string[] {
  const out: string[] = [];
  const vips = view.forService(service);
  if (vips.length === 0) return [`  Announce:    ${view.mode}: no VIP to announce`];
  for (const v of vips) {
    const active = v.hosts.filter((h) => h.role === "holds" || h.role === "announces").map((h) => h.host);
    const who =
      active.length === 0
        ? "by no LB host"
        : view.mode === "l2"
          ? `held by ${active[0]}`
          : `by ${active.join(", ")} (${active.length} of ${v.hosts.length} LB hosts)`;
    out.push(`  Announce:    ${view.mode} ${v.vip} ${who}${v.group ? ` — vrrp_instance ${v.group}` : ""}`);
    for (const h of v.hosts) {
      const priority = h.priority === undefined ? "" : ` priority ${h.priority}`;
      out.push(`      ${h.host.padEnd(20)} ${`${h.role}${priority}`.padEnd(20)} ${h.reason}`);
    }
  }
  const when = vips[0]!.withdrawsWhen;
  if (explain) {
    out.push("    a host gives a VIP up when:");
    for (const w of when) out.push(`      ${w}`);
  } else
    out.push(
      `    a host gives a VIP up on: ${when.map((w) => w.split(":")[0]!.split(" (")[0]).join("; ")} (--explain: how)`,
    );
  return out;
}
