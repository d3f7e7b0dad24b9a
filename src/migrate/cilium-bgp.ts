/**
 * `passlb import`, Cilium's BGP control plane v2 (`cilium.io/v2`): CiliumBGPClusterConfig,
 * CiliumBGPPeerConfig and CiliumBGPAdvertisement in; LoadBalancerBGPPeers (one per instance
 * peer, the PeerConfig it references inlined) and LoadBalancerBGPAdvertisements (one per
 * `Service` advertisement of `LoadBalancerIP` addresses) out, as far as they map (docs/migrate.md
 * "Cilium BGP"). Pure. Field meanings and defaults: cilium/cilium
 * pkg/k8s/apis/cilium.io/v2/bgp_cluster_types.go, bgp_peer_types.go, bgp_advert_types.go.
 *
 * - Defaults written out: Cilium's timers 90/30 s and connect retry 120 s, no BFD (Cilium has
 *   none), graceful restart off.
 * - `peerASN: 0` (accept any AS) is reported unsupported: BIRD's `neighbor X external` and
 *   `internal` check the direction, Cilium does not; set dynamicASN by hand.
 * - A PeerConfig's `families[].advertisements` label selector decides which
 *   CiliumBGPAdvertisements go to the peer: those become the advertisement's `peers`.
 * - Service `selector`s other than match-everything, other advertisement types (PodCIDR,
 *   ClusterIP, ExternalIP), auto-discovery, `localPort`, a restart time other than 120 s and
 *   unknown well-known communities are unsupported, by name.
 */

import { WELL_KNOWN_COMMUNITIES } from "../k8s/load-balancer-bgp-advertisement.ts";
import { selectorMatches } from "../plan/address-pools.ts";
import { type FieldOutcome, fieldOutcomes, unknownFields } from "./bgp-field-report.ts";
import { IMPORTED_FROM } from "./convert-pools.ts";
import type {
  CiliumBGPAdvertisement,
  CiliumBGPClusterConfig,
  CiliumBGPPeerConfig,
} from "./foreign-bgp-objects.ts";
import type { BgpConversion, ImportedBgpObject } from "./metallb-bgp.ts";
import { PASSLB_NAMESPACE } from "./metallb-bgp.ts";

const CILIUM_DEFAULTS = { hold: 90, keepalive: 30, connect: 120 };

const meta = (name: string, from: string) => ({
  name,
  labels: { [IMPORTED_FROM]: "cilium" },
  annotations: { [IMPORTED_FROM]: from },
});

export function fromCiliumBgp(input: {
  readonly clusters: readonly CiliumBGPClusterConfig[];
  readonly peerConfigs: readonly CiliumBGPPeerConfig[];
  readonly advertisements: readonly CiliumBGPAdvertisement[];
}): BgpConversion {
  const out: BgpConversion = { peers: [], advertisements: [], fields: [], issues: [] };
  /** peer name → the PeerConfig whose family selectors decide its advertisements */
  const peerConfigOf = new Map<string, CiliumBGPPeerConfig | undefined>();
  for (const cluster of input.clusters) {
    const from = `CiliumBGPClusterConfig ${cluster.metadata.name}`;
    const f = fieldOutcomes(from, out.fields);
    if (cluster.spec.nodeSelector) f.converted("nodeSelector", "each peer's nodeSelectors");
    unknownFields(cluster.spec, ["nodeSelector", "bgpInstances"], f);
    for (const instance of cluster.spec.bgpInstances)
      for (const peer of instance.peers ?? []) {
        const converted = convertPeer(cluster, instance, peer, input.peerConfigs, out);
        if (converted) {
          out.peers.push(converted.object);
          peerConfigOf.set(converted.object.metadata.name, converted.config);
        }
      }
  }
  for (const ad of input.advertisements) convertAdvertisement(ad, peerConfigOf, out);
  return out;
}

type Instance = CiliumBGPClusterConfig["spec"]["bgpInstances"][number];
type Peer = NonNullable<Instance["peers"]>[number];

function convertPeer(
  cluster: CiliumBGPClusterConfig,
  instance: Instance,
  peer: Peer,
  configs: readonly CiliumBGPPeerConfig[],
  out: BgpConversion,
): { object: ImportedBgpObject; config: CiliumBGPPeerConfig | undefined } | undefined {
  const from = `CiliumBGPClusterConfig ${cluster.metadata.name}`;
  const field = `bgpInstances[${instance.name}].peers[${peer.name}]`;
  const f = fieldOutcomes(from, out.fields);
  const issue = (message: string) =>
    out.issues.push({
      subject: from,
      issue: { path: ["spec", "bgpInstances", instance.name, "peers", peer.name], message },
    });
  const spec: Record<string, unknown> = {};
  if (instance.localASN === undefined) issue("the instance has no localASN (passlb needs myASN)");
  spec.myASN = instance.localASN;
  f.converted(`bgpInstances[${instance.name}].localASN`, "myASN");
  if (instance.localPort !== undefined)
    f.unsupported(`bgpInstances[${instance.name}].localPort`, "passlb's BIRD listens on 179");
  if (peer.autoDiscovery !== undefined)
    f.unsupported(`${field}.autoDiscovery`, "BIRD 2.0.12 needs an explicit neighbour address");
  if (peer.peerAddress === undefined) {
    issue("has no peerAddress");
    return undefined;
  }
  spec.peerAddress = peer.peerAddress;
  f.converted(`${field}.peerAddress`);
  if (peer.peerASN === undefined || peer.peerASN === 0) {
    f.unsupported(
      `${field}.peerASN`,
      "0 accepts any AS; passlb's dynamicASN is internal or external: set it by hand",
    );
    return undefined;
  }
  spec.peerASN = peer.peerASN;
  f.converted(`${field}.peerASN`);
  if (cluster.spec.nodeSelector) spec.nodeSelectors = [cluster.spec.nodeSelector];
  const config = configs.find((c) => c.metadata.name === peer.peerConfigRef?.name);
  if (peer.peerConfigRef && !config)
    issue(`CiliumBGPPeerConfig ${peer.peerConfigRef.name} is not in the input`);
  peerConfig(config, spec, out.fields);
  const name = `${cluster.metadata.name}-${instance.name}-${peer.name}`
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, "-");
  return {
    object: {
      apiVersion: "passlb.io/v1alpha1",
      kind: "LoadBalancerBGPPeer",
      metadata: meta(name, `${from} ${field}`),
      spec,
    },
    config,
  };
}

function peerConfig(
  config: CiliumBGPPeerConfig | undefined,
  spec: Record<string, unknown>,
  fields: FieldOutcome[],
): void {
  const s = config?.spec ?? {};
  const f = fieldOutcomes(
    config ? `CiliumBGPPeerConfig ${config.metadata.name}` : "CiliumBGPPeerConfig (none)",
    fields,
  );
  const t = s.timers ?? {};
  const sec = (n: number) => `${n}s`;
  spec.holdTime = sec(t.holdTimeSeconds ?? CILIUM_DEFAULTS.hold);
  spec.keepaliveTime = sec(t.keepAliveTimeSeconds ?? CILIUM_DEFAULTS.keepalive);
  spec.connectTime = sec(t.connectRetryTimeSeconds ?? CILIUM_DEFAULTS.connect);
  for (const [k, d] of [
    ["holdTimeSeconds", CILIUM_DEFAULTS.hold],
    ["keepAliveTimeSeconds", CILIUM_DEFAULTS.keepalive],
    ["connectRetryTimeSeconds", CILIUM_DEFAULTS.connect],
  ] as const)
    if (t[k] !== undefined) f.converted(`timers.${k}`);
    else f.defaulted(`timers.${k}`, `${d}s (Cilium's)`);
  if (s.transport?.peerPort !== undefined) {
    spec.peerPort = s.transport.peerPort;
    f.converted("transport.peerPort");
  }
  if (s.transport?.localPort !== undefined) f.unsupported("transport.localPort", "passlb's BIRD uses 179");
  if (s.authSecretRef !== undefined) {
    spec.passwordSecret = { name: s.authSecretRef, namespace: PASSLB_NAMESPACE };
    f.converted(
      "authSecretRef",
      `passwordSecret ${PASSLB_NAMESPACE}/${s.authSecretRef}: copy the Secret there as type kubernetes.io/basic-auth (key password), and name it in the passlb-lb-secrets Role`,
    );
  }
  spec.bfd = { enabled: false };
  f.defaulted("bfd", "enabled false: Cilium runs no BFD");
  const gr = s.gracefulRestart;
  spec.enableGracefulRestart = gr?.enabled === true;
  if (gr?.enabled !== undefined) f.converted("gracefulRestart.enabled");
  if (gr?.restartTimeSeconds !== undefined && gr.restartTimeSeconds !== 120)
    f.unsupported("gracefulRestart.restartTimeSeconds", "passlb renders BIRD's graceful restart time 120");
  if (s.ebgpMultihop !== undefined && s.ebgpMultihop > 1) {
    spec.ebgpMultiHop = true;
    f.converted("ebgpMultihop", `TTL ${s.ebgpMultihop} → ebgpMultiHop (BIRD multihop 255)`);
  }
  const fams = (s.families ?? []).map((x) => `${x.afi}/${x.safi}`);
  if (fams.includes("ipv4/unicast") && fams.includes("ipv6/unicast")) spec.dualStackAddressFamily = true;
  if (fams.length > 0) f.converted("families", fams.join(", "));
  for (const x of fams)
    if (!["ipv4/unicast", "ipv6/unicast"].includes(x))
      f.unsupported(`families ${x}`, "passlb announces unicast VIPs only");
  unknownFields(
    s,
    ["transport", "timers", "authSecretRef", "gracefulRestart", "ebgpMultihop", "families"],
    f,
  );
}

/** A selector that matches every Service (Cilium's documented "all Services" idiom: NotIn a never-used value). */
const matchesAll = (sel: CiliumBGPAdvertisement["spec"]["advertisements"][number]["selector"]) =>
  sel === undefined ||
  ((sel.matchLabels === undefined || Object.keys(sel.matchLabels).length === 0) &&
    (sel.matchExpressions ?? []).every((e) => e.operator === "NotIn"));

function convertAdvertisement(
  ad: CiliumBGPAdvertisement,
  peerConfigOf: ReadonlyMap<string, CiliumBGPPeerConfig | undefined>,
  out: BgpConversion,
): void {
  const from = `CiliumBGPAdvertisement ${ad.metadata.name}`;
  const f = fieldOutcomes(from, out.fields);
  const labels = { ...(ad.metadata.labels ?? {}) } as Record<string, string>;
  const peers = [...peerConfigOf]
    .filter(([, c]) =>
      (c?.spec.families ?? []).some(
        (fam) => fam.advertisements && selectorMatches(fam.advertisements as never, labels),
      ),
    )
    .map(([name]) => name);
  ad.spec.advertisements.forEach((a, i) => {
    const field = `advertisements[${i}]`;
    if (a.advertisementType !== "Service" || !(a.service?.addresses ?? []).includes("LoadBalancerIP")) {
      f.unsupported(
        `${field}`,
        `${a.advertisementType} ${(a.service?.addresses ?? []).join("/")}: passlb announces LoadBalancer VIPs only`,
      );
      return;
    }
    if (!matchesAll(a.selector))
      f.unsupported(
        `${field}.selector`,
        "passlb selects by pool, not by Service labels (put those Services in a pool of their own)",
      );
    const spec: Record<string, unknown> = { peers };
    if (a.service?.aggregationLengthIPv4 !== undefined)
      spec.aggregationLength = a.service.aggregationLengthIPv4;
    if (a.service?.aggregationLengthIPv6 !== undefined)
      spec.aggregationLengthV6 = a.service.aggregationLengthIPv6;
    const c = a.attributes?.communities;
    const communities = [...(c?.standard ?? [])];
    for (const w of c?.wellKnown ?? [])
      if (WELL_KNOWN_COMMUNITIES[w]) communities.push(w);
      else
        f.unsupported(
          `${field}.attributes.communities.wellKnown ${w}`,
          "not a name passlb knows; write its value",
        );
    for (const l of c?.large ?? []) communities.push(`large:${l}`);
    if (communities.length > 0) spec.communities = communities;
    if (a.attributes?.localPreference !== undefined) spec.localPref = a.attributes.localPreference;
    f.converted(field, `peers ${peers.join(", ") || "(none select it)"}`);
    out.advertisements.push({
      apiVersion: "passlb.io/v1alpha1",
      kind: "LoadBalancerBGPAdvertisement",
      metadata: meta(`${ad.metadata.name}-${i}`, from),
      spec,
    });
  });
}
