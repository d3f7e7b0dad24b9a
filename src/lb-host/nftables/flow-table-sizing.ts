/**
 * Flow table sizing on the LB host (issue 25; docs/dataplane-nftables.md "Flow pinning").
 * Pure: the configured sizes in, findings out; `passlb lb` prints them at start.
 *
 * Every TCP flow through the host holds one entry in its family's flow map (from its SYN
 * until `timeout` after its last packet) and one conntrack entry (from its first ACK;
 * UDP flows hold a conntrack entry only). A full flow map admits no new entry: the flow's
 * packets are then hashed one by one on the current table, which holds while the table
 * does not change; a full conntrack table drops new flows' packets. So both must hold the
 * flows the host is expected to carry at once.
 *
 * Does not: read /proc (conntrack-sysctl.ts) or count entries (flow-table-usage.ts).
 */
import type { FlowTableConfig } from "./render/flow-map.ts";

export interface FlowTableFinding {
  readonly code: "flow_table_below_expected" | "conntrack_below_expected" | "flow_table_below_conntrack";
  readonly severity: "warning";
  readonly message: string;
}

export interface FlowSizingInput {
  readonly flowTable: FlowTableConfig;
  /** nf_conntrack_max as it will be (observed, or --conntrack-max); undefined: not loaded */
  readonly conntrackMax: number | undefined;
  /** --expected-flows: concurrent flows the host must hold (per family, at most) */
  readonly expectedFlows: number | undefined;
}

export function flowTableSizing(input: FlowSizingInput): FlowTableFinding[] {
  const { flowTable, conntrackMax, expectedFlows } = input;
  const out: FlowTableFinding[] = [];
  const size = flowTable.size;
  if (expectedFlows !== undefined) {
    if (size < expectedFlows)
      out.push({
        code: "flow_table_below_expected",
        severity: "warning",
        message: `the flow table holds ${size} flows per family (--flow-table-size), fewer than --expected-flows ${expectedFlows}: beyond that, new TCP flows are not pinned and may move to another node when the Maglev table changes; raise --flow-table-size to at least ${expectedFlows}`,
      });
    if (conntrackMax !== undefined && conntrackMax < expectedFlows)
      out.push({
        code: "conntrack_below_expected",
        severity: "warning",
        message: `nf_conntrack_max ${conntrackMax} is below --expected-flows ${expectedFlows}: when conntrack is full, packets of new flows are dropped; raise it (--conntrack-max ${expectedFlows}) or shorten the idle timeouts (docs/dataplane-nftables.md "Conntrack sizing")`,
      });
  } else if (conntrackMax !== undefined && size < conntrackMax)
    out.push({
      code: "flow_table_below_conntrack",
      severity: "warning",
      message: `the flow table holds ${size} flows per family (--flow-table-size), fewer than nf_conntrack_max ${conntrackMax}: the host may carry more TCP flows than it can pin; raise --flow-table-size to ${conntrackMax} or give --expected-flows`,
    });
  return out;
}
