/**
 * Test-only: the one error of the fake Kubernetes API server — an HTTP status with the
 * metav1.Status body kube-apiserver sends (apimachinery pkg/api/errors/errors.go StatusError:
 * kind Status, status Failure, message, reason, details, code).
 */
export class ApiStatusError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: Record<string, unknown>;
  constructor(code: number, reason: string, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  status(): Record<string, unknown> {
    return {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
      details: this.details,
      code: this.code,
    };
  }
}
