// Benchmark: the userspace LB (src/lb-host/userspace/userspace-lb.ts) against HAProxy in
// TCP mode, on loopback, in the same run. Three paths to one backend process:
//   direct   client → backend 127.0.5.2:18000
//   haproxy  client → haproxy 127.0.5.3:18080 → backend   (mode tcp, nbthread 1)
//   passlb   client → passlb  127.0.5.1:18080 → backend   (one Node process: one thread;
//            TCP on node:net sockets, the default: tcp-plumbing.ts)
// Measures: throughput (4 connections each downloading 128 MiB), connection rate (32
// concurrent clients each doing connect / 1-byte request / answer / close for 3 s), and
// latency at 1,000 requests/s (10 kept-alive connections × 100 requests/s, 1-byte ping-pong,
// 3 s): p50/p99 and the p99 each proxy adds over direct.
// Run: node --import tsx bench/userspace-proxy.bench.ts [--rounds 3] [--libuv] [--lean] [--naive] [--rate-only]
// (--libuv adds passlb on its opt-in experimental libuv-handle plumbing, 127.0.5.5; --lean
// the leanest node:net proxy (bench/lean-node-proxy.mjs), as it is and with pauseOnConnect,
// 127.0.5.6/.7: node:net's own floor; --naive a createServer + pipe Node proxy;
// --rate-only measures connection rate only)
// The paths are interleaved within each round, in a rotating order; the last lines print the
// passlb/HAProxy ratios (medians of the per-round ratios), the CPU each spent per connection
// (user + system, from /proc) and the load average around the run.
// Needs haproxy; as root it is installed with apt-get when missing, else the bench says so
// and exits 0. Loopback only; every child process is killed at the end.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ALL_UNKNOWN, serviceForwarding } from "../src/forwarding/forwarding-state.ts";
import { UserspaceLb } from "../src/lb-host/userspace/userspace-lb.ts";
import type { LoadBalancerPlan } from "../src/plan/load-balancer-plan.ts";

const BACKEND = { host: "127.0.5.2", port: 18000 };
const PASSLB = { host: "127.0.5.1", port: 18080 };
/** passlb on its experimental libuv-handle plumbing (`--libuv`) */
const PASSLB_LIBUV = { host: "127.0.5.5", port: 18080 };
const HAPROXY = { host: "127.0.5.3", port: 18080 };
const STREAM_BYTES = 128 * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);

const NAIVE = process.argv.includes("--naive");
const LEAN = process.argv.includes("--lean");
const LIBUV = process.argv.includes("--libuv");
const role = process.argv[process.argv.indexOf("--role") + 1];
if (process.argv.includes("--role") && role === "backend") await runBackend();
else if (process.argv.includes("--role") && role === "passlb") await runPasslb("net");
else if (process.argv.includes("--role") && role === "passlb-libuv") await runPasslb("experimental-libuv");
else await main();

// ---------------------------------------------------------------- backend
async function runBackend(): Promise<void> {
  const server = createServer({ noDelay: true }, (s) => {
    s.on("error", () => s.destroy());
    s.once("data", (first: Buffer) => {
      const mode = first[0];
      if (mode === 0x53 /* S */) {
        let left = STREAM_BYTES;
        const pump = () => {
          while (left > 0) {
            left -= CHUNK.length;
            if (!s.write(CHUNK)) return void s.once("drain", pump);
          }
          s.end();
        };
        pump();
      } else if (mode === 0x43 /* C */) {
        s.end("y");
      } else {
        s.write(first);
        s.on("data", (d) => s.write(d));
      }
    });
  });
  server.listen({ host: BACKEND.host, port: BACKEND.port }, () => process.send?.("ready"));
  process.on("disconnect", () => process.exit(0));
}

// ---------------------------------------------------------------- passlb under test
async function runPasslb(tcp: "net" | "experimental-libuv"): Promise<void> {
  const at = tcp === "experimental-libuv" ? PASSLB_LIBUV : PASSLB;
  const member = {
    node: "backend",
    zone: "",
    addresses: { IPv4: BACKEND.host },
    weight: 1,
    included: true,
    reason: "eligible" as const,
    explanation: "",
    ready: true,
    localReadyEndpoints: null,
  };
  const plan: LoadBalancerPlan = {
    service: "bench/proxy",
    uid: undefined,
    externalTrafficPolicy: "Cluster",
    ipFamilies: ["IPv4"],
    vips: [{ family: "IPv4", address: at.host, pool: "bench", source: "requested" }],
    listeners: [
      { name: "", protocol: "TCP", port: at.port, nodePort: BACKEND.port, targetPort: BACKEND.port },
    ],
    backends: [member],
    members: [member],
    healthChecks: [],
    weighted: false,
    zonalAffinity: false,
    sessionAffinity: { type: "None", timeoutSeconds: null },
    sourceRanges: [],
    ipMode: "Proxy",
    issues: [],
  };
  const lb = new UserspaceLb({ seed: 1, tcp });
  const findings = await lb.update([serviceForwarding(plan, ALL_UNKNOWN, { seed: 1 })]);
  if (findings.length > 0) throw new Error(JSON.stringify(findings));
  process.send?.("ready");
  process.on("disconnect", () => void lb.close().then(() => process.exit(0)));
}

// ---------------------------------------------------------------- load generator
type Target = { name: string; host: string; port: number };

function open(t: Target): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: t.host, port: t.port, noDelay: true });
    s.once("connect", () => resolve(s));
    s.once("error", reject);
  });
}

async function throughput(t: Target): Promise<number> {
  const t0 = process.hrtime.bigint();
  let bytes = 0;
  await Promise.all(
    [0, 1, 2, 3].map(async () => {
      const s = await open(t);
      s.write("S");
      await new Promise<void>((resolve, reject) => {
        s.on("data", (d: Buffer) => (bytes += d.length));
        s.once("end", () => resolve());
        s.once("error", reject);
      });
      s.destroy();
    }),
  );
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return bytes / secs / 1e6; // MB/s
}

async function connectionRate(t: Target, seconds: number): Promise<number> {
  const end = Date.now() + seconds * 1000;
  let done = 0;
  let failed = 0;
  const worker = async () => {
    while (Date.now() < end) {
      try {
        const s = await open(t);
        s.write("C");
        await new Promise<void>((resolve) => {
          s.once("data", () => resolve());
          s.once("close", () => resolve());
          s.once("error", () => resolve());
        });
        s.destroy();
        done++;
      } catch {
        failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
  if (failed > 0) console.error(`  ${t.name}: ${failed} connections failed`);
  return done / seconds;
}

async function latency(t: Target, seconds: number): Promise<{ p50: number; p99: number; n: number }> {
  const samples: number[] = [];
  const conns = await Promise.all(Array.from({ length: 10 }, () => open(t)));
  const stop = Date.now() + seconds * 1000;
  await Promise.all(
    conns.map(
      (s, i) =>
        new Promise<void>((resolve) => {
          let sentAt = 0n;
          s.on("data", () => {
            samples.push(Number(process.hrtime.bigint() - sentAt) / 1e3);
          });
          // 100 requests/s per connection, phases spread
          const tick = () => {
            if (Date.now() >= stop) {
              clearInterval(timer);
              setTimeout(resolve, 50);
              return;
            }
            sentAt = process.hrtime.bigint();
            s.write("p");
          };
          let timer: ReturnType<typeof setInterval>;
          setTimeout(() => {
            timer = setInterval(tick, 10);
          }, i);
        }),
    ),
  );
  for (const s of conns) s.destroy();
  samples.sort((a, b) => a - b);
  const q = (p: number) =>
    samples[Math.min(samples.length - 1, Math.floor(p * samples.length))] ?? Number.NaN;
  return { p50: q(0.5), p99: q(0.99), n: samples.length };
}

/** CPU seconds (user, system) a process has used so far, from /proc (Linux); NaN elsewhere. */
function cpuSeconds(pid: number | undefined): { user: number; system: number } {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 }; // clock ticks
  } catch {
    return { user: Number.NaN, system: Number.NaN };
  }
}

function child(roleName: string): Promise<ChildProcess> {
  const self = fileURLToPath(import.meta.url);
  const prof =
    process.env.PLB_BENCH_PROF === roleName
      ? ["--cpu-prof", "--cpu-prof-dir=/tmp/plbprof", "--cpu-prof-interval", "250"]
      : [];
  const c = spawn(process.execPath, [...prof, "--import", "tsx", self, "--role", roleName], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    c.once("message", () => resolve(c));
    c.once("exit", (code) => reject(new Error(`${roleName} exited ${code}`)));
  });
}

function haveHaproxy(): boolean {
  try {
    execFileSync("haproxy", ["-v"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  if (!haveHaproxy()) {
    if (process.getuid?.() === 0) {
      console.log("haproxy missing: installing it with apt-get");
      try {
        execFileSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", "haproxy"], {
          stdio: "inherit",
          env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
        });
      } catch {
        // reported below
      }
    }
    if (!haveHaproxy()) {
      console.log(
        "haproxy is not installed (and could not be installed): nothing to compare against, skipping",
      );
      return;
    }
  }
  const roundsArg = process.argv.indexOf("--rounds");
  const rounds = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 2;
  const dir = mkdtempSync(join(tmpdir(), "plb-bench-"));
  const cfg = join(dir, "haproxy.cfg");
  writeFileSync(
    cfg,
    [
      "global",
      "  nbthread 1",
      "  maxconn 4000",
      "defaults",
      "  mode tcp",
      "  timeout connect 3s",
      "  timeout client 30s",
      "  timeout server 30s",
      "listen bench",
      `  bind ${HAPROXY.host}:${HAPROXY.port}`,
      `  server b1 ${BACKEND.host}:${BACKEND.port}`,
      "",
    ].join("\n"),
  );
  const procs: ChildProcess[] = [];
  try {
    procs.push(await child("backend"));
    procs.push(await child("passlb"));
    const hap = spawn("haproxy", ["-db", "-f", cfg], { stdio: ["ignore", "ignore", "inherit"] });
    procs.push(hap);
    const until = Date.now() + 5000;
    for (;;) {
      const ok = await open({ name: "haproxy", ...HAPROXY }).then(
        (s) => {
          s.destroy();
          return true;
        },
        () => false,
      );
      if (ok) break;
      if (Date.now() > until || hap.exitCode !== null) throw new Error("haproxy did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
    console.log(
      `host: ${cpus().length} × ${cpus()[0]?.model ?? "?"}, load ${loadavg()
        .map((x) => x.toFixed(2))
        .join(" ")}, node ${process.version}`,
    );
    const targets: Target[] = [
      { name: "direct", ...BACKEND },
      { name: "haproxy", ...HAPROXY },
      { name: "passlb", ...PASSLB },
      ...(LIBUV ? [{ name: "passlb-libuv", ...PASSLB_LIBUV }] : []),
      ...(NAIVE ? [{ name: "naive", host: "127.0.5.4", port: 18080 }] : []),
      ...(LEAN
        ? [
            { name: "lean", host: "127.0.5.6", port: 18080 },
            { name: "lean-paused", host: "127.0.5.7", port: 18080 },
          ]
        : []),
    ];
    type Row = {
      mbps: number[];
      cps: number[];
      p50: number[];
      p99: number[];
      cpu: number[];
      sys: number[];
      gen: number[];
    };
    const res = new Map<string, Row>();
    for (const t of targets)
      res.set(t.name, { mbps: [], cps: [], p50: [], p99: [], cpu: [], sys: [], gen: [] });
    const pidOf: Record<string, number | undefined> = {
      haproxy: hap.pid,
      passlb: procs[1]!.pid,
      direct: procs[0]!.pid,
    };
    if (LIBUV) {
      const uv = await child("passlb-libuv");
      procs.push(uv);
      pidOf["passlb-libuv"] = uv.pid;
    }
    if (LEAN)
      for (const [name, host, extra] of [
        ["lean", "127.0.5.6", []],
        ["lean-paused", "127.0.5.7", ["--pause-on-connect"]],
      ] as const) {
        const lean = spawn(
          process.execPath,
          [fileURLToPath(new URL("lean-node-proxy.mjs", import.meta.url)), host, ...extra],
          { stdio: "inherit" },
        );
        procs.push(lean);
        pidOf[name] = lean.pid;
      }
    if (LEAN) await new Promise((r) => setTimeout(r, 1000));
    if (NAIVE) {
      // a minimal Node proxy (createServer + connect + pipe), to tell Node's cost from ours
      const naive = spawn(
        process.execPath,
        [fileURLToPath(new URL("naive-node-proxy.mjs", import.meta.url))],
        {
          stdio: "inherit",
        },
      );
      procs.push(naive);
      pidOf.naive = naive.pid;
      await new Promise((r) => setTimeout(r, 1000));
    }
    /**
     * connections/s; the CPU µs per connection of the path's proxy (the backend's for
     * direct), its system part, and the load generator's own CPU µs per connection
     */
    const measureRate = async (t: Target) => {
      const before = cpuSeconds(pidOf[t.name]);
      const gen0 = process.cpuUsage();
      const rate = await connectionRate(t, 3);
      const gen = process.cpuUsage(gen0);
      const after = cpuSeconds(pidOf[t.name]);
      const n = rate * 3;
      const row = res.get(t.name)!;
      row.cps.push(rate);
      row.cpu.push(((after.user - before.user + after.system - before.system) * 1e6) / n);
      row.sys.push(((after.system - before.system) * 1e6) / n);
      row.gen.push((gen.user + gen.system) / n);
      return rate;
    };
    const quick = process.argv.includes("--rate-only");
    const loads: number[] = [loadavg()[0]!];
    const ratios = { mbps: [] as number[], cps: [] as number[], cpu: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      // rotate the order so no path always runs first (or right after another)
      const order = targets.map((_, i) => targets[(i + r) % targets.length]!);
      if (!quick) for (const t of order) res.get(t.name)!.mbps.push(await throughput(t));
      for (const t of order) await measureRate(t);
      if (!quick)
        for (const t of order) {
          const l = await latency(t, 3);
          res.get(t.name)!.p50.push(l.p50);
          res.get(t.name)!.p99.push(l.p99);
        }
      const h = res.get("haproxy")!;
      const p = res.get("passlb")!;
      if (!quick) ratios.mbps.push(p.mbps.at(-1)! / h.mbps.at(-1)!);
      ratios.cps.push(p.cps.at(-1)! / h.cps.at(-1)!);
      ratios.cpu.push(p.cpu.at(-1)! / h.cpu.at(-1)!);
      loads.push(loadavg()[0]!);
      console.log(
        `round ${r + 1}: load ${loads.at(-1)!.toFixed(2)}; passlb/haproxy${quick ? "" : ` throughput ${ratios.mbps.at(-1)!.toFixed(2)},`} connection rate ${ratios.cps.at(-1)!.toFixed(2)} (${p.cps.at(-1)!.toFixed(0)} vs ${h.cps.at(-1)!.toFixed(0)}/s), CPU per connection ${ratios.cpu.at(-1)!.toFixed(1)}×`,
      );
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
    const m = (name: string) => {
      const x = res.get(name)!;
      return {
        mbps: median(x.mbps),
        cps: median(x.cps),
        p50: median(x.p50),
        p99: median(x.p99),
        cpu: median(x.cpu),
        sys: median(x.sys),
        gen: median(x.gen),
      };
    };
    const d = m("direct");
    const h = m("haproxy");
    const p = m("passlb");
    console.log(`rounds: ${rounds} (medians)`);
    console.log(
      "path         throughput MB/s   connections/s   CPU µs/conn (sys)   client µs/conn   p50 µs   p99 µs   added p99 µs",
    );
    const f = (x: number, w: number) => (Number.isNaN(x) ? "-" : x.toFixed(0)).padStart(w);
    for (const [name, x] of [
      ["direct", d],
      ["haproxy", h],
      ["passlb", p],
      ...(LIBUV ? [["passlb-libuv", m("passlb-libuv")] as const] : []),
      ...(NAIVE ? [["naive", m("naive")] as const] : []),
      ...(LEAN ? ([["lean", m("lean")] as const, ["lean-paused", m("lean-paused")] as const] as const) : []),
    ] as const)
      console.log(
        `${name.padEnd(12)} ${f(x.mbps, 15)} ${f(x.cps, 15)} ${f(x.cpu, 11)} ${`(${f(x.sys, 0)})`.padStart(7)} ${f(x.gen, 16)} ${f(x.p50, 8)} ${f(x.p99, 8)} ${(name === "direct" ? "-" : f(x.p99 - d.p99, 0)).padStart(14)}`,
      );
    if (LIBUV) {
      const n = m("passlb-libuv");
      console.log(
        `passlb-libuv (experimental) / haproxy, medians:${quick ? "" : ` throughput ${(n.mbps / h.mbps).toFixed(2)},`} connection rate ${(n.cps / h.cps).toFixed(2)}, CPU per connection ${(n.cpu / h.cpu).toFixed(1)}×`,
      );
    }
    if (LEAN) {
      const l = m("lean");
      const lp = m("lean-paused");
      console.log(
        `lean (node:net's floor) / haproxy, medians: connection rate ${(l.cps / h.cps).toFixed(2)}, CPU per connection ${(l.cpu / h.cpu).toFixed(1)}×; passlb / lean CPU per connection ${(p.cpu / l.cpu).toFixed(2)}×; lean-paused / lean ${(lp.cpu / l.cpu).toFixed(2)}×`,
      );
    }
    const cpuTotal = process.cpuUsage();
    console.log(
      `load average (1 min) from ${loads[0]!.toFixed(2)} to ${loads.at(-1)!.toFixed(2)} (max ${Math.max(...loads).toFixed(2)}); load generator CPU ${((cpuTotal.user + cpuTotal.system) / 1e6).toFixed(1)} s`,
    );
    console.log(
      `ratio passlb/haproxy (median of rounds):${quick ? "" : ` throughput ${median(ratios.mbps).toFixed(2)} (goal ≥ 1.1),`} connection rate ${median(ratios.cps).toFixed(2)} (goal ≥ 1.0), CPU per connection ${median(ratios.cpu).toFixed(1)}×${quick ? "" : `; added p99 at 1,000 requests/s: passlb ${f(p.p99 - d.p99, 0)} µs, haproxy ${f(h.p99 - d.p99, 0)} µs`}`,
    );
  } finally {
    await Promise.all(
      procs.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            const hard = setTimeout(() => c.kill("SIGKILL"), 3000);
            c.once("exit", () => {
              clearTimeout(hard);
              resolve();
            });
            if (c.connected) c.disconnect();
            else c.kill("SIGTERM");
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  }
}
