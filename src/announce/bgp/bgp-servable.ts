/**
 * Which VIPs this LB host can serve now (issue #19 §1; specs/scale-out.md §E.6 "Announce a
 * VIP only when the tables match"). Pure: the planned VIPs and what the data plane last
 * programmed in, one VipServability per VIP out.
 *
 * A VIP is servable when the last data-plane pass succeeded (so the kernel holds the current
 * plan's Maglev tables, built from the same manifests, seed and M as on every other LB host),
 * and at least one Service on it is programmed with that VIP, was not held at its last good
 * state because of an input problem, and has a listener with a healthy backend (not
 * fail-open: fail-open means no member is healthy, forwarding-state.ts). A VIP several
 * Services share (different ports) is servable when any of them is.
 * Evaluated after each pass, never in between: a health change being programmed must not
 * withdraw every VIP for the few milliseconds of the pass.
 */
import type { ServiceForwarding } from "../../dataplane/forwarding-state.ts";
import type { IpFamily, VipServability } from "./bgp-types.ts";

export interface PlannedVips {
  readonly service: string;
  readonly vips: readonly { readonly address: string; readonly family: IpFamily }[];
}

export interface ServabilityInput {
  readonly planned: readonly PlannedVips[];
  readonly programmed: readonly ServiceForwarding[];
  /** the last data-plane pass succeeded */
  readonly lastPassOk: boolean;
  /** Services the data plane kept at their last good state (input problem) */
  readonly kept: ReadonlySet<string>;
}

function serviceVerdict(
  service: string,
  vip: string,
  input: ServabilityInput,
): { ok: boolean; reason: string } {
  if (!input.lastPassOk) return { ok: false, reason: "the last data-plane sync failed" };
  if (input.kept.has(service)) return { ok: false, reason: `${service} kept its last good data plane` };
  const fw = input.programmed.find((f) => f.service === service);
  if (!fw?.plan.vips.some((v) => v.address === vip))
    return { ok: false, reason: `${service} is not programmed with this VIP yet` };
  const healthy = fw.listeners.filter((l) => !l.failOpen && l.backends.length > 0);
  if (healthy.length === 0) return { ok: false, reason: `${service}: no healthy backend on any listener` };
  const nodes = new Set(healthy.flatMap((l) => l.backends.map((b) => b.node)));
  return { ok: true, reason: `${service}: ${nodes.size} healthy node(s)` };
}

export function vipServability(input: ServabilityInput): VipServability[] {
  const byVip = new Map<string, { family: IpFamily; services: string[] }>();
  for (const p of input.planned)
    for (const v of p.vips) {
      const entry = byVip.get(v.address) ?? { family: v.family, services: [] };
      if (!entry.services.includes(p.service)) entry.services.push(p.service);
      byVip.set(v.address, entry);
    }
  return [...byVip]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([vip, { family, services }]) => {
      const verdicts = services.map((s) => serviceVerdict(s, vip, input));
      const good = verdicts.filter((v) => v.ok);
      return {
        vip,
        family,
        services,
        servable: good.length > 0,
        reason: (good.length > 0 ? good : verdicts).map((v) => v.reason).join("; "),
      };
    });
}
