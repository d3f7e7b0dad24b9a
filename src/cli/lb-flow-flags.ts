/**
 * `passlb lb`'s flow-table flags (docs/dataplane-nftables.md "Flow pinning"): parsed into
 * the flow maps' size and timeout and the expected flow count, or a usage message.
 * Does not: check them against conntrack (lb-host/nftables/flow-table-sizing.ts).
 */
import { DEFAULT_FLOW_TABLE, type FlowTableConfig } from "../lb-host/nftables/render/flow-map.ts";

export interface FlowFlags {
  flowTableSize?: string;
  flowTimeout?: string;
  expectedFlows?: string;
}

export interface FlowSettings {
  readonly flowTable: FlowTableConfig;
  readonly expectedFlows: number | undefined;
}

/** the kernel's set size is a u32; an nft timeout beyond ~49 days overflows its ms counter */
const MAX_SIZE = 0xffffffff;
const MAX_TIMEOUT_S = 4_000_000;

export function addFlowOptions(command: import("commander").Command): void {
  command
    .option(
      "--flow-table-size <n>",
      `nftables: TCP flows the flow table pins per family (${DEFAULT_FLOW_TABLE.size})`,
    )
    .option(
      "--flow-timeout <s>",
      `nftables: seconds a flow's pin lives after its last packet (${DEFAULT_FLOW_TABLE.timeoutSeconds})`,
    )
    .option(
      "--expected-flows <n>",
      "nftables: concurrent flows this host must hold; warns at start when the flow table or nf_conntrack_max is smaller",
    );
}

export function flowSettingsFromFlags(flags: FlowFlags): FlowSettings | string {
  const int = (text: string | undefined, fallback: number | undefined, max: number, name: string) => {
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < 1 || n > max)
      return `${name} must be an integer 1..${max}, got ${text}`;
    return n;
  };
  const size = int(flags.flowTableSize, DEFAULT_FLOW_TABLE.size, MAX_SIZE, "--flow-table-size");
  const timeout = int(flags.flowTimeout, DEFAULT_FLOW_TABLE.timeoutSeconds, MAX_TIMEOUT_S, "--flow-timeout");
  const expected = int(flags.expectedFlows, undefined, Number.MAX_SAFE_INTEGER, "--expected-flows");
  for (const v of [size, timeout, expected]) if (typeof v === "string") return v;
  return {
    flowTable: { size: size as number, timeoutSeconds: timeout as number },
    expectedFlows: expected as number | undefined,
  };
}
