/**
 * `kubectl passlb status`, the pure half: Services (their VIPs and conditions from
 * `status`) and what each LB host's `/api/v1/state` (docs/dashboard.md) says about their
 * nodes, joined into one report; and the text view of it. An LB host that could not be
 * asked is part of the report, never silently missing. Data in, data out: fetching is
 * status-command.ts's job.
 */
import { z } from "zod";
import { failingLine } from "../cluster/kube-api-health.ts";
import { PASSLB_CLASS } from "../plan/ownership.ts";
import { type ForeignView, foreignSpeakerLines, type WireView, wireLines } from "./wire-lines.ts";

/** The part of a Service `kubectl passlb status` reads; anything else is ignored. */
export const StatusServiceSchema = z.looseObject({
  metadata: z.looseObject({ name: z.string(), namespace: z.string().default("default") }),
  spec: z.looseObject({ type: z.string().optional(), loadBalancerClass: z.string().optional() }).default({}),
  status: z
    .looseObject({
      loadBalancer: z
        .looseObject({
          ingress: z
            .array(
              z.looseObject({
                ip: z.string().optional(),
                hostname: z.string().optional(),
                ipMode: z.string().optional(),
              }),
            )
            .optional(),
        })
        .optional(),
      conditions: z
        .array(
          z.looseObject({
            type: z.string(),
            status: z.string(),
            reason: z.string().optional(),
            message: z.string().optional(),
          }),
        )
        .optional(),
    })
    .optional(),
});
export type StatusService = z.infer<typeof StatusServiceSchema>;

/** `kubeApi` of `/api/v1/state`: the failing channels of API calls (cluster/kube-api-health.ts). */
const KubeApiSchema = z.looseObject({
  ready: z.boolean(),
  failing: z
    .array(
      z.looseObject({
        channel: z.string(),
        since: z.string(),
        forSeconds: z.number(),
        failures: z.number(),
        verb: z.string(),
        resource: z.string(),
        code: z.string(),
        message: z.string(),
      }),
    )
    .default([]),
});
export type KubeApiView = z.infer<typeof KubeApiSchema>;

/** The part of `/api/v1/state` (passlb.io/dashboard/v1) the report uses: the LB hosts' and the controller's. */
export const LbStateSchema = z.looseObject({
  apiVersion: z.string(),
  kubeApi: KubeApiSchema.optional(),
  process: z.string().optional(),
  dataplane: z.string().optional(),
  uptimeSeconds: z.number().optional(),
  services: z
    .array(
      z.looseObject({
        service: z.string(),
        nodes: z
          .array(
            z.looseObject({
              node: z.string(),
              zone: z.string().nullish(),
              state: z.string(),
              reason: z.string().optional(),
              weight: z.number(),
              active: z.boolean().optional(),
            }),
          )
          .default([]),
      }),
    )
    .default([]),
  /** `--announce l2` or `bgp`: the engine's status (announcer.ts AnnouncerStatus, one shape); null without */
  announce: z
    .looseObject({
      engine: z.string(),
      host: z.string(),
      state: z.string(),
      detail: z.string().optional(),
      vips: z
        .array(
          z.looseObject({
            vip: z.string(),
            state: z.string(),
            reason: z.string(),
            preferredHolder: z.string().optional(),
          }),
        )
        .default([]),
      groups: z
        .array(z.looseObject({ name: z.string(), state: z.string(), priority: z.number(), vips: z.number() }))
        .default([]),
      /** BIRD: the speaker's health and its BGP sessions */
      speaker: z
        .looseObject({
          health: z.string(),
          sessions: z
            .array(
              z.looseObject({
                peer: z.string(),
                established: z.boolean(),
                state: z.string().optional(),
                bfd: z.string().optional(),
                name: z.string().optional(),
                exported: z.number().optional(),
                lastError: z.string().optional(),
              }),
            )
            .default([]),
        })
        .optional(),
      /** the wire checks (announce/wire-verdict.ts WireReport) */
      wire: z
        .looseObject({
          vips: z
            .array(z.looseObject({ vip: z.string(), problem: z.string().nullable(), message: z.string() }))
            .default([]),
          vrrp: z
            .looseObject({
              foreign: z
                .array(
                  z.looseObject({
                    vrid: z.number(),
                    source: z.string(),
                    mac: z.string(),
                    interface: z.string(),
                    priority: z.number(),
                  }),
                )
                .default([]),
            })
            .optional(),
        })
        .optional(),
    })
    .nullish(),
});
export type LbState = z.infer<typeof LbStateSchema>;

export type LbHostAnswer =
  | { readonly pod: string; readonly node: string; readonly reachable: true; readonly state: LbState }
  | { readonly pod: string; readonly node: string; readonly reachable: false; readonly error: string };

export interface NodeView {
  readonly state: string;
  readonly weight: number;
  readonly reason?: string;
}

export interface ServiceStatus {
  readonly service: string;
  readonly loadBalancerClass: string | null;
  readonly vips: readonly { readonly address: string; readonly ipMode: string | null }[];
  readonly conditions: readonly { type: string; status: string; reason?: string; message?: string }[];
  /** per VIP, per reachable LB host pod that announces: held, backup or withdrawn (and why) */
  readonly announce: readonly {
    readonly address: string;
    readonly heldBy: readonly string[];
    readonly hosts: Readonly<Record<string, { readonly state: string; readonly reason: string }>>;
    /** what each LB host's wire check says about the VIP (wire-lines.ts) */
    readonly wire: Readonly<Record<string, WireView>>;
  }[];
  /** per node (sorted by zone, then name), per reachable LB host pod: its view, or null when that host does not plan the Service */
  readonly nodes: readonly {
    readonly node: string;
    readonly zone: string | null;
    readonly hosts: Readonly<Record<string, NodeView | null>>;
  }[];
}

/** A passlb pod as the report shows it; `kubeApi` null when the pod does not report it. */
export type PodStatus =
  | {
      pod: string;
      node: string;
      reachable: true;
      process: string | null;
      dataplane: string | null;
      uptimeSeconds: number | null;
      kubeApi: KubeApiView | null;
      /** the announcement engine on that host (LB hosts only), with its groups' states */
      announce: AnnounceView | null;
    }
  | { pod: string; node: string; reachable: false; error: string };

export interface AnnounceView {
  engine: string;
  host: string;
  state: string;
  detail: string | null;
  groups: readonly { name: string; state: string; priority: number; vips: number }[];
  /** BIRD: the speaker's health, sessions established of all, and each session */
  speaker: {
    health: string;
    established: number;
    sessions: number;
    list: readonly {
      name: string;
      peer: string;
      state: string;
      bfd: string;
      exported: number | null;
      error: string;
    }[];
  } | null;
  /** VRRP speakers on passlb's VRIDs that are not LB hosts, heard by this host */
  foreign: readonly ForeignView[];
}

export interface StatusReport {
  readonly lbHosts: readonly PodStatus[];
  /** the controller's pods (docs/kubernetes.md "When the API server refuses") */
  readonly controllers: readonly PodStatus[];
  readonly services: readonly ServiceStatus[];
}

function podStatus(h: LbHostAnswer): PodStatus {
  return h.reachable
    ? {
        pod: h.pod,
        node: h.node,
        reachable: true,
        process: h.state.process ?? null,
        dataplane: h.state.dataplane ?? null,
        uptimeSeconds: h.state.uptimeSeconds ?? null,
        kubeApi: h.state.kubeApi ?? null,
        announce: h.state.announce
          ? {
              engine: h.state.announce.engine,
              host: h.state.announce.host,
              state: h.state.announce.state,
              detail: h.state.announce.detail ?? null,
              groups: h.state.announce.groups,
              speaker: h.state.announce.speaker
                ? {
                    health: h.state.announce.speaker.health,
                    established: h.state.announce.speaker.sessions.filter((x) => x.established).length,
                    sessions: h.state.announce.speaker.sessions.length,
                    list: h.state.announce.speaker.sessions.map((x) => ({
                      name: x.name ?? "",
                      peer: x.peer,
                      state: x.state ?? (x.established ? "Established" : "down"),
                      bfd: x.bfd ?? "no BFD",
                      exported: x.exported ?? null,
                      error: x.lastError ?? "",
                    })),
                  }
                : null,
              foreign: h.state.announce.wire?.vrrp?.foreign ?? [],
            }
          : null,
      }
    : { pod: h.pod, node: h.node, reachable: false, error: h.error };
}

/** Pods whose API calls are failing, for the warning and the exit code. */
export function apiFailingPods(report: StatusReport): PodStatus[] {
  return [...report.controllers, ...report.lbHosts].filter(
    (p) => p.reachable && p.kubeApi !== null && !p.kubeApi.ready,
  );
}

export function ownsService(svc: StatusService, defaultClass: boolean): boolean {
  if (svc.spec.type !== "LoadBalancer") return false;
  const cls = svc.spec.loadBalancerClass;
  return cls === PASSLB_CLASS || (cls === undefined && defaultClass);
}

export function buildStatusReport(
  services: readonly StatusService[],
  hosts: readonly LbHostAnswer[],
  controllers: readonly LbHostAnswer[] = [],
): StatusReport {
  const reachable = hosts.filter((h) => h.reachable);
  const byName = (a: { pod: string }, b: { pod: string }) => a.pod.localeCompare(b.pod);
  const lbHosts = [...hosts].sort(byName).map(podStatus);
  const out = services
    .map((svc): ServiceStatus => {
      const key = `${svc.metadata.namespace}/${svc.metadata.name}`;
      const nodes = new Map<string, { zone: string | null; hosts: Record<string, NodeView | null> }>();
      for (const host of reachable) {
        const entry = host.state.services.find((s) => s.service === key);
        for (const n of entry?.nodes ?? []) {
          const row = nodes.get(n.node) ?? { zone: n.zone ?? null, hosts: {} };
          row.hosts[host.pod] = {
            state: n.state,
            weight: n.weight,
            ...(n.reason !== undefined && { reason: n.reason }),
          };
          nodes.set(n.node, row);
        }
      }
      for (const row of nodes.values())
        for (const host of reachable) if (!(host.pod in row.hosts)) row.hosts[host.pod] = null;
      const vips = (svc.status?.loadBalancer?.ingress ?? []).map((i) => ({
        address: i.ip ?? i.hostname ?? "",
        ipMode: i.ipMode ?? null,
      }));
      const announcing = [...reachable].sort(byName).filter((h) => h.state.announce);
      const announce =
        announcing.length === 0
          ? []
          : vips.map((v) => {
              const hostsOf: Record<string, { state: string; reason: string }> = {};
              const wire: Record<string, WireView> = {};
              for (const h of announcing) {
                const a = h.state.announce?.vips.find((x) => x.vip === v.address);
                if (a) hostsOf[h.pod] = { state: a.state, reason: a.reason };
                const w = h.state.announce?.wire?.vips.find((x) => x.vip === v.address);
                if (w) wire[h.pod] = { vip: w.vip, problem: w.problem, message: w.message };
              }
              return {
                address: v.address,
                heldBy: Object.entries(hostsOf)
                  .filter(([, x]) => x.state === "held")
                  .map(([pod]) => pod),
                hosts: hostsOf,
                wire,
              };
            });
      return {
        service: key,
        loadBalancerClass: svc.spec.loadBalancerClass ?? null,
        vips,
        announce,
        conditions: (svc.status?.conditions ?? []).map((c) => ({
          type: c.type,
          status: c.status,
          ...(c.reason !== undefined && { reason: c.reason }),
          ...(c.message !== undefined && { message: c.message }),
        })),
        nodes: [...nodes.entries()]
          .map(([node, row]) => ({ node, zone: row.zone, hosts: row.hosts }))
          .sort((a, b) => (a.zone ?? "").localeCompare(b.zone ?? "") || a.node.localeCompare(b.node)),
      };
    })
    .sort((a, b) => a.service.localeCompare(b.service));
  return { lbHosts, controllers: [...controllers].sort(byName).map(podStatus), services: out };
}

function duration(seconds: number | null): string {
  if (seconds === null) return "";
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `up ${h}h${String(m).padStart(2, "0")}m` : `up ${m}m${String(s % 60).padStart(2, "0")}s`;
}

/** `keepalived running: 2 MASTER, 1 BACKUP`; `bird running: speaker degraded, 1 of 2 BGP sessions Established` */
function engine(a: AnnounceView | null): string {
  if (!a) return "";
  const counts = new Map<string, number>();
  for (const g of a.groups) counts.set(g.state, (counts.get(g.state) ?? 0) + 1);
  const parts = [...counts].map(([st, n]) => `${n} ${st}`);
  if (a.speaker)
    parts.push(
      `speaker ${a.speaker.health}`,
      `${a.speaker.established} of ${a.speaker.sessions} BGP sessions Established`,
    );
  const states = parts.join(", ");
  const detail = a.state === "running" || !a.detail ? "" : ` (${a.detail})`;
  return `${a.engine} ${a.state}${detail}${states ? `: ${states}` : ""}`;
}

/** Every BGP session of every LB host: state, BFD, routes exported to the peer, and why it may be down. */
function bgpSessionRows(hosts: readonly PodStatus[]): string[] {
  const rows: string[][] = [];
  for (const h of hosts)
    if (h.reachable)
      for (const s of h.announce?.speaker?.list ?? [])
        rows.push([
          h.pod,
          s.name || "-",
          s.peer,
          s.state,
          s.bfd,
          s.exported === null ? "-" : `${s.exported} exported`,
          s.error,
        ]);
  if (rows.length === 0) return [];
  return [
    "",
    "BGP sessions:",
    ...table([["LB HOST", "SESSION", "PEER", "STATE", "BFD", "ROUTES", "WHY"], ...rows], "  "),
  ];
}

function cell(view: NodeView | null | undefined): string {
  if (!view) return "not planned";
  const weight = view.state === "excluded" ? "" : ` weight ${view.weight}`;
  const reason = view.state === "excluded" && view.reason ? ` (${view.reason})` : "";
  return `${view.state}${weight}${reason}`;
}

function table(rows: readonly string[][], indent: string): string[] {
  const widths: number[] = [];
  for (const r of rows) for (const [i, c] of r.entries()) widths[i] = Math.max(widths[i] ?? 0, c.length);
  return rows.map(
    (r) => `${indent}${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  ")}`,
  );
}

function podRows(pods: readonly PodStatus[]): string[] {
  const rows: string[][] = [];
  const details: (string[] | undefined)[] = [];
  for (const h of pods) {
    if (!h.reachable) {
      rows.push([h.pod, `node ${h.node}`, `UNREACHABLE: ${h.error}`]);
      details.push(undefined);
      continue;
    }
    const failing = h.kubeApi && !h.kubeApi.ready ? h.kubeApi.failing : [];
    const api = failing.length > 0 ? "KUBERNETES API FAILING" : "";
    rows.push([
      h.pod,
      `node ${h.node}`,
      [h.dataplane === "none" ? "" : (h.dataplane ?? ""), duration(h.uptimeSeconds), engine(h.announce), api]
        .filter(Boolean)
        .join(", "),
    ]);
    details.push([
      ...failing.map((f) => `      ${failingLine(f)}`),
      ...foreignSpeakerLines(h.announce?.foreign ?? []),
    ]);
  }
  return table(rows, "  ").flatMap((line, i) => [line, ...(details[i] ?? [])]);
}

export function renderStatusText(report: StatusReport, lbNamespace: string): string {
  const out: string[] = [];
  const ok = report.lbHosts.filter((h) => h.reachable);
  out.push(`LB hosts in ${lbNamespace}: ${ok.length} of ${report.lbHosts.length} reachable`);
  out.push(...podRows(report.lbHosts));
  out.push(...bgpSessionRows(report.lbHosts));
  const controllersOk = report.controllers.filter((h) => h.reachable).length;
  out.push(
    "",
    report.controllers.length === 0
      ? `Controller pods in ${lbNamespace}: none found`
      : `Controller pods in ${lbNamespace}: ${controllersOk} of ${report.controllers.length} reachable`,
  );
  out.push(...podRows(report.controllers));
  if (report.services.length === 0) out.push("", "No LoadBalancer Services of class passlb.io/l4.");
  for (const svc of report.services) {
    out.push("", `Service ${svc.service}  (${svc.loadBalancerClass ?? "no class, passlb is the default"})`);
    const vips = svc.vips.map((v) => `${v.address}${v.ipMode ? ` (ipMode ${v.ipMode})` : ""}`);
    out.push(`  VIPs:        ${vips.length > 0 ? vips.join("; ") : "none in status (pending)"}`);
    if (svc.conditions.length === 0) out.push("  Conditions:  none");
    for (const c of svc.conditions)
      out.push(
        `  Condition:   ${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ""}${c.message ? `: ${c.message}` : ""}`,
      );
    for (const a of svc.announce) {
      const others = Object.entries(a.hosts)
        .filter(([, x]) => x.state !== "held")
        .map(([pod, x]) => `${pod} ${x.state} (${x.reason})`);
      const held = a.heldBy.length === 0 ? "NO LB HOST" : a.heldBy.join(" and ");
      out.push(`  Held:        ${a.address} by ${held}${others.length > 0 ? `; ${others.join(", ")}` : ""}`);
      out.push(...wireLines(a.wire));
    }
    if (ok.length === 0) {
      out.push("  Nodes:       no LB host could be asked");
      continue;
    }
    if (svc.nodes.length === 0) {
      out.push("  Nodes:       no LB host plans this Service");
      continue;
    }
    out.push("  Nodes as the LB hosts see them:");
    const header = ["NODE", "ZONE", ...ok.map((h) => h.pod)];
    const rows = svc.nodes.map((n) => [n.node, n.zone ?? "-", ...ok.map((h) => cell(n.hosts[h.pod]))]);
    out.push(...table([header, ...rows], "    "));
  }
  return `${out.join("\n")}\n`;
}
