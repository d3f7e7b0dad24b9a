/**
 * Port and protocol helpers shared by forwarding rules and firewalls (docs/providers-gke.md):
 * which protocols a Service uses, consecutive ports collapsed into GCE ranges (80,81,82,443 →
 * "80-82","443"), and min–max port ranges. Pure data, no GCE rules of their own.
 */
import type { Service } from "../../k8s/objects.ts";

export type L4Protocol = "TCP" | "UDP";

export function servicePorts(service: Service): { protocol: L4Protocol; port: number }[] {
  return service.spec.ports.map((p) => ({ protocol: p.protocol === "UDP" ? "UDP" : "TCP", port: p.port }));
}

/** Distinct protocols in port order. */
export function protocolsOf(service: Service): L4Protocol[] {
  return [...new Set(servicePorts(service).map((p) => p.protocol))];
}

export function collapsePorts(ports: readonly number[]): string[] {
  const sorted = [...new Set(ports)].sort((a, b) => a - b);
  const out: string[] = [];
  let start: number | undefined;
  let prev = -1;
  for (const p of sorted) {
    if (start !== undefined && p === prev + 1) {
      prev = p;
      continue;
    }
    if (start !== undefined) out.push(start === prev ? `${start}` : `${start}-${prev}`);
    start = p;
    prev = p;
  }
  if (start !== undefined) out.push(start === prev ? `${start}` : `${start}-${prev}`);
  return out;
}

export function minMaxRange(ports: readonly number[]): string {
  return `${Math.min(...ports)}-${Math.max(...ports)}`;
}
