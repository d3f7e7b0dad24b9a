/**
 * Kubernetes mode with `--announce bgp` and no --bgp-peer: the BIRD configuration follows
 * the LoadBalancerBGPPeers (cli/lb-announce-bgp.ts ClusterBgpConfig). Each read renders it
 * again; a running BgpEngine is reconfigured, and a refused configuration keeps the last
 * good one running (announce/bgp/bird-speaker.ts). A session that BIRD can change only by
 * restarting it is said before `birdc configure` restarts it (passwords are never in
 * `changed`'s words).
 */
import type { BgpEngine } from "../../../announce/bgp/bgp-engine.ts";
import { ClusterBgpConfig } from "../../../cli/lb-announce-bgp.ts";
import type { KubeLbRun } from "../../../cli/lb-nftables.ts";
import type { Snapshot } from "../../../k8s/snapshot.ts";
import type { LbHostSinks } from "../lb-host-sinks.ts";

export class ClusterBgp {
  readonly config: ClusterBgpConfig;
  readonly #kube: KubeLbRun;
  readonly #sinks: LbHostSinks;
  /** the engine once started: reconfigured from then on */
  engine: BgpEngine | undefined;

  constructor(host: string, kernelTable: number, kube: KubeLbRun, sinks: LbHostSinks) {
    const { say, obs } = sinks;
    this.#kube = kube;
    this.#sinks = sinks;
    this.config = new ClusterBgpConfig({
      host,
      kernelTable,
      reportReset: (r) => {
        const what = `BGP session ${r.protocol}${r.source ? ` (LoadBalancerBGPPeer ${r.source})` : ""} restarts: ${r.changed.join(", ")} changed, which BIRD applies only by restarting the session`;
        say(`passlb lb: bgp: ${what}`);
        obs?.logger.log("warn", { event: "bgp_session_reset", reason: "config_changed" }, what);
      },
      report: (f) => {
        say(`passlb lb: bgp: ${f.subject}: ${f.message} [${f.code}]`);
        obs?.logger.log(
          f.severity === "warning" ? "warn" : "info",
          { event: "bgp_config", reason: f.code },
          `${f.subject}: ${f.message}`,
        );
      },
    });
  }

  /** a read: render the configuration for its Nodes and the objects, and load it */
  read(snapshot: Snapshot): void {
    const { bgpPeers, bgpExtras } = this.#kube;
    if (!bgpPeers) return;
    const text = this.config.update(bgpPeers(), snapshot.nodes, bgpExtras?.() ?? {});
    this.engine?.configure(text).catch((e: unknown) => {
      this.#sinks.say(`passlb lb: bgp: the new configuration was refused: ${(e as Error).message}`);
      this.#sinks.obs?.logger.log("error", { event: "bgp_config", reason: "refused" }, (e as Error).message);
    });
  }
}
