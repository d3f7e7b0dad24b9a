/**
 * The faults of the alerts test (test/e2e/prometheus-alerts.test.ts, docs/alerts.md "Proven
 * against a real Prometheus") on its two labs and the Kubernetes API stand-in, injected at
 * once and undone at once, each by the means an operator's bad day would: processes
 * SIGKILLed, a link down, pods unready, a pool shrunk, the API refusing writes, a map
 * flushed by hand. Nothing here decides what must fire: the test does.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { labRouterDaemon } from "../../src/lab/lab-frr.ts";
import type { FakeApiServer } from "../support/fake-api-server.ts";
import { type Lab, sleep } from "./lab-harness.ts";
import type { Prometheus } from "./prometheus-harness.ts";

export type Sites = { readonly l2: Prometheus; readonly bgp: Prometheus };
export type Site = keyof Sites;

/** SIGKILLs every process named `comm` in a namespace; how many */
function killByName(ns: string, comm: string): number {
  const pids = spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" })
    .stdout.split(/\s+/)
    .filter(Boolean);
  let n = 0;
  for (const pid of pids)
    try {
      if (readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== comm) continue;
      process.kill(Number(pid), "SIGKILL");
      n++;
    } catch {
      // gone meanwhile
    }
  return n;
}

export /**
 * The faults of both labs and the API stand-in, injected at once and undone at once:
 * keepalived of L2 host 0 killed every 200 ms; L2 host 1's segment link down; every L2 pod
 * unready; the pool shrunk to its used addresses; every API write refused; node-a3's agent
 * killed; the router's bgpd killed; BGP host 0's dispatch map flushed four times.
 */
class LabFaults {
  readonly #l2: Lab;
  readonly #bgp: Lab;
  readonly #api: FakeApiServer;
  readonly #sites: Sites;
  #on = false;
  #killLoop: Promise<void> = Promise.resolve();
  /** the drift fault's four flushes, each repaired (or given up on) */
  drift: Promise<void> = Promise.resolve();

  constructor(l2: Lab, bgp: Lab, api: FakeApiServer, sites: Sites) {
    this.#l2 = l2;
    this.#bgp = bgp;
    this.#api = api;
    this.#sites = sites;
  }

  /** the fixture's pool "main" holds two addresses, both taken: widened to 20 for a quiet start */
  pool(addresses: string[]): void {
    const p = this.#api.find("passlb.io/v1alpha1", "LoadBalancerIPPool", "main") as unknown as {
      spec: { addresses: string[] };
    };
    this.#api.put({ ...p, spec: { ...p.spec, addresses } });
  }

  /** Injects every fault; when it began (the first fault), for the bounds. */
  async inject(): Promise<number> {
    const t0 = Date.now();
    const keepalivedHost = this.#l2.state.layout.lbHosts[0]!;
    this.#on = true;
    this.#killLoop = (async () => {
      while (this.#on && Date.now() < t0 + 150_000) {
        killByName(keepalivedHost.ns, "keepalived");
        await sleep(200);
      }
    })();
    this.#segment(false);
    await this.#ready(false);
    this.pool(["203.0.113.10-203.0.113.11"]); // the controller's next pass (before it loses the Lease) sees it full
    await sleep(1000);
    this.#api.failNext({
      verb: ["create", "update", "patch", "delete"],
      status: 503,
      count: 1e9,
      message: "injected: the API server refuses writes",
    });
    await this.#bgp.restart("agent", "node-a3", true, "SIGKILL");
    labRouterDaemon(this.#bgp.state.stateDir, this.#bgp.state.layout, "bgpd", false);
    this.drift = this.#drift();
    return t0;
  }

  /** Undoes every fault; when it began (the kill loop stopped). */
  async undo(): Promise<number> {
    this.#on = false;
    await this.#killLoop;
    const t1 = Date.now();
    this.#segment(true);
    await this.#ready(true);
    this.#api.clearFailures();
    this.pool(["203.0.113.10-203.0.113.29"]);
    await this.#bgp.restart("agent", "node-a3");
    labRouterDaemon(this.#bgp.state.stateDir, this.#bgp.state.layout, "bgpd", true);
    return t1;
  }

  #segment(up: boolean): void {
    const h = this.#l2.state.layout.lbHosts[1]!;
    const r = spawnSync("ip", ["-n", h.ns, "link", "set", h.segmentInterface, up ? "up" : "down"], {
      encoding: "utf8",
    });
    if (r.status !== 0) throw new Error(`link ${h.name}: ${r.stderr}`);
  }

  #ready(ready: boolean): Promise<void> {
    return this.#l2.write((topo) => {
      for (const z of topo.zones) for (const n of z.nodes) for (const p of n.pods) p.ready = ready;
      return topo;
    });
  }

  /** a flushed map is found by the drift check only (a pass that changes elements does not
   * re-add the others), where a deleted table may be re-created by a pass that happens to
   * run first, which is no drift; each flush waits for the last repair to be counted */
  async #drift(): Promise<void> {
    const h = this.#bgp.state.layout.lbHosts[0]!;
    const repairs = async () =>
      Number(
        (await this.#sites.bgp.query(`passlb_drift_repairs_total{instance="${h.name}",what="table"}`))[0]
          ?.value[1] ?? 0,
      );
    for (let i = 0; i < 4; i++) {
      const before = await repairs();
      const r = spawnSync(
        "ip",
        ["netns", "exec", h.ns, "nft", "flush", "map", "inet", "passlb", "dispatch4"],
        {
          encoding: "utf8",
        },
      );
      if (r.status !== 0) throw new Error(`nft flush map: ${r.stderr}`);
      for (let end = Date.now() + 15_000; (await repairs()) <= before && Date.now() < end; ) await sleep(250);
    }
  }
}
