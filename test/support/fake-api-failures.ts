/**
 * Test-only: injected failures of the fake Kubernetes API server (`failNext`): the next N
 * requests matching a verb, resource and subresource answer with a given HTTP status and
 * the reason kube-apiserver gives that status (apimachinery pkg/apis/meta/v1 types.go
 * StatusReason). They are checked after authentication and authorization, so an injected
 * failure still counts as a use of the grant that allowed the request.
 */
import type { FakeVerb } from "./fake-api-routes.ts";
import { ApiStatusError } from "./fake-api-status.ts";

export interface FailureRule {
  /** one verb or several; any when left out */
  readonly verb?: FakeVerb | readonly FakeVerb[];
  /** resource key: "services", "discovery.k8s.io/endpointslices", "passlb.io/loadbalancerippools" */
  readonly resource?: string;
  /** "status" for the status subresource, "" for the main resource; either when left out */
  readonly subresource?: string;
  /** how many matching requests fail (default 1) */
  readonly count?: number;
  /** HTTP status: 409 answers Conflict, 500 InternalError, 410 Expired, others a generic reason */
  readonly status: number;
  readonly message?: string;
}

const REASONS: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  409: "Conflict",
  410: "Expired",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
};

export class FakeFailures {
  readonly #rules: (FailureRule & { left: number })[] = [];

  add(rule: FailureRule): void {
    this.#rules.push({ ...rule, left: rule.count ?? 1 });
  }

  /** Drops every rule not used up yet. */
  clear(): void {
    this.#rules.length = 0;
  }

  /** Throws the injected failure for this request, if one is due. */
  check(verb: FakeVerb, key: string, sub: string): void {
    const i = this.#rules.findIndex((f) => {
      const verbs = f.verb === undefined ? undefined : typeof f.verb === "string" ? [f.verb] : f.verb;
      if (verbs && !verbs.includes(verb)) return false;
      if (f.resource !== undefined && f.resource !== key) return false;
      if (f.subresource !== undefined && f.subresource !== sub) return false;
      return f.left > 0;
    });
    const rule = this.#rules[i];
    if (!rule) return;
    rule.left -= 1;
    if (rule.left <= 0) this.#rules.splice(i, 1);
    const reason = REASONS[rule.status] ?? "InternalError";
    throw new ApiStatusError(rule.status, reason, rule.message ?? `injected failure (${reason})`);
  }
}
