/**
 * Operational failures: one error class with a stable code from one catalogue
 * (docs/errors.md lists them; a test keeps the two in step). Expected findings about the
 * input are not errors but data (planner issues, input problems); bugs throw plain Errors.
 */

export const ERROR_CODES = {
  input_unreadable: "a manifest path could not be read",
  input_invalid: "the manifests have problems (each is listed with file, object and field)",
  port_in_use: "a listener could not bind its address",
  nft_failed: "nft refused a ruleset transaction",
  nft_unavailable: "the nft command or the kernel's nf_tables is not available",
  conntrack_failed: "the conntrack tool refused to delete flow entries",
  conntrack_unavailable: "the conntrack command (Debian package conntrack) is not available",
  route_failed: "ip refused a policy-routing update (rule or route for a node mark)",
  tunnel_failed: "ip could not create or raise a tunnel device (encap on the LB host, decap on a node)",
  bpf_unavailable: "bpftool, ip with XDP support, a bpffs mount or the compiled XDP program is missing",
  bpf_failed: "bpftool or ip refused to load, attach or update the XDP program or its maps",
  conntrack_sysctl_failed: "the kernel's conntrack sizes could not be read or nf_conntrack_max set",
  api_unreachable: "the Kubernetes API server could not be reached",
  api_config_invalid: "the kubeconfig or in-cluster configuration could not be loaded",
  api_request_failed: "the Kubernetes API server answered a request with an error status",
  api_answer_invalid:
    "the Kubernetes API server's answer to a list is not usable (not JSON, or a field of the wrong type)",
  announce_failed: "ip refused a VIP address or routing-rule change for the L2 announcement",
  api_conflict: "the API server refused a write: the object changed since it was read (409)",
  api_not_found: "the object the API call named does not exist (404)",
  kubectl_missing: "kubectl passlb: the kubectl command is not on PATH",
  kubectl_forbidden: "kubectl passlb: the API server denied a read (RBAC)",
  crd_missing: "kubectl passlb: the LoadBalancerIPPool CRD is not installed",
  kubectl_failed: "kubectl passlb: a kubectl call failed for another reason (its stderr is in the message)",
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class PasslbError extends Error {
  readonly code: ErrorCode;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "PasslbError";
    this.code = code;
    this.details = options.details ?? {};
  }
}
