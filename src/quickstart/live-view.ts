/**
 * The live view of `passlb up`, as pure functions of its state: a full screen for a
 * terminal (redrawn in place by the caller) and one plain line per Service for logs and
 * pipes. Per Service: VIP and ports, policy, each member node's health and weight, and the
 * share of recent connections each pod got. No I/O, no clock: `now` is in the state.
 */

export interface LiveNode {
  readonly node: string;
  readonly zone: string;
  readonly health: "healthy" | "unhealthy" | "unknown";
  readonly weight: number;
  /** takes new connections now (healthy or unknown, weight > 0, or fail-open) */
  readonly active: boolean;
}

export interface LivePod {
  readonly pod: string;
  readonly node: string;
  readonly connections: number;
}

export interface LiveService {
  readonly service: string;
  /** `TCP 127.0.1.3:8080` */
  readonly listeners: readonly string[];
  readonly policy: "Local" | "Cluster";
  readonly notes: readonly string[];
  readonly failOpen: boolean;
  readonly nodes: readonly LiveNode[];
  readonly pods: readonly LivePod[];
}

export interface LiveState {
  readonly now: number;
  readonly startedAt: number;
  readonly windowSeconds: number;
  readonly services: readonly LiveService[];
  /** the last few things that happened (reloads, health changes), newest last */
  readonly events: readonly string[];
}

const pct = (n: number, total: number) =>
  total === 0 ? "  -" : `${Math.round((100 * n) / total)}%`.padStart(4);

const HEALTH_MARK = { healthy: "up", unhealthy: "DOWN", unknown: "?" } as const;

export function renderLiveView(state: LiveState): string {
  const lines: string[] = [];
  const up = Math.floor((state.now - state.startedAt) / 1000);
  lines.push(`passlb up — running ${up}s — shares over the last ${state.windowSeconds}s — Ctrl-C stops`);
  for (const s of state.services) {
    lines.push("");
    const extras = [
      s.policy === "Local" ? "Local" : "Cluster",
      ...s.notes,
      ...(s.failOpen ? ["FAIL-OPEN"] : []),
    ];
    lines.push(`${s.service}  ${s.listeners.join(", ")}  (${extras.join(", ")})`);
    const nodeCells = s.nodes.map(
      (n) => `${n.node}[${n.zone || "-"}] ${HEALTH_MARK[n.health]} w${n.weight}${n.active ? "" : " (out)"}`,
    );
    lines.push(`  nodes: ${nodeCells.length === 0 ? "none" : nodeCells.join("  ")}`);
    const total = s.pods.reduce((a, p) => a + p.connections, 0);
    if (s.pods.length === 0) lines.push(`  pods:  no connections in the last ${state.windowSeconds}s`);
    for (const p of s.pods) {
      const bar = "#".repeat(total === 0 ? 0 : Math.round((20 * p.connections) / total));
      lines.push(
        `  ${p.pod.padEnd(24)} ${p.node.padEnd(10)} ${pct(p.connections, total)} ${String(p.connections).padStart(5)} ${bar}`,
      );
    }
  }
  if (state.events.length > 0) {
    lines.push("");
    lines.push("recent:");
    for (const e of state.events) lines.push(`  ${e}`);
  }
  return `${lines.join("\n")}\n`;
}

/** One line per Service, for output that is not a terminal. */
export function renderLiveLines(state: LiveState): string {
  const up = Math.floor((state.now - state.startedAt) / 1000);
  return state.services
    .map((s) => {
      const nodes = s.nodes.map((n) => `${n.node}=${HEALTH_MARK[n.health]}/w${n.weight}`).join(" ");
      const total = s.pods.reduce((a, p) => a + p.connections, 0);
      const pods = s.pods.map((p) => `${p.pod.replace(/^.*\//, "")}=${p.connections}`).join(" ");
      return `[${up}s] ${s.service} ${s.listeners.join(",")} ${s.policy}${s.failOpen ? " fail-open" : ""} nodes: ${nodes || "none"} | last ${state.windowSeconds}s: ${total} conns ${pods}`;
    })
    .map((l) => `${l}\n`)
    .join("");
}
