/**
 * Would the API server accept this slice write? The discovery/v1 rules of
 * specs/endpointslice.md §5 (`k8s/validate.ts` `validateEndpointSlice`: at most 1000 endpoints,
 * 1–100 valid addresses each and none unspecified, loopback or link-local, DNS-label
 * hostnames, unique port names), applied to the slices a controller is about to write, so a
 * Pod with such an address shows up as a finding instead of a silently failing sync.
 */
import type { EndpointSlice } from "../k8s/objects.ts";
import { validateEndpointSlice } from "../k8s/validate.ts";
import type { SliceFinding } from "./slice-writes.ts";

export function sliceWriteFindings(subject: string, slices: readonly EndpointSlice[]): SliceFinding[] {
  const findings: SliceFinding[] = [];
  for (const slice of slices) {
    // A create has only generateName; the API server appends 5 characters.
    const named = slice.metadata.name
      ? slice
      : { ...slice, metadata: { ...slice.metadata, name: `${slice.metadata.generateName ?? ""}xxxxx` } };
    for (const p of validateEndpointSlice(named))
      findings.push({
        code: "endpointslice_write_rejected",
        severity: "error",
        subject,
        message: `the API server would reject EndpointSlice ${slice.metadata.name ?? `${slice.metadata.generateName ?? ""}…`}: ${p.path.join(".")} ${p.message}`,
      });
  }
  return findings;
}
