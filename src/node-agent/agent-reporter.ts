/**
 * The node agent's voice: every line, finding and warning its parts have, told to one
 * `AgentSink` (the CLI's JSON logger and Observer; the quickstart's error list). The
 * reporter says a thing once when it changes (the folder's problems, the node's
 * eligibility, the health model's findings), not again on every read while it lasts.
 * Deliberately not here: the log format, where lines go.
 */
import type { Finding } from "../plan/load-balancer-plan.ts";

export type AgentLogLevel = "info" | "error";

export interface AgentSink {
  log(level: AgentLogLevel, event: string, reason: string | undefined, line: string): void;
  /** a health server that cannot bind, and other one-off findings */
  finding(finding: Finding): void;
  /** the health model's current findings (replaces the previous ones) */
  setFindings(findings: readonly Finding[]): void;
}

export class AgentReporter {
  readonly #sink: AgentSink;
  #lastProblems = "";
  #lastEligibility = "";
  #lastFindings = "";

  constructor(sink: AgentSink) {
    this.#sink = sink;
  }

  info(line: string, event = "agent", reason?: string): void {
    this.#sink.log("info", event, reason, line);
  }

  error(line: string, event: string, reason: string): void {
    this.#sink.log("error", event, reason, line);
  }

  finding(f: Finding): void {
    this.#sink.finding(f);
  }

  /** a read of the input: its problems, when they changed */
  readProblems(problems: readonly string[] | undefined, haveGood: boolean): void {
    const report = problems === undefined ? "" : problems.join("\n  ");
    if (report === this.#lastProblems) return;
    this.#lastProblems = report;
    if (problems === undefined) this.info("the manifests are valid again", "input_read", "valid");
    else
      this.info(
        `the manifests have problems; ${haveGood ? "keeping the last good state" : "no good state yet"}:\n  ${report}`,
        "input_read",
        "invalid",
      );
  }

  eligibility(node: string, eligible: boolean, reason: string | undefined): void {
    const line = eligible
      ? `Node ${node} is eligible`
      : `Node ${node} is not eligible (/healthz answers 503): ${reason}`;
    if (line === this.#lastEligibility) return;
    this.#lastEligibility = line;
    this.info(line, "node_eligibility", eligible ? "eligible" : "ineligible");
  }

  findings(findings: readonly Finding[]): void {
    const text = findings.map((f) => `${f.severity} ${f.code} ${f.subject}: ${f.message}`).join("\n");
    if (text === this.#lastFindings) return;
    this.#lastFindings = text;
    this.#sink.setFindings(findings);
  }
}
