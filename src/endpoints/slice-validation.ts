/**
 * Would the API server accept this slice write? The discovery/v1 rules of
 * kubernetes pkg/apis/discovery/validation/validation.go (`k8s/validate.ts` `validateEndpointSlice`: at most
 * 1000 endpoints, 1–100 valid addresses each and none unspecified, loopback or link-local, DNS-label
 * hostnames, unique port names), applied to the slices a controller is about to write, so a
 * Pod with such an address shows up as a finding instead of a silently failing sync.
 *
 * For speed, an endpoint whose only address is a plain dotted IPv4 address outside the
 * special ranges (checked on the text) and which has no hostname skips the full check; every
 * other endpoint, and the slice itself, goes through `validateEndpointSlice`.
 */
import type { EndpointSlice } from "../k8s/objects.ts";
import { validateEndpointSlice } from "../k8s/validate.ts";
import { DOTTED_IPV4 } from "./pod-endpoints.ts";
import type { SliceFinding } from "./slice-writes.ts";

const SPECIAL_PREFIXES = ["0.", "127.", "169.254.", "224.0.0."];

const plainIPv4 = (a: string) => DOTTED_IPV4.test(a) && !SPECIAL_PREFIXES.some((p) => a.startsWith(p));

export function sliceWriteFindings(subject: string, slices: readonly EndpointSlice[]): SliceFinding[] {
  const findings: SliceFinding[] = [];
  for (const slice of slices) {
    const all = slice.endpoints ?? [];
    const index: number[] = [];
    const endpoints = all.filter((ep, i) => {
      const plain =
        slice.addressType === "IPv4" &&
        ep.addresses.length === 1 &&
        !ep.hostname &&
        plainIPv4(ep.addresses[0]!);
      if (!plain) index.push(i);
      return !plain;
    });
    // A create has only generateName; the API server appends 5 characters.
    const name = slice.metadata.name || `${slice.metadata.generateName ?? ""}xxxxx`;
    const problems = validateEndpointSlice({ ...slice, metadata: { ...slice.metadata, name }, endpoints });
    if (all.length > 1000)
      problems.push({
        path: ["endpoints"],
        message: `at most 1000 endpoints are allowed (got ${all.length})`,
      });
    for (const p of problems) {
      const path =
        p.path[0] === "endpoints" && typeof p.path[1] === "number"
          ? ["endpoints", index[p.path[1]]!, ...p.path.slice(2)]
          : p.path;
      findings.push({
        code: "endpointslice_write_rejected",
        severity: "error",
        subject,
        message: `the API server would reject EndpointSlice ${slice.metadata.name ?? `${slice.metadata.generateName ?? ""}…`}: ${path.join(".")} ${p.message}`,
      });
    }
  }
  return findings;
}
