/**
 * Adapter: passlb's structured logs, JSON lines through pino. Every line carries a stable
 * snake_case `event` (what happened: `health_transition`, `finding`, `dashboard_listening`)
 * and, when it has one, a stable `reason` (why: a finding's code, a probe's failure
 * reason), plus `service` / `node` when it is about one — so operators filter with `jq`
 * or their log pipeline instead of regexes over prose.
 *
 * Fields are flat primitives by type (`LogFields`): an object cannot be dumped into a log
 * line by accident, and pino's redaction blanks the usual secret keys anyway. The level
 * comes from `--log-level`. Not here: deciding what to log (the adapters) or Kubernetes
 * Events (`passlb controller` records those: src/controller, docs/controller.md).
 */
import { type DestinationStream, type Logger as PinoLogger, pino } from "pino";
import type { Finding, Severity } from "../plan/load-balancer-plan.ts";

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function parseLogLevel(text: string): LogLevel | undefined {
  return (LOG_LEVELS as readonly string[]).includes(text) ? (text as LogLevel) : undefined;
}

export type LogFields = Readonly<Record<string, string | number | boolean | null | undefined>>;

export interface LogEntry extends LogFields {
  readonly event: string;
  readonly reason?: string | undefined;
  readonly service?: string | undefined;
  readonly node?: string | undefined;
}

type EmitLevel = "debug" | "info" | "warn" | "error";

export interface Logger {
  log(level: EmitLevel, entry: LogEntry, message: string): void;
  /** a finding as one line: `event` (default `finding`), `reason` = its code, subject split into service/node */
  finding(f: Finding, event?: string): void;
  child(fields: LogFields): Logger;
}

export interface LoggerOptions {
  readonly level: LogLevel;
  /** `up`, `lb`, `agent`: the `component` field of every line */
  readonly component: string;
  /** where lines go; default stderr (fd 2), written synchronously so the last lines survive an exit */
  readonly write?: (line: string) => void;
}

const LEVEL_OF: Record<Severity, EmitLevel> = { error: "error", warning: "warn", info: "info" };

/** keys whose values never reach a log line */
const REDACT = [
  "token",
  "password",
  "authorization",
  "secret",
  "bearerToken",
  "clientKey",
  "*.token",
  "*.password",
  "*.authorization",
  "*.secret",
];

export function createLogger(options: LoggerOptions): Logger {
  const write = options.write;
  const destination: DestinationStream = write
    ? { write: (s: string) => write(s) }
    : pino.destination({ fd: 2, sync: true });
  const root = pino(
    {
      level: options.level,
      base: { component: options.component },
      timestamp: pino.stdTimeFunctions.isoTime,
      messageKey: "msg",
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT, censor: "[redacted]" },
    },
    destination,
  );
  return wrap(root);
}

/** Splits `Service ns/name` and `Node n1` subjects into the fields logs are filtered by. */
export function subjectFields(subject: string): { service?: string; node?: string; subject: string } {
  const m = /^(Service|Node) (\S+)$/.exec(subject);
  if (m?.[1] === "Service") return { service: m[2]!, subject };
  if (m?.[1] === "Node") return { node: m[2]!, subject };
  return { subject };
}

function wrap(p: PinoLogger): Logger {
  return {
    log(level, entry, message) {
      p[level](entry, message);
    },
    finding(f, event = "finding") {
      p[LEVEL_OF[f.severity]](
        { event, reason: f.code, severity: f.severity, ...subjectFields(f.subject) },
        f.message,
      );
    },
    child(fields) {
      return wrap(p.child(fields));
    },
  };
}
