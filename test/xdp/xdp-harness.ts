/**
 * The real XDP program without a lab: built with clang from the tree's source, loaded with
 * bpftool onto a bpffs the test mounts (and unmounts), its maps written by the real control
 * plane (XdpDataplane over the real bpftool driver), and packets run through it with
 * BPF_PROG_TEST_RUN (`bpftool prog run`, bpftool-prog(8)). Root, clang and bpftool needed;
 * `xdpUnavailable()` says which is missing.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { createBpfTool } from "../../src/drivers/bpftool.ts";
import type { ServiceForwarding } from "../../src/forwarding/forwarding-state.ts";
import { type MaglevTable, maglevTable } from "../../src/forwarding/maglev.ts";
import { XdpDataplane } from "../../src/lb-host/xdp/xdp-dataplane.ts";
import type { NextHop } from "../../src/lb-host/xdp/xdp-maps.ts";
import { buildXdpObject } from "../../src/lb-host/xdp/xdp-object.ts";
import type { LoadBalancerPlan } from "../../src/plan/load-balancer-plan.ts";

export function xdpUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root: loads a BPF program";
  for (const [cmd, arg, pkg] of [
    ["clang", "--version", "clang"],
    ["bpftool", "version", "bpftool"],
  ] as const)
    if (spawnSync(cmd, [arg]).error) return `needs ${cmd} (Debian package ${pkg})`;
  return undefined;
}

export interface TestNode {
  readonly name: string;
  readonly v4?: string;
  readonly v6?: string;
  readonly weight?: number;
  readonly zone?: string;
}

export interface TestService {
  readonly name: string;
  readonly vips: readonly string[];
  readonly port: number;
  readonly protocol?: "TCP" | "UDP";
  readonly nodes: readonly TestNode[];
  readonly sourceRanges?: readonly string[];
  readonly clientIp?: boolean;
  /** zone → its nodes' table (zonal affinity) */
  readonly zonal?: boolean;
  readonly size?: number;
}

/** A Service's forwarding as forwarding-state.ts would give it: the fields the XDP renderer
 * reads, the tables from the real maglevTable. */
export function forwardingOf(s: TestService, seed: number): ServiceForwarding {
  const size = s.size ?? 251;
  const backends = s.nodes.map((n) => ({
    node: n.name,
    zone: n.zone ?? "",
    addresses: { ...(n.v4 && { IPv4: n.v4 }), ...(n.v6 && { IPv6: n.v6 }) },
    weight: n.weight ?? 1,
  }));
  const table = (list: typeof backends): MaglevTable =>
    maglevTable({ backends: list.map((b) => ({ name: b.node, weight: b.weight })), size, seed });
  const zoneTables = new Map<string, MaglevTable>();
  if (s.zonal)
    for (const z of new Set(backends.map((b) => b.zone)))
      zoneTables.set(z, table(backends.filter((b) => b.zone === z)));
  const plan = {
    service: s.name,
    vips: s.vips.map((address) => ({ address, family: address.includes(":") ? "IPv6" : "IPv4" })),
    members: backends.map((b) => ({ node: b.node, zone: b.zone, addresses: b.addresses, weight: b.weight })),
    sourceRanges: s.sourceRanges ?? [],
    sessionAffinity: { type: s.clientIp ? "ClientIP" : "None" },
    zonalAffinity: s.zonal ?? false,
  } as unknown as LoadBalancerPlan;
  const protocol = s.protocol ?? "TCP";
  return {
    service: s.name,
    plan,
    listeners: [
      {
        listener: `${protocol}/${s.port}`,
        protocol,
        port: s.port,
        backends,
        failOpen: false,
        table: table(backends),
        zoneTables,
      },
    ],
  };
}

/** node MAC from its name: 02:00:00:00:<n>:<n> for node-<n> */
export const nodeMac = (i: number) => `02:00:00:00:0${i}:0${i}`;

export interface LoadedProgram {
  readonly dp: XdpDataplane;
  readonly dir: string;
  readonly hops: Map<string, NextHop>;
  readonly bpftool: (args: readonly string[]) => string;
  run(data: Buffer, ingress?: number): { action: number; out: Buffer; ns: number };
}

export const XDP = { DROP: 1, PASS: 2, TX: 3, REDIRECT: 4 } as const;

export async function loadProgram(t: TestContext, seed = 7): Promise<LoadedProgram> {
  const dir = mkdtempSync(join(tmpdir(), "plb-xdp-"));
  const fs = join(dir, "bpffs");
  spawnSync("mkdir", ["-p", fs]);
  t.after(() => {
    spawnSync("umount", [fs]);
    rmSync(dir, { recursive: true, force: true });
  });
  if (spawnSync("mount", ["-t", "bpf", "bpf", fs]).status !== 0)
    throw new Error(`cannot mount bpffs at ${fs}`);
  const object = join(dir, "passlb-xdp.o");
  await buildXdpObject(object);
  const hops = new Map<string, NextHop>();
  let clock = 0;
  const dp = new XdpDataplane({
    bpf: createBpfTool(),
    nextHops: { resolve: async () => hops },
    interfaces: [],
    pinDir: join(fs, "passlb"),
    object,
    seed,
    blockSize: 4093,
    now: () => (clock += 5000),
  });
  await dp.start();
  const bpftool = (args: readonly string[]) => {
    const r = spawnSync("bpftool", args, { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`bpftool ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  };
  const prog = join(fs, "passlb/prog/passlb_xdp");
  return {
    dp,
    dir,
    hops,
    bpftool,
    run(data, ingress = 1) {
      const input = join(dir, "in.bin");
      const output = join(dir, "out.bin");
      const ctx = join(dir, "ctx.bin");
      writeFileSync(input, data);
      const c = Buffer.alloc(24);
      c.writeUInt32LE(data.length, 4); // data_end: the kernel wants the frame length (bpf_prog_test_run_xdp)
      c.writeUInt32LE(ingress, 12);
      writeFileSync(ctx, c);
      const text = bpftool([
        "prog",
        "run",
        "pinned",
        prog,
        "data_in",
        input,
        "data_out",
        output,
        "ctx_in",
        ctx,
      ]);
      const m = /Return value: (\d+), duration[^:]*: (\d+)ns/.exec(text);
      if (!m) throw new Error(`unexpected bpftool output: ${text}`);
      return { action: Number(m[1]), out: readFileSync(output), ns: Number(m[2]) };
    },
  };
}
