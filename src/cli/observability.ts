/**
 * The observability wiring every long-running command shares, so each command adds it in
 * a few lines: the `--dashboard-address` and `--log-level` flags, the JSON-lines logger
 * on the command's stderr, the Metrics registry, the Observer, and the dashboard server
 * (page, `/api/v1/state`, `/metrics`, `/healthz`, `/readyz`).
 *
 * A dashboard that cannot bind (port in use) is a logged finding, not a failed command:
 * the data path matters more than its window. `off` (or an empty address) disables it.
 */
import type { Command } from "commander";
import { parseBindAddress } from "../node-agent/agent-config.ts";
import { DashboardServer } from "../web/dashboard-server.ts";
import { createLogger, LOG_LEVELS, type Logger, type LogLevel, parseLogLevel } from "../web/logger.ts";
import { Metrics } from "../web/metrics.ts";
import { Observer } from "../web/observer.ts";
import type { CliIo } from "./load-input.ts";

export interface ObservabilityFlags {
  dashboardAddress: string;
  logLevel: string;
}

export interface Observability {
  readonly observer: Observer;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** starts the dashboard server; its URL (`http://127.0.0.1:9797/`), or undefined when off or not bound */
  serve(): Promise<string | undefined>;
  close(): Promise<void>;
}

export function addObservabilityOptions(
  command: Command,
  defaultAddress: string,
  defaultLevel: LogLevel = "info",
): Command {
  return command
    .option(
      "--dashboard-address <host:port>",
      "dashboard, /api/v1/state and /metrics (loopback by default; 'off' disables)",
      defaultAddress,
    )
    .option("--log-level <level>", `JSON-lines log level: ${LOG_LEVELS.join(", ")}`, defaultLevel);
}

/** Validates the flags; returns an error message for the user, or the pieces (call `serve()` to open the dashboard). */
export async function startObservability(
  flags: ObservabilityFlags,
  context: { io: CliIo; process: string; component: string; dataplane: string; now?: () => number },
): Promise<Observability | string> {
  const level = parseLogLevel(flags.logLevel);
  if (!level) return `--log-level ${flags.logLevel}: expected one of ${LOG_LEVELS.join(", ")}`;
  const off = flags.dashboardAddress === "" || flags.dashboardAddress === "off";
  const bind = off ? undefined : parseBindAddress(flags.dashboardAddress);
  if (!off && !bind) return `--dashboard-address ${flags.dashboardAddress}: expected host:port or off`;
  const logger = createLogger({
    level,
    component: context.component,
    write: (line) => context.io.stderr(line),
  });
  const metrics = new Metrics({ processMetrics: true });
  const observer = new Observer({
    process: context.process,
    dataplane: context.dataplane,
    now: context.now ?? Date.now,
    metrics,
    logger,
  });
  let server: DashboardServer | undefined;
  const serve = async (): Promise<string | undefined> => {
    if (!bind || server) return server?.url;
    const candidate = new DashboardServer({
      host: bind.host ?? "::",
      port: bind.port,
      state: () => observer.state(),
      readiness: () => observer.readiness(),
      metrics,
    });
    try {
      const { url } = await candidate.start();
      server = candidate;
      logger.log("info", { event: "dashboard_listening", url }, `dashboard and /metrics on ${url}`);
      return url;
    } catch (e) {
      logger.finding({
        code: "dashboard_bind_failed",
        severity: "warning",
        subject: `Address ${flags.dashboardAddress}`,
        message: `dashboard not served: ${(e as Error).message}`,
      });
      return undefined;
    }
  };
  return {
    observer,
    logger,
    metrics,
    serve,
    close: async () => {
      await server?.close();
    },
  };
}
