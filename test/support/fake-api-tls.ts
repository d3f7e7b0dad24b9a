/**
 * Test-only: a throwaway self-signed certificate for the fake Kubernetes API server's TLS
 * mode, made with the `openssl` command (Debian package openssl). TLS is there for the real
 * kubectl: client-go sends a kubeconfig's bearer token only over TLS (clientcmd
 * client_config.go getUserIdentificationPartialConfig; kubernetes/kubectl issue #744), so
 * over plain http it would speak as system:anonymous.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TlsPair {
  readonly key: string;
  readonly cert: string;
}

/** A P-256 key and a one-day certificate for 127.0.0.1; undefined when openssl is missing. */
export function selfSignedCert(): TlsPair | undefined {
  const dir = mkdtempSync(join(tmpdir(), "plb-strict-tls-"));
  try {
    const r = spawnSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=passlb-fake-api",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
      ],
      { encoding: "utf8", timeout: 20_000 },
    );
    if (r.error || r.status !== 0) return undefined;
    return {
      key: readFileSync(join(dir, "key.pem"), "utf8"),
      cert: readFileSync(join(dir, "cert.pem"), "utf8"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
