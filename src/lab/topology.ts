/**
 * The lab's topology file (`topology.yaml`, docs/lab.md "Topology file"): zones with
 * client hosts and nodes, pods per node, one LB host or several on a shared segment, and where the Services and the
 * PasslbConfig come from. Decoded with zod, so every mistake names its field. Pure: the
 * text comes in, paths stay as written (the adapter resolves them against the file).
 * Addresses are not written here; `lab-layout.ts` derives them from positions.
 */
import { parseAllDocuments } from "yaml";
import { z } from "zod";

/** DNS-label-like names: they become parts of namespace names and manifest names. */
const name = z.string().regex(/^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/, "lower-case letters, digits and '-'");

const PodPortSchema = z.strictObject({
  name: z.string().optional(),
  port: z.number().int().min(1).max(65535),
  protocol: z.enum(["TCP", "UDP"]).default("TCP"),
});

const PodSchema = z.strictObject({
  name,
  namespace: name.optional(),
  labels: z.record(z.string(), z.string()).default({}),
  ports: z.array(PodPortSchema).min(1),
  /** the Pod's Ready condition (default true) */
  ready: z.boolean().default(true),
  /** being deleted: the endpoint is terminating (serving while still ready) */
  terminating: z.boolean().default(false),
});

const NodeSchema = z.strictObject({
  name,
  /** label the Node `node.kubernetes.io/exclude-from-external-load-balancers` */
  excludeFromLoadBalancers: z.boolean().default(false),
  pods: z.array(PodSchema).default([]),
});

const ZoneSchema = z.strictObject({
  name,
  clients: z.array(name).default([]),
  nodes: z.array(NodeSchema).max(9).default([]),
});

export const TopologySchema = z.strictObject({
  /** short: namespaces are `plb-<name>-<host>` */
  name: z.string().regex(/^[a-z0-9]{1,8}$/, "1-8 lower-case letters or digits"),
  /** manifest files or folders; their Services, PasslbConfig and Namespaces are used */
  services: z.array(z.string()).min(1),
  /** the namespace of pods that do not name one */
  namespace: name.default("default"),
  lb: z.strictObject({ name: name.default("lb") }).default({ name: "lb" }),
  /**
   * LB hosts on one shared segment with the clients (docs/lab.md "Several LB hosts"): 1 =
   * the classic lab (the `lb` host routes and load-balances); 2-4 = `<lb>-1 … <lb>-n` hold
   * elected VIPs on the client segment and the `lb` host only routes. Optional (absent = 1)
   * so that code building a Topology in memory need not name it.
   */
  lbHosts: z.number().int().min(1).max(4).optional(),
  /**
   * The routed LB tier (docs/lab.md "A router with BGP", lab-bgp.ts): the `lb` namespace
   * runs FRR (bgpd + bfdd) with ECMP, every LB host runs `passlb lb --announce bgp` (BIRD)
   * and peers with it; clients reach VIPs through the router. Needs `lbHosts` ≥ 2.
   */
  bgp: z
    .strictObject({
      routerAsn: z.number().int().min(1).max(4294967295).default(64500),
      asn: z.number().int().min(1).max(4294967295).default(64512),
      bfdIntervalMs: z.number().int().min(10).max(60000).default(100),
      bfdMultiplier: z.number().int().min(2).max(255).default(3),
      holdSeconds: z.number().int().min(3).max(65535).default(9),
    })
    .optional(),
  zones: z.array(ZoneSchema).min(1).max(4),
});

export type Topology = z.infer<typeof TopologySchema>;
export type TopologyPod = z.infer<typeof PodSchema>;

export type TopologyRead = { ok: true; topology: Topology } | { ok: false; problems: string[] };

export function parseTopology(text: string): TopologyRead {
  const docs = parseAllDocuments(text);
  const first = Array.isArray(docs) ? docs[0] : undefined;
  if (!first || first.errors.length > 0)
    return { ok: false, problems: first ? first.errors.map((e) => e.message) : ["empty topology file"] };
  const parsed = TopologySchema.safeParse(first.toJS());
  if (!parsed.success)
    return {
      ok: false,
      problems: parsed.error.issues.map((i) => `${i.path.join(".") || "(top)"}: ${i.message}`),
    };
  const problems = duplicateNames(parsed.data);
  if (parsed.data.bgp && (parsed.data.lbHosts ?? 1) < 2)
    problems.push("bgp: needs lbHosts 2 or more (the LB hosts that peer with the router)");
  return problems.length > 0 ? { ok: false, problems } : { ok: true, topology: parsed.data };
}

/** Hosts share one namespace-name space; pods share one per Kubernetes namespace. */
function duplicateNames(t: Topology): string[] {
  const problems: string[] = [];
  const hosts = new Set<string>();
  const pods = new Set<string>();
  const host = (n: string) => {
    if (hosts.has(n)) problems.push(`host name ${n} is used twice`);
    hosts.add(n);
  };
  host(t.lb.name);
  for (const h of lbHostNames(t)) host(h);
  for (const z of t.zones) {
    for (const c of z.clients) host(c);
    for (const n of z.nodes) {
      host(n.name);
      for (const p of n.pods) {
        host(p.name);
        const key = `${p.namespace ?? t.namespace}/${p.name}`;
        if (pods.has(key)) problems.push(`pod ${key} is used twice`);
        pods.add(key);
      }
    }
  }
  return problems;
}

/** The names of the LB hosts on the shared segment (none in the classic, single-LB lab). */
export function lbHostNames(t: Pick<Topology, "lb" | "lbHosts">): string[] {
  const n = t.lbHosts ?? 1;
  return n < 2 ? [] : Array.from({ length: n }, (_, i) => `${t.lb.name}-${i + 1}`);
}
