/**
 * `passlb endpointslices reconcile|mirror|merge -f …`: what the EndpointSlice controller,
 * the mirroring controller and a node's proxy would do with the manifests given
 * (docs/endpointslices.md). JSON and YAML carry full objects in write order; text is a short
 * summary per Service. Exit 0 clean, 1 when a finding has severity error, 2 on invalid input
 * or options.
 */
import type { Command } from "commander";
import { stringify } from "yaml";
import { IP_FAMILIES } from "../endpoints/merge-by-family.ts";
import { proxyView } from "../endpoints/proxy-view.ts";
import { DEFAULT_MAX_ENDPOINTS_PER_SLICE } from "../endpoints/reconciler.ts";
import type { SliceFinding } from "../endpoints/slice-writes.ts";
import {
  mirrorSnapshot,
  reconcileSnapshot,
  type ServiceSliceWrites,
  slicesForSnapshot,
} from "../endpoints/snapshot-slices.ts";
import type { EndpointSlice } from "../k8s/objects.ts";
import type { IpFamily } from "../net/ip.ts";
import { type CliIo, loadSnapshot } from "./load-input.ts";

const collect = (value: string, previous: string[]) => [...previous, value];
type Format = "json" | "yaml" | "text";

interface CommonOptions {
  filename: string[];
  output: string;
}

function format(value: string, io: CliIo): Format | undefined {
  if (value === "json" || value === "yaml" || value === "text") return value;
  io.stderr(`error: --output must be json, yaml or text (got "${value}")\n`);
  return undefined;
}

function render(data: unknown, fmt: Exclude<Format, "text">): string {
  return fmt === "json" ? `${JSON.stringify(data, null, 2)}\n` : stringify(data);
}

const sliceName = (s: EndpointSlice) => s.metadata.name ?? `${s.metadata.generateName ?? ""}<generated>`;
const portsText = (s: EndpointSlice) =>
  (s.ports ?? []).map((p) => `${p.name ? `${p.name}:` : ""}${p.port}/${p.protocol}`).join(",") || "-";

function writesText(results: readonly ServiceSliceWrites[]): string {
  const lines: string[] = [];
  for (const r of results) {
    const n = r.create.length + r.update.length + r.delete.length;
    lines.push(
      `${r.service}: ${n === 0 ? "no writes" : `${r.create.length} create, ${r.update.length} update, ${r.delete.length} delete`}`,
    );
    for (const [verb, list] of [
      ["create", r.create],
      ["update", r.update],
      ["delete", r.delete],
    ] as const)
      for (const s of list)
        lines.push(
          `  ${verb} ${sliceName(s)} ${s.addressType} ports ${portsText(s)} endpoints ${(s.endpoints ?? []).length}`,
        );
    for (const f of r.findings) lines.push(`  ${f.severity} ${f.code}: ${f.message}`);
  }
  return lines.length > 0 ? `${lines.join("\n")}\n` : "no Services to reconcile\n";
}

const hasError = (findings: readonly SliceFinding[]) => findings.some((f) => f.severity === "error");

function addCommon(cmd: Command): Command {
  return cmd
    .option(
      "-f, --filename <path>",
      "manifest file, directory (recursive) or - for stdin; repeatable",
      collect,
      [],
    )
    .option("-o, --output <format>", "json, yaml or text", "json");
}

export function registerEndpointSlicesCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
): void {
  const group = program
    .command("endpointslices")
    .description("show the EndpointSlices Kubernetes would write, and what a node's proxy makes of them");

  addCommon(
    group
      .command("reconcile")
      .description("the EndpointSlice controller's writes for every Service with a selector"),
  )
    .option(
      "--max-endpoints-per-slice <n>",
      "endpoints per slice, 1-1000",
      String(DEFAULT_MAX_ENDPOINTS_PER_SLICE),
    )
    .option("--trigger-time <rfc3339>", "value of the last-change-trigger-time annotation on written slices")
    .action(async (opts: CommonOptions & { maxEndpointsPerSlice: string; triggerTime?: string }) => {
      const fmt = format(opts.output, io);
      const max = Number(opts.maxEndpointsPerSlice);
      if (!/^[0-9]+$/.test(opts.maxEndpointsPerSlice) || max < 1 || max > 1000) {
        io.stderr(
          `error: --max-endpoints-per-slice must be an integer from 1 to 1000 (got "${opts.maxEndpointsPerSlice}")\n`,
        );
        return setExitCode(2);
      }
      if (!fmt) return setExitCode(2);
      const snapshot = await loadSnapshot(opts.filename, io, { quiet: fmt !== "text" });
      if (!snapshot) return setExitCode(2);
      const results = reconcileSnapshot(snapshot, {
        maxEndpointsPerSlice: max,
        ...(opts.triggerTime !== undefined && { triggerTime: opts.triggerTime }),
      });
      io.stdout(fmt === "text" ? writesText(results) : render({ services: results }, fmt));
      setExitCode(hasError(results.flatMap((r) => r.findings)) ? 1 : 0);
    });

  addCommon(
    group.command("mirror").description("the mirroring controller's writes for every Endpoints object"),
  ).action(async (opts: CommonOptions) => {
    const fmt = format(opts.output, io);
    if (!fmt) return setExitCode(2);
    const snapshot = await loadSnapshot(opts.filename, io, { quiet: fmt !== "text" });
    if (!snapshot) return setExitCode(2);
    const results = mirrorSnapshot(snapshot);
    io.stdout(fmt === "text" ? writesText(results) : render({ services: results }, fmt));
    setExitCode(hasError(results.flatMap((r) => r.findings)) ? 1 : 0);
  });

  addCommon(
    group
      .command("merge")
      .description(
        "the endpoints a node's proxy would use per Service port, after merging the slices of each IP family",
      ),
  )
    .option("--node <name>", "the node whose proxy to show (local endpoints, health check count)")
    .option(
      "--family <family>",
      "IPv4 or IPv6: only that family's proxier (default: both, one after the other)",
    )
    .action(async (opts: CommonOptions & { node?: string; family?: string }) => {
      const fmt = format(opts.output, io);
      if (!fmt) return setExitCode(2);
      if (opts.family !== undefined && opts.family !== "IPv4" && opts.family !== "IPv6") {
        io.stderr(`error: --family must be IPv4 or IPv6 (got "${opts.family}")\n`);
        return setExitCode(2);
      }
      const families: readonly IpFamily[] = opts.family === undefined ? IP_FAMILIES : [opts.family];
      const snapshot = await loadSnapshot(opts.filename, io, { quiet: fmt !== "text" });
      if (!snapshot) return setExitCode(2);
      const computed = slicesForSnapshot(snapshot);
      const view = proxyView(computed.endpointSlices, snapshot.nodes, opts.node, families);
      const findings = [...computed.findings, ...view.findings];
      if (fmt !== "text") io.stdout(render({ services: view.services, findings }, fmt));
      else {
        const lines: string[] = [];
        for (const s of view.services)
          for (const p of s.ports)
            lines.push(
              `${s.service} ${s.family} ${p.name || "-"}/${p.protocol}: cluster [${p.clusterEndpoints.join(" ")}]` +
                (opts.node === undefined
                  ? ""
                  : ` local [${p.localEndpoints.join(" ")}] health-check localEndpoints=${p.localReadyEndpoints}`),
            );
        for (const f of findings) lines.push(`${f.severity} ${f.code} (${f.subject}): ${f.message}`);
        io.stdout(lines.length > 0 ? `${lines.join("\n")}\n` : "no Services with endpoints\n");
      }
      setExitCode(hasError(findings) ? 1 : 0);
    });
}
