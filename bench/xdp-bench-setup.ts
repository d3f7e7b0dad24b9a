/**
 * The XDP fast path in a bench lab (bench/lab-packet-rate.bench.ts, lab-encap.bench.ts,
 * lab-syn-flood.bench.ts): `xdpBenchSetup` mounts a bpffs of the bench's own and builds the
 * program from the source, and gives the LB host's flags (no drift check and no counter reads,
 * so the bench may detach the program for the paths it measures without it);
 * `xdpBenchReady`, once the lab is up, gets the program forwarding and returns the switch
 * for the client port's program.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LabState, labRestart } from "../src/lab/lab-runner.ts";
import { buildXdpObject } from "../src/lb-host/xdp/xdp-object.ts";

/** what an XDP lab bench runs (command → Debian package, for benchPrerequisites): the lab,
 * trafgen, the program's build and load, arping and ethtool of xdpBenchReady */
export const XDP_BENCH_PACKAGES: Readonly<Record<string, string>> = {
  ip: "iproute2",
  nft: "nftables",
  trafgen: "netsniff-ng",
  ethtool: "ethtool",
  arping: "iputils-arping",
  clang: "clang",
  bpftool: "bpftool",
};

export interface XdpBench {
  /** the pin directory (maps/, prog/) */
  readonly pin: string;
  /** `passlb lb` flags: the interface, pins, object, no drift check, no counter reads */
  readonly lbArgs: readonly string[];
  /** unmounts the bpffs and removes the folder */
  readonly undo: () => void;
}

export async function xdpBenchSetup(prefix: string, iface = "plbc0"): Promise<XdpBench> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const bpffs = join(dir, "bpffs");
  mkdirSync(bpffs);
  if (spawnSync("mount", ["-t", "bpf", "bpf", bpffs]).status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error("cannot mount a bpffs");
  }
  const undo = () => {
    spawnSync("umount", [bpffs]);
    rmSync(dir, { recursive: true, force: true });
  };
  const object = join(dir, "passlb-xdp.o");
  try {
    await buildXdpObject(object);
  } catch (e) {
    undo();
    throw e;
  }
  const pin = join(bpffs, "passlb");
  const lbArgs = [
    `--xdp-interface=${iface}`,
    `--xdp-pin-dir=${pin}`,
    `--xdp-object=${object}`,
    "--drift-check-ms=0",
    "--counters-ms=0",
  ];
  return { pin, lbArgs, undo };
}

/**
 * `node`'s address resolved and the LB restarted (the first apply saw no neighbour; the
 * restart adopts the maps and writes the next hop); the node's veth end gets the pass
 * program (veth drops frames redirected to a peer without one: drivers/net/veth.c
 * veth_xdp_xmit); each client's TX checksum offload off (a redirected veth frame keeps no
 * CHECKSUM_PARTIAL: docs/dataplane-xdp.md "veth"). Returns the switch for `iface`'s program.
 */
export async function xdpBenchReady(
  state: LabState,
  exec: (host: string, argv: readonly string[]) => string,
  options: {
    readonly repoRoot: string;
    readonly pin: string;
    readonly node: string;
    readonly clients: readonly string[];
  },
  iface = "plbc0",
): Promise<(on: boolean) => void> {
  const node = state.layout.nodes.find((n) => n.name === options.node);
  if (!node) throw new Error(`no node ${options.node} in the lab`);
  exec("lb", ["arping", "-c", "1", "-w", "2", "-I", "plbnodes", node.ipv4]);
  await new Promise((r) => setTimeout(r, 2000));
  await labRestart(state, "lb", "lb", { repoRoot: options.repoRoot });
  await new Promise((r) => setTimeout(r, 3000));
  exec(node.name, [
    "ip",
    "link",
    "set",
    "dev",
    "eth0",
    "xdpdrv",
    "pinned",
    `${options.pin}/prog/passlb_xdp_pass`,
  ]);
  for (const c of options.clients) exec(c, ["ethtool", "-K", "eth0", "tx", "off"]);
  return (on) => {
    exec(
      "lb",
      on
        ? ["ip", "-force", "link", "set", "dev", iface, "xdpdrv", "pinned", `${options.pin}/prog/passlb_xdp`]
        : ["ip", "link", "set", "dev", iface, "xdpdrv", "off"],
    );
  };
}
