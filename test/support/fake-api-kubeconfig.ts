/**
 * Test-only: a kubeconfig file's text for the fake Kubernetes API server (Kubernetes docs,
 * "Organizing cluster access using kubeconfig files"): one cluster, one user with a bearer
 * token naming the identity (fake-api-rbac.ts), one context, current.
 *
 * Over TLS the server's self-signed certificate is the cluster's certificate-authority-data;
 * over plain http insecure-skip-tls-verify is set, because client-node 1.x refuses an
 * http:// server without it. (kubectl sends the token only over TLS.)
 */
export function kubeconfigText(url: string, token: string, caCert: string | undefined): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: fake",
    "  cluster:",
    `    server: ${url}`,
    caCert
      ? `    certificate-authority-data: ${Buffer.from(caCert).toString("base64")}`
      : "    insecure-skip-tls-verify: true",
    "users:",
    "- name: fake",
    "  user:",
    `    token: ${token}`,
    "contexts:",
    "- name: fake",
    "  context:",
    "    cluster: fake",
    "    user: fake",
    "current-context: fake",
    "",
  ].join("\n");
}
