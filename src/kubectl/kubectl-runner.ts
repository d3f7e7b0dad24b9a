/**
 * The one way `kubectl passlb` reaches the cluster: it runs `kubectl` (as a plugin it
 * inherits kubectl's context through KUBECONFIG and the current context), so it needs no
 * credentials of its own and honours whatever auth plugin kubectl uses. `KubectlRunner` is
 * the narrow interface; tests run the real kubectl against the strict test API server
 * (test/kubectl-plugin.test.ts) rather than faking this.
 *
 * Failures become one PasslbError each, classified from kubectl's exit and stderr by
 * `classifyKubectlFailure` (kubectl's own messages: "Error from server (Forbidden)",
 * "the server doesn't have a resource type", "Unable to connect to the server").
 * It does not retry: a CLI answers once and says what failed.
 */
import { execFile } from "node:child_process";
import { PasslbError } from "../errors.ts";

export interface KubectlRunner {
  /** runs `kubectl ARGS` and resolves with its standard output */
  run(args: readonly string[]): Promise<string>;
}

export interface KubectlOptions {
  /** the command; "kubectl" found on env.PATH */
  readonly command?: string;
  /** flags put before every call (`--context`, `--kubeconfig`) */
  readonly globalArgs?: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  readonly timeoutMs?: number;
}

/**
 * Several kubectl calls at once; the outputs in order, or the first failure — but only once
 * every call has ended, so the plugin never exits while a kubectl it started still runs (and
 * writes its discovery cache under $HOME).
 */
export async function runAll(
  kubectl: KubectlRunner,
  calls: readonly (readonly string[])[],
): Promise<string[]> {
  const settled = await Promise.allSettled(calls.map((args) => kubectl.run(args)));
  const failed = settled.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<string>).value);
}

export function execKubectl(options: KubectlOptions): KubectlRunner {
  const command = options.command ?? "kubectl";
  return {
    run: (args) =>
      new Promise((resolve, reject) => {
        execFile(
          command,
          [...(options.globalArgs ?? []), ...args],
          {
            env: options.env,
            timeout: options.timeoutMs ?? 60_000,
            maxBuffer: 1024 * 1024 * 1024,
            encoding: "utf8",
          },
          (error, stdout, stderr) => {
            if (!error) return resolve(stdout);
            const code = (error as NodeJS.ErrnoException).code;
            reject(classifyKubectlFailure(args, { missing: code === "ENOENT", stderr, cause: error }));
          },
        );
      }),
  };
}

/** kubectl's own message: the first line that is not a client-go log line (`E1130 12:00:00.1 …`). */
export function kubectlMessage(text: string): string {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  return lines.find((l) => !/^[IWEF]\d{4} \d/.test(l)) ?? lines[0] ?? "";
}

/** kubectl's failure, as the error `kubectl passlb` reports. */
export function classifyKubectlFailure(
  args: readonly string[],
  failure: { missing: boolean; stderr: string; cause?: unknown },
): PasslbError {
  const what = `kubectl ${args.join(" ")}`;
  const options = { cause: failure.cause, details: { args: [...args], stderr: failure.stderr } };
  if (failure.missing)
    return new PasslbError(
      "kubectl_missing",
      "kubectl was not found on PATH: kubectl passlb runs kubectl to read the cluster; install it (https://kubernetes.io/docs/tasks/tools/) or fix PATH",
      options,
    );
  const said = kubectlMessage(failure.stderr) || "no error message";
  if (
    /doesn't have a resource type "loadbalancerippools"|loadbalancerippools\.passlb\.io.*not found/i.test(
      failure.stderr,
    )
  )
    return new PasslbError(
      "crd_missing",
      `the LoadBalancerIPPool CRD (loadbalancerippools.passlb.io) is not installed in this cluster: install passlb with kubectl apply -k deploy/ (docs/install.md) [${what}: ${said}]`,
      options,
    );
  if (/\(Forbidden\)|\bforbidden\b/i.test(failure.stderr))
    return new PasslbError(
      "kubectl_forbidden",
      `no access: ${what} was denied; your user needs get/list on what it reads (docs/install.md): ${said}`,
      options,
    );
  if (
    /Unable to connect to the server|The connection to the server .* was refused|connection refused|no such host|i\/o timeout/i.test(
      failure.stderr,
    )
  )
    return new PasslbError(
      "api_unreachable",
      `the API server could not be reached (${what}): ${said}`,
      options,
    );
  return new PasslbError("kubectl_failed", `${what} failed: ${said}`, options);
}
