/**
 * Adapter: writes one LB host's conditions (announce/bgp/bgp-conditions.ts) to
 * `status.hosts.<host>` of each LoadBalancerBGPPeer and LoadBalancerBGPAdvertisement with a
 * JSON merge patch on the /status subresource (RFC 7386: only this host's key changes, so
 * hosts never overwrite each other; kubernetes apiserver pkg/endpoints/handlers/patch.go).
 * An object is written only when its conditions changed; `lastTransitionTime` changes only
 * when a condition's status does (metav1.Condition's contract). A failed write is returned
 * (the caller logs it) and tried again at the next call. Never a password: the conditions
 * carry the findings' words, which never hold one.
 */
import { CustomObjectsApi, type KubeConfig, setHeaderOptions } from "@kubernetes/client-node";
import type { BgpCondition, BgpObjectConditions } from "../announce/bgp/bgp-conditions.ts";
import { BGP_ADVERTISEMENT_PLURAL } from "../k8s/load-balancer-bgp-advertisement.ts";
import { BGP_PEER_GROUP, BGP_PEER_PLURAL } from "../k8s/load-balancer-bgp-peer.ts";

type Written = BgpCondition & { readonly lastTransitionTime: string };

export class BgpStatusWriter {
  readonly #api: CustomObjectsApi;
  readonly #host: string;
  readonly #now: () => number;
  readonly #last = new Map<string, { key: string; conditions: readonly Written[] }>();

  constructor(options: { kubeConfig: KubeConfig; host: string; now: () => number }) {
    this.#api = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#host = options.host;
    this.#now = options.now;
  }

  /** Writes what changed; resolves with one message per failed write. */
  async write(objects: readonly BgpObjectConditions[]): Promise<string[]> {
    const failed: string[] = [];
    for (const o of objects) {
      const id = `${o.kind}/${o.name}`;
      const key = JSON.stringify(o.conditions);
      const before = this.#last.get(id);
      if (before?.key === key) continue;
      const stamp = new Date(this.#now()).toISOString().replace(/\.\d{3}Z$/, "Z");
      const conditions: Written[] = o.conditions.map((c) => {
        const prev = before?.conditions.find((p) => p.type === c.type);
        return {
          ...c,
          lastTransitionTime: prev && prev.status === c.status ? prev.lastTransitionTime : stamp,
        };
      });
      try {
        await this.#api.patchClusterCustomObjectStatus(
          {
            group: BGP_PEER_GROUP,
            version: "v1alpha1",
            plural: o.kind === "LoadBalancerBGPPeer" ? BGP_PEER_PLURAL : BGP_ADVERTISEMENT_PLURAL,
            name: o.name,
            body: { status: { hosts: { [this.#host]: { conditions } } } },
          },
          setHeaderOptions("Content-Type", "application/merge-patch+json"),
        );
        this.#last.set(id, { key, conditions });
      } catch (e) {
        failed.push(`status of ${o.kind} ${o.name}: ${(e as Error).message.split("\n")[0]}`);
      }
    }
    return failed;
  }
}
