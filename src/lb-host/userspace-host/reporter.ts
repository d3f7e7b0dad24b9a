/**
 * The userspace LB host's voice: each thing said once, when it appears or changes — the
 * input's problems (and that it is valid again), the decoder's notices, the plan issues
 * and each `ns/name: ingress ADDRESS ipMode Proxy` line — not again on every read while it
 * lasts (as the node agent's reporter, node-agent/agent-reporter.ts). Deliberately not
 * here: where the lines go (UserspaceLbSink).
 */
import type { LoadBalancerPlan } from "../../plan/load-balancer-plan.ts";
import type { UserspaceLbSink } from "./lb-host-drivers.ts";

export class UserspaceLbReporter {
  readonly #sink: UserspaceLbSink;
  #lastProblems = "";
  #notices = new Set<string>();
  #announced = new Set<string>();

  constructor(sink: UserspaceLbSink) {
    this.#sink = sink;
  }

  /** a read of the manifests: its problems (each naming its file), when they changed */
  readProblems(problems: readonly string[] | undefined, haveGood: boolean): void {
    const report = problems === undefined ? "" : problems.join("\n  ");
    if (report === this.#lastProblems) return;
    this.#lastProblems = report;
    if (problems === undefined) {
      this.#sink.err("passlb lb: the manifests are valid again\n");
      this.#sink.logger.log(
        "info",
        { event: "input_read", reason: "valid" },
        "the manifests are valid again",
      );
      return;
    }
    // no good state yet: the caller refuses to start (userspace-host/build-userspace-lb-host.ts)
    if (!haveGood) return;
    const line = `the manifests have problems; keeping the last good state:\n  ${report}`;
    this.#sink.err(`passlb lb: ${line}\n`);
    this.#sink.logger.log("error", { event: "input_read", reason: "invalid" }, line);
  }

  /** the first read's refusal, as `passlb lb -f` always printed it (cli/load-input.ts) */
  firstReadFailed(problems: readonly string[]): void {
    this.#sink.err(`error: the input has ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n`);
    for (const p of problems) this.#sink.err(`  ${p}\n`);
  }

  notices(notices: readonly string[]): void {
    for (const n of notices) if (!this.#notices.has(n)) this.#sink.err(`notice: ${n}\n`);
    this.#notices = new Set(notices);
  }

  /** the plans now served: issues and VIPs that appeared since the last read */
  planned(plans: readonly LoadBalancerPlan[]): void {
    const seen = new Set<string>();
    for (const p of plans) {
      for (const i of p.issues) {
        const key = `issue ${i.code} ${i.subject} ${i.message}`;
        seen.add(key);
        if (!this.#announced.has(key)) this.#sink.logger.finding(i, "plan_issue");
      }
      for (const v of p.vips) {
        const key = `${p.service}: ingress ${v.address}`;
        seen.add(key);
        if (!this.#announced.has(key)) this.#sink.out(`  ${key} ipMode ${p.ipMode}\n`);
      }
    }
    this.#announced = seen;
  }
}
