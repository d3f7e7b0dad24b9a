/**
 * Other implementations' pools as LoadBalancerIPPools, named after them (docs/migrate.md
 * "`passlb import`"), with a note for everything that is not carried over. Pure: decoded objects in,
 * plain objects out; `import-result.ts` puts them together.
 *
 *   - MetalLB IPAddressPool → same name; autoAssign, avoidBuggyIPs, serviceAllocation as
 *     `allocation`; nothing reserved (MetalLB hands out network and broadcast addresses).
 *   - MetalLB ≤ v0.12 ConfigMap `address-pools` → the same, by name.
 *   - Cilium pool → same name; blocks (cidr, start/stop) as addresses; serviceSelector;
 *     disabled; `allowFirstLastIPs: No` → reserveFirstLast.
 *   - kube-vip ConfigMap → one pool per `cidr-*`/`range-*` key, `kube-vip-<key>`; a
 *     `<ns>` key is `allocation.namespaces: [ns]` (tried before the global ones, as
 *     getConfig prefers it); IPv4 CIDRs lose network and broadcast addresses except /31 and
 *     /32 (pkg/ipam/addressbuilder.go), written as explicit ranges; `allow-share-*: true` →
 *     implicitSharing: portDisjoint.
 *   - PureLB ServiceGroup (local) → same name; autoAssign only for `default` and groups
 *     bound to namespaces (which become allocation.namespaces).
 *   - OpenELB Eip → same name; autoAssign only for the default Eip and Eips bound to
 *     namespaces; disable → disabled.
 * Not here: reading files or the cluster (cli/), the per-Service report (import-result.ts).
 */
import type { LabelSelector } from "../k8s/objects.ts";
import { cidrRange, formatIp, parseCidr } from "../net/ip.ts";
import { poolAddressRange } from "../plan/address-pools.ts";
import type { CiliumPool, ConfigMap, Eip, IPAddressPool, ServiceGroup } from "./foreign-objects.ts";
import { MetallbLegacyConfigSchema } from "./foreign-objects.ts";

export type Tool = "metallb" | "cilium" | "kube-vip" | "purelb" | "openelb";

export interface ImportedPoolSpec {
  addresses: string[];
  autoAssign: boolean;
  avoidBuggyIPs?: boolean;
  reserveFirstLast?: boolean;
  namespaces?: string[];
  serviceSelector?: LabelSelector;
  allocation?: {
    priority?: number;
    namespaces?: string[];
    namespaceSelectors?: LabelSelector[];
    serviceSelectors?: LabelSelector[];
  };
  implicitSharing?: "portDisjoint";
  disabled?: boolean;
}

export interface ImportedPool {
  readonly apiVersion: "passlb.io/v1alpha1";
  readonly kind: "LoadBalancerIPPool";
  readonly metadata: {
    readonly name: string;
    readonly labels: Record<string, string>;
    readonly annotations: Record<string, string>;
  };
  readonly spec: ImportedPoolSpec;
}

/** A finding of the conversion: what was carried over differently, or not at all. */
export interface ImportNote {
  /** `IPAddressPool metallb-system/prod` */
  readonly subject: string;
  readonly kind: "converted" | "not imported" | "kept for later" | "warning";
  readonly message: string;
}

/** A problem with a field of an input object (file, object and field are added by the caller). */
export interface FieldIssue {
  readonly path: (string | number)[];
  readonly message: string;
}

export interface Converted {
  readonly pools: ImportedPool[];
  readonly notes: ImportNote[];
  readonly issues: FieldIssue[];
}

export const IMPORTED_FROM = "passlb.io/imported-from";

function pool(tool: Tool, name: string, from: string, spec: ImportedPoolSpec): ImportedPool {
  return {
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name, labels: { [IMPORTED_FROM]: tool }, annotations: { [IMPORTED_FROM]: from } },
    spec,
  };
}

/** `addresses` entries as passlb writes them: ranges without spaces; problems by index. */
function addressEntries(texts: readonly string[], path: (string | number)[], issues: FieldIssue[]): string[] {
  const out: string[] = [];
  texts.forEach((t, i) => {
    const entry = t.trim().replace(/\s*-\s*/, "-");
    if (poolAddressRange(entry)) out.push(entry);
    else issues.push({ path: [...path, i], message: `"${t}" is not a CIDR, an address range or an address` });
  });
  return out;
}

export function fromMetallbPool(p: IPAddressPool): Converted {
  const issues: FieldIssue[] = [];
  const notes: ImportNote[] = [];
  const subject = `IPAddressPool ${p.metadata.namespace ?? "default"}/${p.metadata.name}`;
  const addresses = addressEntries(p.spec.addresses, ["spec", "addresses"], issues);
  const sa = p.spec.serviceAllocation;
  const spec: ImportedPoolSpec = {
    addresses,
    autoAssign: p.spec.autoAssign ?? true,
    ...(p.spec.avoidBuggyIPs && { avoidBuggyIPs: true }),
    ...(sa && {
      allocation: {
        ...(sa.priority !== undefined && { priority: sa.priority }),
        ...(sa.namespaces?.length && { namespaces: sa.namespaces }),
        ...(sa.namespaceSelectors?.length && { namespaceSelectors: sa.namespaceSelectors }),
        ...(sa.serviceSelectors?.length && { serviceSelectors: sa.serviceSelectors }),
      },
    }),
  };
  return { pools: [pool("metallb", p.metadata.name, subject, spec)], notes, issues };
}

export function fromMetallbConfigMap(cm: ConfigMap, parseYaml: (text: string) => unknown): Converted {
  const subject = `ConfigMap ${cm.metadata.namespace ?? "default"}/${cm.metadata.name}`;
  const issues: FieldIssue[] = [];
  const notes: ImportNote[] = [];
  let raw: unknown;
  try {
    raw = parseYaml(cm.data?.config ?? "");
  } catch (e) {
    return {
      pools: [],
      notes,
      issues: [
        { path: ["data", "config"], message: `not valid YAML: ${(e as Error).message.split("\n")[0]}` },
      ],
    };
  }
  const parsed = MetallbLegacyConfigSchema.safeParse(raw ?? {});
  if (!parsed.success)
    return {
      pools: [],
      notes,
      issues: parsed.error.issues.map((i) => ({
        path: ["data", "config", ...i.path.filter((x): x is string | number => typeof x !== "symbol")],
        message: i.message,
      })),
    };
  const pools: ImportedPool[] = [];
  parsed.data["address-pools"].forEach((p, i) => {
    const addresses = addressEntries(
      p.addresses,
      ["data", "config", "address-pools", i, "addresses"],
      issues,
    );
    pools.push(
      pool("metallb", p.name, `${subject} address-pools[${i}]`, {
        addresses,
        autoAssign: p["auto-assign"] ?? true,
        ...(p["avoid-buggy-ips"] && { avoidBuggyIPs: true }),
      }),
    );
    if (p.protocol === "bgp")
      notes.push({
        subject: `${subject} address-pools[${i}]`,
        kind: "kept for later",
        message: `pool ${p.name} was announced over BGP: its addresses are imported; passlb has no BGP announcement yet`,
      });
  });
  if (parsed.data.peers?.length)
    notes.push({
      subject,
      kind: "kept for later",
      message: `${parsed.data.peers.length} BGP peer(s): not imported, kept for later (passlb has no BGP yet)`,
    });
  return { pools, notes, issues };
}

export function fromCiliumPool(p: CiliumPool): Converted {
  const subject = `CiliumLoadBalancerIPPool ${p.metadata.name}`;
  const issues: FieldIssue[] = [];
  const notes: ImportNote[] = [];
  const field = p.spec.blocks ? "blocks" : "cidrs";
  const blocks = p.spec.blocks ?? p.spec.cidrs ?? [];
  if (!p.spec.blocks && p.spec.cidrs)
    notes.push({
      subject,
      kind: "converted",
      message: "spec.cidrs is the deprecated name of spec.blocks (1.13)",
    });
  if (blocks.length === 0)
    issues.push({ path: ["spec", "blocks"], message: "is required (at least one block)" });
  const texts: string[] = [];
  blocks.forEach((b, i) => {
    if (b.cidr) texts.push(b.cidr);
    else if (b.start) texts.push(b.stop ? `${b.start}-${b.stop}` : b.start);
    else issues.push({ path: ["spec", field, i], message: "needs cidr, or start (and stop)" });
  });
  const addresses = addressEntries(texts, ["spec", field], issues);
  if (p.apiVersion === "cilium.io/v2alpha1" && p.spec.allowFirstLastIPs === undefined)
    notes.push({
      subject,
      kind: "warning",
      message:
        "allowFirstLastIPs is unset: Cilium 1.15 reserved the first and last address of each CIDR then, later versions do not; passlb does not (addresses in use are adopted either way)",
    });
  const spec: ImportedPoolSpec = {
    addresses,
    autoAssign: true,
    ...(p.spec.allowFirstLastIPs === "No" && { reserveFirstLast: true }),
    ...(p.spec.serviceSelector && { serviceSelector: p.spec.serviceSelector }),
    ...(p.spec.disabled && { disabled: true }),
  };
  return { pools: [pool("cilium", p.metadata.name, subject, spec)], notes, issues };
}

/** kube-vip's IPv4 CIDRs exclude network and broadcast (except /31, /32): as a range. */
function kubeVipEntry(text: string): string {
  const c = parseCidr(text.trim());
  if (c?.family !== "IPv4" || c.prefix >= 31) return text.trim();
  const r = cidrRange(c);
  return `${formatIp({ family: "IPv4", value: r.first + 1n })}-${formatIp({ family: "IPv4", value: r.last - 1n })}`;
}

export function fromKubeVipConfigMap(cm: ConfigMap): Converted {
  const subject = `ConfigMap ${cm.metadata.namespace ?? "default"}/${cm.metadata.name}`;
  const issues: FieldIssue[] = [];
  const notes: ImportNote[] = [];
  const pools: ImportedPool[] = [];
  const data = cm.data ?? {};
  for (const [key, value] of Object.entries(data).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const m = /^(cidr|range)-(.+)$/.exec(key);
    if (!m) {
      if (/^allow-share-/.test(key)) continue;
      notes.push({
        subject,
        kind: "not imported",
        message: `${key}: ${key.startsWith("interface-") ? "the interface is the LB hosts' --interface (docs/vip-announce.md)" : key === "search-order" ? "passlb allocates in ascending order; addresses in use are adopted" : "no passlb equivalent"}`,
      });
      continue;
    }
    const scope = m[2]!;
    const texts = value
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean);
    const dhcp = texts.filter((t) => t === "0.0.0.0/32");
    if (dhcp.length > 0)
      notes.push({ subject, kind: "not imported", message: `${key}: 0.0.0.0/32 (DHCP) is not supported` });
    const rest = texts.filter((t) => t !== "0.0.0.0/32");
    const entries = m[1] === "cidr" ? rest.map(kubeVipEntry) : rest;
    const addresses = addressEntries(entries, ["data", key], issues);
    if (addresses.length === 0) continue;
    const share = data[`allow-share-${scope}`] === "true";
    pools.push(
      pool("kube-vip", `kube-vip-${key}`, `${subject} ${key}`, {
        addresses,
        autoAssign: true,
        ...(scope !== "global" && { allocation: { namespaces: [scope] } }),
        ...(share && { implicitSharing: "portDisjoint" as const }),
      }),
    );
  }
  return { pools, notes, issues };
}

export function fromServiceGroup(g: ServiceGroup): Converted {
  const subject = `ServiceGroup ${g.metadata.namespace ?? "default"}/${g.metadata.name}`;
  const issues: FieldIssue[] = [];
  const notes: ImportNote[] = [];
  const local = g.spec.local;
  if (!local) {
    const kind = g.spec.remote
      ? "remote"
      : g.spec.netbox
        ? "netbox"
        : g.spec.external
          ? "external"
          : undefined;
    if (!kind)
      return { pools: [], notes, issues: [{ path: ["spec"], message: "needs local, remote or netbox" }] };
    notes.push({
      subject,
      kind: kind === "remote" ? "kept for later" : "not imported",
      message:
        kind === "remote"
          ? "a remote (routed, BGP) group: not imported until passlb announces over BGP"
          : `a ${kind} group: addresses come from an external IPAM, which passlb does not read`,
    });
    return { pools: [], notes, issues };
  }
  const texts: string[] = [];
  if (local.pool) texts.push(local.pool);
  if (local.v4pool) texts.push(local.v4pool.pool);
  for (const p of local.v4pools ?? []) texts.push(p.pool);
  if (typeof local.v6pool === "string") texts.push(local.v6pool);
  else if (local.v6pool) texts.push(local.v6pool.pool);
  for (const p of local.v6pools ?? []) texts.push(p.pool);
  if (texts.length === 0)
    issues.push({ path: ["spec", "local"], message: "names no pool (v4pool, v6pool, …)" });
  const addresses = addressEntries(texts, ["spec", "local"], issues);
  const namespaces = g.spec.namespaces ?? [];
  const bound = namespaces.length > 0;
  const spec: ImportedPoolSpec = {
    addresses,
    // a Service with no annotation gets the group named default (compat.md §3)
    autoAssign: g.metadata.name === "default" || bound,
    ...(bound && { allocation: { namespaces } }),
  };
  if (bound && !g.spec.enforceNamespaces)
    notes.push({
      subject,
      kind: "warning",
      message:
        "spec.namespaces is a default in PureLB, not a boundary: passlb's allocation.namespaces also keeps other namespaces out unless they name the pool",
    });
  return { pools: [pool("purelb", g.metadata.name, subject, spec)], notes, issues };
}

export const DEFAULT_EIP_ANNOTATION = "eip.openelb.kubesphere.io/is-default-eip";

export function fromEip(e: Eip): Converted {
  const subject = `Eip ${e.metadata.name}`;
  const issues: FieldIssue[] = [];
  const notes: ImportNote[] = [];
  const addresses = addressEntries([e.spec.address], ["spec", "address"], issues);
  const isDefault = e.metadata.annotations?.[DEFAULT_EIP_ANNOTATION] === "true";
  const namespaces = e.spec.namespaces ?? [];
  const selector = e.spec.namespaceSelector;
  const bound = namespaces.length > 0 || (selector !== undefined && Object.keys(selector).length > 0);
  if (e.spec.protocol === "bgp" || e.spec.protocol === "vip")
    notes.push({
      subject,
      kind: e.spec.protocol === "bgp" ? "kept for later" : "warning",
      message: `protocol ${e.spec.protocol}: the addresses are imported so Services keep them; passlb announces them its own way (L2 from the LB hosts${e.spec.protocol === "bgp" ? "; BGP later" : ""})`,
    });
  if (e.spec.priority !== undefined)
    notes.push({
      subject,
      kind: "not imported",
      message:
        "spec.priority: pools of equal standing are tried in name order; set allocation.priority by hand if the order matters",
    });
  const spec: ImportedPoolSpec = {
    addresses,
    autoAssign: isDefault || bound,
    ...(bound && {
      allocation: {
        ...(namespaces.length > 0 && { namespaces }),
        ...(selector &&
          Object.keys(selector).length > 0 && { namespaceSelectors: [{ matchLabels: selector }] }),
      },
    }),
    ...(e.spec.disable && { disabled: true }),
  };
  return { pools: [pool("openelb", e.metadata.name, subject, spec)], notes, issues };
}
