/**
 * Adapter glue: a KubeSnapshotSource's list and watch outcomes told to a KubeApiCallSink as
 * the `reads` channel (cluster/kube-api-health.ts), for `passlb controller` and
 * `passlb lb --kubeconfig`. Deliberately not here: the decision (the pure module) and the
 * signals (web/kube-api-monitor.ts).
 */
import { PasslbError } from "../errors.ts";
import type { KubeApiCallSink } from "./kube-api-health.ts";
import type { KubeSourceOptions } from "./kube-source.ts";

/**
 * The source's list and watch failures as the `reads` channel. A success is a list that
 * answered (listing, then watching) or a watch that ran and ended as watches do (closed by
 * the server, or 410 and a relist) — not merely a watch being asked for, which a server that
 * refuses every watch would otherwise turn into a success each time.
 */
export function sourceReadsReport(calls: KubeApiCallSink): Pick<KubeSourceOptions, "onRestart" | "onState"> {
  const last = new Map<string, string>();
  return {
    onRestart: (resource, reason, detail, _delayMs, status) => {
      if (reason === "closed" || reason === "expired") {
        calls.ok("reads", resource);
        return;
      }
      if (reason !== "error") return;
      const verb = detail.startsWith("list") ? "list" : "watch";
      const code = status === undefined ? "api_unreachable" : "api_request_failed";
      calls.failed(
        "reads",
        { verb, resource },
        new PasslbError(code, `${verb} ${resource}: ${detail}`, {
          details: status === undefined ? {} : { status },
        }),
      );
    },
    onState: (resource, state) => {
      if (state === "watching" && last.get(resource) === "listing") calls.ok("reads", resource);
      last.set(resource, state);
    },
  };
}
