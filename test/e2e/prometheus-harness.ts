/**
 * A real Prometheus for the lab tests (docs/alerts.md "Proven against a real Prometheus"):
 * Debian's `prometheus` on 127.0.0.1 (a free port), its configuration and its storage in a
 * temporary directory, scrape and evaluation every second, stopped and removed when the test
 * ends; the rules it loads with every duration divided by a factor (`scaledRules`); and its
 * HTTP API read back (/api/v1/alerts, /api/v1/query, /api/v1/targets).
 *
 * The lab's processes listen on their own namespace's loopback (`passlb lb` 127.0.0.1:9797,
 * `passlb agent` 127.0.0.1:10249): `relayTarget` runs src/lab/unix-relay.ts inside the
 * namespace (TCP there → a Unix socket file) and a loopback TCP port in the test process in
 * front of that socket, so Prometheus scrapes 127.0.0.1 only.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { parse, stringify } from "yaml";
import { REPO_ROOT, sleep } from "./lab-harness.ts";

export function prometheusUnavailable(): string | undefined {
  if (spawnSync("prometheus", ["--version"]).error)
    return "Prometheus is not installed (Debian package prometheus)";
  return undefined;
}

export interface ScrapeTarget {
  readonly job: string;
  /** the `instance` label: the lab host's name */
  readonly instance: string;
  /** host:port on 127.0.0.1 */
  readonly address: string;
}

export interface PromAlert {
  readonly labels: Record<string, string>;
  readonly state: "pending" | "firing";
  readonly activeAt: string;
}

/** Relays `to` (an address inside namespace `ns`) to a loopback port here; closed with the test. */
export async function relayTarget(t: TestContext, ns: string, to: string, dir: string): Promise<string> {
  const sock = join(dir, `${ns}-${to.replace(/[^\w]/g, "_")}.sock`);
  const child: ChildProcess = spawn(
    "ip",
    [
      "netns",
      "exec",
      ns,
      process.execPath,
      "--import",
      "tsx",
      "src/lab/unix-relay.ts",
      "--listen",
      sock,
      "--to",
      to,
    ],
    { cwd: REPO_ROOT, stdio: "ignore" },
  );
  child.on("error", () => {});
  t.after(() => void child.kill("SIGTERM"));
  // up to 30 s: a dozen relays compiling their TypeScript at once on a loaded 2-core machine
  // took more than 10 s
  for (let i = 0; i < 600 && !existsSync(sock) && child.exitCode === null; i++) await sleep(50);
  if (!existsSync(sock)) throw new Error(`relay for ${to} in ${ns} did not start`);
  const open = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const outbound = connect(sock);
    for (const s of [inbound, outbound]) {
      open.add(s);
      s.on("error", () => {}).on("close", () => {
        inbound.destroy();
        outbound.destroy();
        open.delete(s);
      });
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  t.after(() => {
    for (const s of open) s.destroy();
    server.close();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const a = server.address();
  if (!a || typeof a === "string") throw new Error("relay: no port");
  return `127.0.0.1:${a.port}`;
}

const UNIT_S: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };

/** A Prometheus duration divided by `factor`, in milliseconds (Prometheus has no fractions). */
export function scaledDuration(d: string, factor: number): string {
  const m = /^(\d+)(ms|s|m|h)$/.exec(d);
  if (!m) throw new Error(`unsupported duration ${d}`);
  return `${Math.round((Number(m[1]) * UNIT_S[m[2]!]! * 1000) / factor)}ms`;
}

/** The rules file with every `for:` and every range window divided by `factor`, or by
 * `perAlert[name]` for the alerts named there. */
export function scaledRules(
  text: string,
  factor: number,
  perAlert: Readonly<Record<string, number>> = {},
): string {
  const doc = parse(text) as { groups: { rules: { alert?: string; for?: string; expr: string }[] }[] };
  for (const g of doc.groups)
    for (const r of g.rules) {
      const f = (r.alert && perAlert[r.alert]) || factor;
      if (r.for) r.for = scaledDuration(r.for, f);
      r.expr = r.expr.replace(/\[(\d+(?:ms|s|m|h))\]/g, (_, d: string) => `[${scaledDuration(d, f)}]`);
    }
  return stringify(doc);
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const a = s.address();
  await new Promise((r) => s.close(r));
  if (!a || typeof a === "string") throw new Error("no free port");
  return a.port;
}

export class Prometheus {
  readonly url: string;
  readonly name: string;

  private constructor(name: string, url: string) {
    this.name = name;
    this.url = url;
  }

  /** Starts Prometheus scraping `targets` every second with `rules` loaded; stopped with the test. */
  static async start(
    t: TestContext,
    name: string,
    targets: readonly ScrapeTarget[],
    rules: string,
  ): Promise<Prometheus> {
    const dir = mkdtempSync(join(tmpdir(), `plb-prom-${name}-`));
    const jobs = [...new Set(targets.map((x) => x.job))];
    const config = {
      global: { scrape_interval: "1s", scrape_timeout: "900ms", evaluation_interval: "1s" },
      rule_files: [join(dir, "rules.yaml")],
      scrape_configs: jobs.map((job) => ({
        job_name: job,
        static_configs: targets
          .filter((x) => x.job === job)
          .map((x) => ({ targets: [x.address], labels: { instance: x.instance } })),
      })),
    };
    writeFileSync(join(dir, "rules.yaml"), rules);
    writeFileSync(join(dir, "prometheus.yml"), stringify(config));
    const port = await freePort();
    const child = spawn(
      "prometheus",
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--storage.tsdb.retention.time=1h",
        "--log.level=warn",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      stderr = (stderr + d).slice(-4000);
    });
    child.on("error", () => {});
    t.after(async () => {
      child.kill("SIGTERM");
      for (let i = 0; i < 100 && child.exitCode === null && child.signalCode === null; i++) await sleep(50);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    });
    const p = new Prometheus(name, `http://127.0.0.1:${port}`);
    for (let i = 0; i < 200; i++) {
      if (child.exitCode !== null) throw new Error(`prometheus exited: ${stderr}`);
      const ok = await fetch(`${p.url}/-/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return p;
      await sleep(100);
    }
    throw new Error(`prometheus not ready: ${stderr}`);
  }

  async #get<T>(path: string): Promise<T> {
    const r = await fetch(`${this.url}${path}`);
    const body = (await r.json()) as { status: string; data: T; error?: string };
    if (body.status !== "success") throw new Error(`${this.name} ${path}: ${body.error}`);
    return body.data;
  }

  async alerts(): Promise<PromAlert[]> {
    return (await this.#get<{ alerts: PromAlert[] }>("/api/v1/alerts")).alerts;
  }

  async query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]> {
    return (
      await this.#get<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
        `/api/v1/query?query=${encodeURIComponent(expr)}`,
      )
    ).result;
  }

  /** scrape targets that are not up */
  async targetsDown(): Promise<string[]> {
    const d = await this.#get<{
      activeTargets: { labels: Record<string, string>; health: string; lastError: string }[];
    }>("/api/v1/targets");
    return d.activeTargets
      .filter((x) => x.health !== "up")
      .map((x) => `${x.labels.job}/${x.labels.instance}: ${x.health} ${x.lastError}`);
  }
}
