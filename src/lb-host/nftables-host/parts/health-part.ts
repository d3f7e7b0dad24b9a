/**
 * The health part: the prober (health/prober-health.ts) as the data plane's one
 * HealthSource. Members are `unknown`, i.e. serving, until probed; without this part
 * (`--no-probe`, `--once`) they stay so. With `--encap-check` the routed nodes are also
 * probed through the tunnel (health/probe-tunnel.ts). Every change of a verdict, and every
 * new set of targets, bumps the version the data plane compares. Undo: stops probing.
 */
import { TunnelPorts, tunnelProbe } from "../../../health/probe-tunnel.ts";
import { ProberHealth } from "../../../health/prober-health.ts";
import type { LoadBalancerPlan } from "../../../plan/load-balancer-plan.ts";
import type { LbHostPart, Undo } from "../../lb-host.ts";
import type { HealthSource } from "../../nftables/lb-controller.ts";
import { type Forward, nodePath } from "../../routing/encap.ts";
import type { PortRange } from "../../routing/encap-check.ts";
import type { LbHostSinks } from "../lb-host-sinks.ts";

export interface HealthPartOptions {
  /** `--encap-check`: the tunnel probes' local ports */
  readonly tunnel: { readonly forward: Forward; readonly ports: PortRange } | undefined;
  /** a verdict changed: the programming latency starts */
  readonly changed: () => void;
}

export class HealthPart implements LbHostPart {
  readonly name = "health";
  readonly prober: ProberHealth;
  readonly source: HealthSource;
  #version = 0;
  readonly #listeners = new Set<() => void>();

  constructor(options: HealthPartOptions, sinks: LbHostSinks) {
    const { obs } = sinks;
    const { tunnel } = options;
    this.prober = new ProberHealth({
      ...(tunnel && {
        tunnel: {
          routed: (address: string) => nodePath(tunnel.forward, address) === "encap",
          probe: tunnelProbe(new TunnelPorts(tunnel.ports)),
        },
      }),
      onChange: () => {
        this.#version++;
        options.changed();
        for (const l of this.#listeners) l();
      },
      ...(obs && {
        onEvent: (e) => obs.observer.proberEvent(e),
        onProbe: (node, ok, seconds) => obs.observer.probeFinished(node, ok, seconds),
      }),
    });
    this.source = {
      lookup: this.prober.lookup,
      version: () => this.#version,
      subscribe: (listener) => {
        this.#listeners.add(listener);
        return () => this.#listeners.delete(listener);
      },
    };
  }

  start(): Undo {
    return () => this.prober.close();
  }

  /** a read planned these Services: probe their members */
  setPlans(plans: readonly LoadBalancerPlan[]): void {
    this.prober.setPlans(plans);
  }

  /** new targets answer differently (a manifests read) */
  targetsChanged(): void {
    this.#version++;
  }
}
