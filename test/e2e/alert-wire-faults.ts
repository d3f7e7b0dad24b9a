/**
 * The faults of the wire alerts test (test/e2e/prometheus-alerts-wire.test.ts, docs/alerts.md
 * "Proven against a real Prometheus"), each by the means a bad day on a real segment or
 * router would take, each undone by its own `undo`:
 *   - L2: a client configured with a VIP's address (a second ARP answerer); a foreign
 *     keepalived in multicast mode on one of passlb's VRIDs (keepalived.conf(5)); VRRP
 *     dropped between the LB hosts (a partition: both become master);
 *   - BGP: BIRD's kernel protocol `vips4` disabled by hand on one LB host (BIRD then exports
 *     none of the VIP routes passlb wrote, bird-config.ts); BFD's control packets (UDP 3784,
 *     RFC 5881 §4) dropped on one LB host for 3 s, three times; an LB host's dispatch map
 *     flushed by hand five times (each repair counted before the next flush);
 *   - conntrack: an LB host's table filled with unreplied UDP flows from spoofed sources;
 *   - flow table: long-lived TCP connections from a client held through one VIP.
 * Nothing here decides what must fire: the test does.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Lab, sleep } from "./lab-harness.ts";
import type { Prometheus } from "./prometheus-harness.ts";
import { holdLoad } from "./under-load.ts";

export interface Fault {
  inject(): Promise<void>;
  undo(): Promise<void>;
}

function run(argv: readonly string[], input?: string): void {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", input, timeout: 10_000 });
  if (r.status !== 0) throw new Error(`${argv.join(" ")}: ${r.stderr}`);
}

const nsExec = (ns: string, ...argv: string[]) => ["ip", "netns", "exec", ns, ...argv];

/** an nft table of the test's own in `ns`, added on inject and deleted on undo (also when absent) */
function nftTable(ns: string, family: "ip" | "inet", name: string, body: string): Fault {
  return {
    async inject() {
      run(nsExec(ns, "nft", "-f", "-"), `table ${family} ${name} {\n${body}\n}\n`);
    },
    async undo() {
      spawnSync("ip", ["netns", "exec", ns, "nft", "delete", "table", family, name]);
    },
  };
}

/** client `host` (on the LB hosts' segment) holds `vip` too: it answers ARP for it */
export function secondAnswerer(lab: Lab, host: string, vip: string): Fault {
  const ns = lab.host(host).ns;
  return {
    async inject() {
      run(["ip", "-n", ns, "addr", "add", `${vip}/32`, "dev", "eth0"]);
    },
    async undo() {
      spawnSync("ip", ["-n", ns, "addr", "del", `${vip}/32`, "dev", "eth0"]);
    },
  };
}

/** The VRID of the first vrrp_instance in an LB host's rendered keepalived.conf. */
export function firstVrid(lab: Lab, host: string): number {
  const conf = readFileSync(join(lab.state.stateDir, `keepalived-${host}`, "keepalived.conf"), "utf8");
  const m = /virtual_router_id (\d+)/.exec(conf);
  if (!m) throw new Error(`no virtual_router_id in ${host}'s keepalived.conf`);
  return Number(m[1]);
}

/** a multicast keepalived in client `host` advertising `vrid` for an address of its own */
export function foreignSpeaker(lab: Lab, host: string, vrid: number, dir: string): Fault {
  const ns = lab.host(host).ns;
  const d = join(dir, `rogue-${host}`);
  let child: ChildProcess | undefined;
  return {
    async inject() {
      mkdirSync(d, { recursive: true });
      writeFileSync(
        join(d, "k.conf"),
        [
          "global_defs {",
          "  router_id rogue",
          "  vrrp_version 3",
          "}",
          `vrrp_instance rogue_${vrid} {`,
          "  state MASTER",
          "  interface eth0",
          `  virtual_router_id ${vrid}`,
          "  priority 254",
          "  advert_int 1",
          "  virtual_ipaddress {",
          "    192.0.2.50/32",
          "  }",
          "}",
          "",
        ].join("\n"),
      );
      const args = ["--dont-fork", "--log-console", "--no-syslog", "--vrrp", "--use-file", join(d, "k.conf")];
      child = spawn(
        "ip",
        [
          "netns",
          "exec",
          ns,
          "keepalived",
          ...args,
          "--pid",
          join(d, "k.pid"),
          "--vrrp_pid",
          join(d, "v.pid"),
        ],
        { stdio: "ignore" },
      );
      child.on("error", () => {});
    },
    async undo() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child!.once("exit", r));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(5000)]);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

/** VRRP (IP protocol 112) dropped on input on every LB host: each takes the others for dead */
export function vrrpPartition(lab: Lab): Fault {
  const parts = lab.state.layout.lbHosts.map((h) =>
    nftTable(
      h.ns,
      "inet",
      "plbwire_partition",
      " chain in { type filter hook input priority -10; meta l4proto vrrp drop; }",
    ),
  );
  return {
    async inject() {
      for (const p of parts) await p.inject();
    },
    async undo() {
      for (const p of parts) await p.undo();
    },
  };
}

/** BIRD's kernel protocol `vips4` disabled on an LB host (birdc disable / enable) */
export function exportWithheld(lab: Lab, host: string): Fault {
  const ns = lab.host(host).ns;
  const sock = join(lab.state.stateDir, `bird-${host}`, "bird.ctl");
  return {
    async inject() {
      run(nsExec(ns, "birdc", "-s", sock, "disable", "vips4"));
    },
    async undo() {
      run(nsExec(ns, "birdc", "-s", sock, "enable", "vips4"));
    },
  };
}

/** BFD control packets (UDP 3784, IPv4) dropped on input on an LB host for 3 s, `times` times, 4 s apart */
export function bfdFlaps(lab: Lab, host: string, times: number): Fault {
  const drop = nftTable(
    lab.host(host).ns,
    "ip",
    "plbwire_bfd",
    " chain in { type filter hook input priority -10; udp dport 3784 drop; }",
  );
  let flapping: Promise<void> = Promise.resolve();
  return {
    async inject() {
      flapping = (async () => {
        for (let i = 0; i < times; i++) {
          await drop.inject();
          await sleep(3000);
          await drop.undo();
          await sleep(4000);
        }
      })();
    },
    async undo() {
      await flapping.catch(() => {});
      await drop.undo();
    },
  };
}

/** An LB host's dispatch map flushed `times` times, each after the last repair was counted
 * (a flushed map is found by the drift check only; see alert-lab-faults.ts). */
export function driftFlushes(lab: Lab, host: string, times: number, prom: Prometheus): Fault {
  const h = lab.host(host);
  const repairs = async () =>
    Number(
      (await prom.query(`passlb_drift_repairs_total{instance="${host}",what="table"}`))[0]?.value[1] ?? 0,
    );
  let flushing: Promise<void> = Promise.resolve();
  return {
    async inject() {
      flushing = (async () => {
        for (let i = 0; i < times; i++) {
          const before = await repairs();
          run(nsExec(h.ns, "nft", "flush", "map", "inet", "passlb", "dispatch4"));
          for (let end = Date.now() + 15_000; (await repairs()) <= before && Date.now() < end; )
            await sleep(250);
        }
      })();
    },
    async undo() {
      await flushing;
    },
  };
}

/**
 * UDP from `client` to LB host `host`'s segment address, from 8 spoofed addresses of the
 * client's zone, each packet from the next source port (hping3), until the LB host's
 * conntrack count (per namespace) passes `target`, or `packets` left the client (an nft
 * quota there, the kernel's bound), or 30 s. The UDP timeout of the LB host's namespace is
 * raised to 120 s so the unreplied entries stay; undone: the entries flushed and the
 * timeout back. The limit (nf_conntrack_max) is the machine's, and is not changed.
 */
export function conntrackFill(
  lab: Lab,
  client: string,
  host: string,
  target: number,
  packets: number,
): Fault {
  const c = lab.host(client);
  const h = lab.host(host);
  const spoofed = Array.from({ length: 8 }, (_, i) => `192.0.2.${40 + i}`);
  const count = () => Number(lab.exec(host, ["conntrack", "-C"]).trim());
  let timeout = "30";
  let filling: Promise<void> = Promise.resolve();
  const flooders: ChildProcess[] = [];
  const stop = () => {
    for (const f of flooders) if (f.exitCode === null && f.signalCode === null) f.kill("SIGKILL");
  };
  return {
    async inject() {
      timeout = lab.exec(host, ["sysctl", "-n", "net.netfilter.nf_conntrack_udp_timeout"]).trim();
      lab.exec(host, ["sysctl", "-q", "-w", "net.netfilter.nf_conntrack_udp_timeout=120"]);
      spawnSync("ip", ["netns", "exec", c.ns, "nft", "delete", "table", "ip", "plbwire_fill"]);
      run(
        nsExec(
          c.ns,
          "nft",
          `add table ip plbwire_fill { chain out { type filter hook output priority 0; ip saddr ${spoofed[0]}-${spoofed.at(-1)} counter quota over ${packets * 28} bytes drop; }; }`,
        ),
      );
      for (const source of spoofed) {
        const f = spawn(
          "ip",
          ["netns", "exec", c.ns, "hping3", "-q", "--flood", "--udp", "-p", "85", "-a", source, h.ipv4],
          { stdio: "ignore" },
        );
        f.on("error", () => {});
        flooders.push(f);
      }
      filling = (async () => {
        for (let end = Date.now() + 30_000; count() < target && Date.now() < end; ) await sleep(250);
        stop();
      })();
      await filling;
    },
    async undo() {
      stop();
      await filling;
      spawnSync("ip", ["netns", "exec", c.ns, "nft", "delete", "table", "ip", "plbwire_fill"]);
      spawnSync("ip", ["netns", "exec", h.ns, "conntrack", "-F"], { stdio: "ignore" });
      spawnSync("ip", [
        "netns",
        "exec",
        h.ns,
        "sysctl",
        "-q",
        "-w",
        `net.netfilter.nf_conntrack_udp_timeout=${timeout}`,
      ]);
    },
  };
}

/**
 * `connections` TCP connections from `client` to `target` (`ip:port`), each sending a line
 * every 100 ms for `ms` (the lab client's hold mode, under-load.ts), then closed by the
 * client; undone: their end awaited (the flow map's entries then idle out after the LB
 * host's `--flow-timeout`).
 */
export function flowsHeld(lab: Lab, client: string, target: string, connections: number, ms: number): Fault {
  let held: Promise<unknown> = Promise.resolve();
  return {
    async inject() {
      held = holdLoad(lab, { client, target }, ms, connections).catch(() => {});
    },
    async undo() {
      await held;
    },
  };
}
