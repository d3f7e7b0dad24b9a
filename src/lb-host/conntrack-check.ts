/**
 * The LB host's conntrack part (issue 16): reads the host's conntrack sizes, checks the flow
 * table against them (lb-host/nftables/flow-table-sizing.ts), writes `--conntrack-max` when it is
 * asked for and differs, and reports each finding. The decisions are pure
 * (conntrack-sizing.ts); this reads, writes and reports.
 *
 * "not_loaded": nf_conntrack is not loaded yet (it may load only with the table's `ct mark`
 * rules), so the host checks once more after the first sync. "failed": --conntrack-max could
 * not be applied, and the host does not start.
 */

import type { ConntrackSysctl } from "../drivers/conntrack-sysctl.ts";
import { conntrackSizing } from "./conntrack-sizing.ts";
import { flowTableSizing } from "./nftables/flow-table-sizing.ts";
import type { FlowTableConfig } from "./nftables/render/flow-map.ts";

export interface ConntrackCheckOptions {
  readonly conntrack: ConntrackSysctl;
  /** --conntrack-max */
  readonly max: number | undefined;
  readonly flowTable: FlowTableConfig;
  readonly expectedFlows: number | undefined;
  /** one line for the operator (stderr) */
  readonly log: (line: string) => void;
  /** a warning for the dashboard's events */
  readonly warn: (code: string, message: string) => void;
}

export async function checkConntrack(o: ConntrackCheckOptions): Promise<"ok" | "not_loaded" | "failed"> {
  let observed: Awaited<ReturnType<ConntrackSysctl["read"]>>;
  try {
    observed = await o.conntrack.read();
  } catch (e) {
    o.log(`passlb lb: warning: ${(e as Error).message}`);
    return o.max === undefined ? "ok" : "failed";
  }
  const flowFindings = flowTableSizing({
    flowTable: o.flowTable,
    conntrackMax: observed ? (o.max ?? observed.max) : undefined,
    expectedFlows: o.expectedFlows,
  });
  for (const f of flowFindings) {
    o.log(`passlb lb: ${f.severity} ${f.code}: ${f.message}`);
    o.warn(f.code, f.message);
  }
  if (!observed) return "not_loaded";
  const plan = conntrackSizing(observed, o.max);
  if (plan.write !== undefined) {
    try {
      await o.conntrack.writeMax(plan.write);
      o.log(`passlb lb: nf_conntrack_max set to ${plan.write} (was ${observed.max})`);
    } catch (e) {
      o.log(`error: --conntrack-max: ${(e as Error).message}`);
      return "failed";
    }
  }
  for (const f of plan.findings) {
    o.log(`passlb lb: ${f.severity} ${f.code}: ${f.message}`);
    if (f.severity === "warning") o.warn(f.code, f.message);
  }
  return "ok";
}
