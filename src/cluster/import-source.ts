/**
 * Adapter: the objects `passlb import --kubeconfig` reads from a live cluster, as the same
 * documents a YAML folder gives (source `cluster`), through client-node's transport
 * (kube-transport.ts: paged GETs, the server's JSON). The kinds: Services, Namespaces,
 * ConfigMaps (kubevip, MetalLB's old config, cilium-config), Deployments and DaemonSets (to
 * detect controllers still running), the CRDs of MetalLB, Cilium, PureLB and OpenELB, and
 * passlb's own LoadBalancerIPPools.
 * A resource the server does not serve (a CRD that is not installed: HTTP 404) is skipped;
 * any other failure is returned as a problem.
 *
 * Deliberately not: watching, writing anything.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import type { PasslbError } from "../errors.ts";
import type { Document } from "../k8s/documents.ts";
import { clientNodeTransport } from "./kube-transport.ts";

interface Resource {
  readonly path: string;
  readonly apiVersion: string;
  readonly kind: string;
}

const r = (path: string, apiVersion: string, kind: string): Resource => ({ path, apiVersion, kind });

export const IMPORT_RESOURCES: readonly Resource[] = [
  r("/api/v1/services", "v1", "Service"),
  r("/api/v1/namespaces", "v1", "Namespace"),
  r("/api/v1/configmaps", "v1", "ConfigMap"),
  r("/apis/apps/v1/deployments", "apps/v1", "Deployment"),
  r("/apis/apps/v1/daemonsets", "apps/v1", "DaemonSet"),
  r("/apis/metallb.io/v1beta1/ipaddresspools", "metallb.io/v1beta1", "IPAddressPool"),
  r("/apis/metallb.io/v1beta1/l2advertisements", "metallb.io/v1beta1", "L2Advertisement"),
  r("/apis/metallb.io/v1beta1/bgpadvertisements", "metallb.io/v1beta1", "BGPAdvertisement"),
  r("/apis/metallb.io/v1beta2/bgppeers", "metallb.io/v1beta2", "BGPPeer"),
  r("/apis/metallb.io/v1beta1/bfdprofiles", "metallb.io/v1beta1", "BFDProfile"),
  r("/apis/cilium.io/v2/ciliumloadbalancerippools", "cilium.io/v2", "CiliumLoadBalancerIPPool"),
  r(
    "/apis/cilium.io/v2alpha1/ciliuml2announcementpolicies",
    "cilium.io/v2alpha1",
    "CiliumL2AnnouncementPolicy",
  ),
  r("/apis/purelb.io/v2/servicegroups", "purelb.io/v2", "ServiceGroup"),
  r("/apis/network.kubesphere.io/v1alpha2/eips", "network.kubesphere.io/v1alpha2", "Eip"),
  // passlb's own pools already applied: used for the report, not printed again
  r("/apis/passlb.io/v1alpha1/loadbalancerippools", "passlb.io/v1alpha1", "LoadBalancerIPPool"),
];

export async function readClusterForImport(
  config: KubeConfig,
): Promise<{ documents: Document[]; problems: string[]; skipped: string[] }> {
  const transport = clientNodeTransport(config);
  const documents: Document[] = [];
  const problems: string[] = [];
  const skipped: string[] = [];
  let index = 0;
  for (const res of IMPORT_RESOURCES) {
    index++;
    try {
      const list = await transport.list(res.path);
      list.items.forEach((item, i) => {
        // built-in list items come without kind and apiVersion
        const value = { apiVersion: res.apiVersion, kind: res.kind, ...(item as object) };
        documents.push({ source: `cluster ${res.path}`, index, item: i + 1, value });
      });
    } catch (e) {
      const err = e as PasslbError;
      const status = (err.details as { status?: number } | undefined)?.status;
      if (status === 404) skipped.push(`${res.kind} (${res.path}: not served)`);
      else problems.push(`${res.path}: ${err.message}`);
    }
  }
  return { documents, problems, skipped };
}
