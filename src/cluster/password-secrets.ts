/**
 * Adapter: the TCP MD5 keys of LoadBalancerBGPPeers with `passwordSecret`, read from the API
 * server (docs/vip-announce.md "Field reference": `passwordSecret`). Only Secrets in passlb's
 * own namespace, and each one by name: a list with `fieldSelector=metadata.name=NAME`, which
 * the API server authorizes as a request for that one name (kubernetes
 * staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go: a list or watch whose
 * field selector names metadata.name carries that name), so the passlb-lb Role grants
 * `list` on exactly the Secrets it names (`resourceNames`, deploy/rbac-lb.yaml). No watch and
 * no cluster-wide Secret access.
 *
 * `read(keys)` returns what each `namespace/name` holds — its type and its decoded `password`
 * key — or "missing"; a Secret of another namespace is never read (the peer is refused, with
 * the reason, by bgp-peer-config.ts). A failed request keeps the last value read. The key is
 * never logged.
 */
import type { SecretRead } from "../announce/bgp/bgp-peer-config.ts";
import type { KubeTransport } from "./kube-transport.ts";

export async function readPasswordSecrets(
  transport: KubeTransport,
  namespace: string,
  keys: readonly string[],
  last: ReadonlyMap<string, SecretRead>,
): Promise<Map<string, SecretRead>> {
  const out = new Map<string, SecretRead>();
  for (const key of keys) {
    const [ns, name] = key.split("/") as [string, string];
    if (ns !== namespace) continue;
    try {
      const path = `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets?fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`;
      const list = await transport.list(path, { limit: 0 });
      const item = list.items.find((i) => (i as { metadata?: { name?: string } }).metadata?.name === name) as
        | { type?: string; data?: Record<string, string> }
        | undefined;
      if (!item) {
        out.set(key, "missing");
        continue;
      }
      const b64 = item.data?.password;
      out.set(key, {
        ...(item.type !== undefined && { type: item.type }),
        ...(b64 !== undefined && { password: Buffer.from(b64, "base64").toString("utf8") }),
      });
    } catch {
      const before = last.get(key);
      if (before !== undefined) out.set(key, before);
    }
  }
  return out;
}
