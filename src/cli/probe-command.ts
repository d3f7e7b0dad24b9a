/**
 * `passlb probe URL…`: a debugging aid. Probes each target (`http://ip:port/path`,
 * `https://…`, `tcp://ip:port`) with the prober passlb uses, prints every result and
 * every transition, and stops after `--count` rounds or on the shutdown signal. Exit 0
 * when every target ended healthy or unknown, 1 otherwise, 2 on bad arguments.
 */
import type { Command } from "commander";
import { realClock } from "../health/clock.ts";
import { ProbeConnections } from "../health/probe-connections.ts";
import { Prober } from "../health/prober.ts";
import { type ProbeTarget, targetKey } from "../health/state-probe-targets.ts";
import { canonicalIp } from "../net/ip.ts";
import type { HealthCheckProtocol } from "../plan/load-balancer-plan.ts";
import type { CliIo } from "./load-input.ts";

interface ProbeOptions {
  interval: string;
  timeout: string;
  healthy: string;
  unhealthy: string;
  count: string;
  weight?: boolean;
}

/** `http://192.0.2.1:10256/healthz` → a target; undefined when not understood */
export function parseProbeUrl(
  text: string,
  params: Omit<ProbeTarget, "key" | "protocol" | "family" | "address" | "port" | "path" | "users">,
): ProbeTarget | undefined {
  const m = /^(http|https|tcp):\/\/(?:\[([^\]]+)\]|([^/:[\]]+)):(\d{1,5})(\/[^\s]*)?$/i.exec(text);
  if (!m) return undefined;
  const protocol = (m[1] ?? "").toUpperCase() as HealthCheckProtocol;
  const address = canonicalIp(m[2] ?? m[3] ?? "");
  const port = Number(m[4]);
  if (address === undefined || port < 1 || port > 65535) return undefined;
  const path = protocol === "TCP" ? null : (m[5] ?? "/");
  return {
    key: targetKey({ protocol, address, port, path }),
    protocol,
    family: address.includes(":") ? "IPv6" : "IPv4",
    address,
    port,
    path,
    ...params,
    users: [{ service: "-", check: "cli", node: text }],
  };
}

export function registerProbeCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  shutdownSignal: () => AbortSignal,
): void {
  program
    .command("probe")
    .description("probe health-check targets the way the load balancer does, and print what happens")
    .argument("<url...>", "http://IP:PORT/PATH, https://IP:PORT/PATH or tcp://IP:PORT")
    .option("--interval <seconds>", "seconds between probes of a target", "1")
    .option("--timeout <seconds>", "seconds before a probe fails", "1")
    .option("--healthy <n>", "consecutive successes to become healthy", "1")
    .option("--unhealthy <n>", "consecutive failures to become unhealthy", "2")
    .option("--count <n>", "rounds before stopping (0: until interrupted)", "3")
    .option("--weight", "read X-Load-Balancing-Endpoint-Weight")
    .action(async (urls: string[], opts: ProbeOptions) => {
      const n = (v: string) => Number(v);
      const [interval, timeout, healthy, unhealthy, count] = [
        opts.interval,
        opts.timeout,
        opts.healthy,
        opts.unhealthy,
        opts.count,
      ].map(n) as [number, number, number, number, number];
      if (!(interval > 0 && timeout > 0 && healthy >= 1 && unhealthy >= 1 && count >= 0)) {
        io.stderr(
          "error: --interval and --timeout must be positive, thresholds at least 1, --count at least 0\n",
        );
        return setExitCode(2);
      }
      const params = {
        intervalMs: interval * 1000,
        timeoutMs: Math.min(timeout, interval) * 1000,
        healthyThreshold: healthy,
        unhealthyThreshold: unhealthy,
        readsWeight: opts.weight === true,
      };
      const targets: ProbeTarget[] = [];
      for (const url of urls) {
        const t = parseProbeUrl(url, params);
        if (!t) {
          io.stderr(`error: ${url}: expected http://IP:PORT/PATH, https://IP:PORT/PATH or tcp://IP:PORT\n`);
          return setExitCode(2);
        }
        targets.push(t);
      }
      const signal = shutdownSignal();
      const clock = realClock();
      const start = clock.now();
      const connections = new ProbeConnections();
      const seconds = (at: number) => ((at - start) / 1000).toFixed(3).padStart(8);
      const rounds = new Map<string, number>();
      let stop: () => void = () => {};
      const finished = new Promise<void>((resolve) => {
        stop = resolve;
      });
      const prober = new Prober({
        clock,
        probe: connections.probe,
        forget: (key) => connections.forget(key),
        seed: Math.floor(start),
        maxConcurrent: 64,
        onProbe: (r) => {
          const w = r.outcome.weight === undefined ? "" : ` weight ${r.outcome.weight}`;
          io.stdout(
            `${seconds(r.finishedAt)}s ${r.key}: ${r.outcome.ok ? "ok  " : "FAIL"} ${r.outcome.reason}${w} (${(r.finishedAt - r.startedAt).toFixed(1)} ms)\n`,
          );
          rounds.set(r.key, (rounds.get(r.key) ?? 0) + 1);
          if (count > 0 && targets.every((t) => (rounds.get(t.key) ?? 0) >= count)) stop();
        },
        onEvent: (e) =>
          io.stdout(
            e.kind === "transition"
              ? `${seconds(e.at)}s ${e.target.key}: ${e.from} → ${e.to} (${e.reason})\n`
              : `${seconds(e.at)}s ${e.target.key}: weight ${e.from ?? "none"} → ${e.to}\n`,
          ),
      });
      signal.addEventListener("abort", () => stop(), { once: true });
      prober.setTargets(targets);
      await finished;
      const states = prober.states();
      await prober.close();
      connections.close();
      const bad = targets.filter((t) => states.get(t.key)?.state === "unhealthy");
      for (const t of targets) io.stdout(`${t.key}: ${states.get(t.key)?.state ?? "unknown"}\n`);
      setExitCode(bad.length > 0 ? 1 : 0);
    });
}
