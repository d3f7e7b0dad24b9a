/**
 * How `passlb import` prints its result: the LoadBalancerIPPools, LoadBalancerBGPPeers and
 * LoadBalancerBGPAdvertisements as
 * YAML documents (or a JSON List) for the user's repository, and the report as text for
 * standard error. Pure.
 */
import { stringify } from "yaml";
import { formatProblem } from "../k8s/decode.ts";
import { renderFieldOutcomes } from "./bgp-field-report.ts";
import type { ImportResult } from "./import-result.ts";

export function renderPools(result: ImportResult, format: "yaml" | "json"): string {
  const items = [...result.pools, ...result.bgpPeers, ...result.bgpAdvertisements];
  if (format === "json") return `${JSON.stringify({ apiVersion: "v1", kind: "List", items }, null, 2)}\n`;
  return items.map((p) => `---\n${stringify(p)}`).join("");
}

export function renderReport(result: ImportResult): string {
  const out: string[] = [];
  if (result.problems.length > 0) {
    out.push(
      `error: the input has ${result.problems.length} problem${result.problems.length === 1 ? "" : "s"}; nothing written:`,
    );
    for (const p of result.problems) out.push(`  ${formatProblem(p)}`);
    return `${out.join("\n")}\n`;
  }
  out.push(`passlb import: ${result.pools.length} LoadBalancerIPPool${result.pools.length === 1 ? "" : "s"}`);
  for (const p of result.pools) {
    const traits = [
      p.spec.autoAssign ? "autoAssign" : "on request only",
      ...(p.spec.avoidBuggyIPs ? ["avoidBuggyIPs"] : []),
      ...(p.spec.reserveFirstLast ? ["reserveFirstLast"] : []),
      ...(p.spec.allocation ? [`allocation ${JSON.stringify(p.spec.allocation)}`] : []),
      ...(p.spec.serviceSelector ? [`serviceSelector ${JSON.stringify(p.spec.serviceSelector)}`] : []),
      ...(p.spec.implicitSharing ? [`implicitSharing ${p.spec.implicitSharing}`] : []),
      ...(p.spec.disabled ? ["disabled"] : []),
    ];
    out.push(
      `  ${p.metadata.name} ← ${p.metadata.annotations["passlb.io/imported-from"]}: ${p.spec.addresses.join(", ")} (${traits.join(", ")})`,
    );
  }
  out.push(...bgpLines(result));
  if (result.notes.length > 0) {
    out.push("", "Not carried over as is:");
    for (const n of result.notes) out.push(`  ${n.kind}: ${n.subject}: ${n.message}`);
  }
  out.push("", `Services (${result.services.length}):`);
  for (const s of result.services) {
    out.push(`  ${s.service}: ${s.servedBy}`);
    for (const a of s.kept) out.push(`    keeps ${a}`);
    for (const a of s.notKept) out.push(`    cannot keep ${a.address}: ${a.why}`);
    for (const a of s.assigned) out.push(`    gets ${a}`);
    for (const k of s.honoured) out.push(`    honoured ${k}`);
    for (const k of s.ignored) out.push(`    ignored ${k}`);
    for (const k of s.unsupported) out.push(`    unsupported ${k}`);
    for (const e of s.errors) out.push(`    error ${e}`);
    for (const n of s.notes) out.push(`    note ${n}`);
  }
  const kept = result.services.reduce((n, s) => n + s.kept.length, 0);
  const lost = result.services.reduce((n, s) => n + s.notKept.length, 0);
  out.push(`  ${kept} address${kept === 1 ? "" : "es"} kept, ${lost} cannot be kept`);
  out.push("", "Foreign controllers still running:");
  if (result.controllers.length === 0) out.push("  none found in the input");
  for (const c of result.controllers) out.push(`  ${c.tool} ${c.role}: ${c.object}`);
  out.push("", "Cut-over order:");
  for (const [i, step] of result.cutover.entries()) out.push(`  ${i + 1}. ${step}`);
  return `${out.join("\n")}\n`;
}

/** The BGP objects, one line each (never a password), and every BGP field's outcome. */
function bgpLines(result: ImportResult): string[] {
  const out: string[] = [];
  const count = (n: number, kind: string) => `passlb import: ${n} ${kind}${n === 1 ? "" : "s"}`;
  if (result.bgpPeers.length > 0) out.push(count(result.bgpPeers.length, "LoadBalancerBGPPeer"));
  for (const p of result.bgpPeers) {
    // biome-ignore lint/suspicious/noExplicitAny: the spec as written, read for the summary
    const s = p.spec as Record<string, any>;
    const bfd =
      s.bfd?.enabled === false
        ? "no BFD"
        : `BFD ${s.bfd?.receiveInterval}/${s.bfd?.transmitInterval} ms × ${s.bfd?.detectMultiplier}`;
    const traits = [
      `AS ${s.localASN ?? s.myASN} → ${s.peerASN ?? s.dynamicASN}`,
      `hold ${s.holdTime}`,
      bfd,
      ...(s.password !== undefined ? ["MD5 (inline key)"] : []),
      ...(s.passwordSecret ? [`MD5 from Secret ${s.passwordSecret.namespace}/${s.passwordSecret.name}`] : []),
      ...(s.ebgpMultiHop ? ["multihop"] : []),
      ...(s.sourceAddress ? [`source ${s.sourceAddress}`] : []),
      ...(s.enableGracefulRestart ? ["graceful restart"] : []),
      ...(s.vrf ? [`vrf ${s.vrf}`] : []),
      ...(s.dualStackAddressFamily ? ["dual stack"] : []),
      ...(s.nodeSelectors ? [`nodeSelectors ${JSON.stringify(s.nodeSelectors)}`] : []),
    ];
    out.push(
      `  ${p.metadata.name} ← ${p.metadata.annotations["passlb.io/imported-from"]}: ${s.peerAddress}${s.peerPort ? ` port ${s.peerPort}` : ""} (${traits.join(", ")})`,
    );
  }
  if (result.bgpAdvertisements.length > 0)
    out.push(count(result.bgpAdvertisements.length, "LoadBalancerBGPAdvertisement"));
  for (const a of result.bgpAdvertisements) {
    // biome-ignore lint/suspicious/noExplicitAny: the spec as written, read for the summary
    const s = a.spec as Record<string, any>;
    const traits = [
      `pools ${s.ipAddressPools?.join(" ") ?? (s.ipAddressPoolSelectors ? "by selector" : "all")}`,
      `peers ${s.peers?.join(" ") || "all"}`,
      ...(s.aggregationLength !== undefined ? [`/${s.aggregationLength}`] : []),
      ...(s.aggregationLengthV6 !== undefined ? [`/${s.aggregationLengthV6} (IPv6)`] : []),
      ...(s.communities ? [`communities ${s.communities.join(" ")}`] : []),
      ...(s.localPref !== undefined ? [`localPref ${s.localPref}`] : []),
      ...(s.nodeSelectors ? [`nodeSelectors ${JSON.stringify(s.nodeSelectors)}`] : []),
    ];
    out.push(
      `  ${a.metadata.name} ← ${a.metadata.annotations["passlb.io/imported-from"]}: ${traits.join(", ")}`,
    );
  }
  out.push(...renderFieldOutcomes(result.bgpFields));
  return out;
}
