/**
 * Adapter: where passlb finds the Kubernetes API server and its credentials, as kubectl
 * and client-go decide it (client-go clientcmd loading rules; rest.InClusterConfig):
 *   1. `--kubeconfig PATH` (an explicit file; a missing file is an error);
 *   2. `--in-cluster`: the Pod's service account (KUBERNETES_SERVICE_HOST/PORT and the
 *      token and CA under /var/run/secrets/kubernetes.io/serviceaccount);
 *   3. otherwise the first file of $KUBECONFIG, then ~/.kube/config, when it exists;
 *   4. otherwise, inside a Pod (KUBERNETES_SERVICE_HOST set), the service account.
 * Nothing found is `undefined` from findKubeConfig: the caller decides what that means
 * (`passlb lb` then wants -f). The environment comes in as data (KubeEnv): only
 * src/cli/main.ts reads process.env.
 *
 * Deliberately not: merging several $KUBECONFIG files or choosing a context other than
 * the current one (client-node does the rest of the kubeconfig semantics: auth plugins,
 * tokens, client certificates).
 */
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { PasslbError } from "../errors.ts";

export interface KubeEnv {
  readonly KUBECONFIG?: string | undefined;
  readonly HOME?: string | undefined;
  readonly KUBERNETES_SERVICE_HOST?: string | undefined;
  readonly KUBERNETES_SERVICE_PORT?: string | undefined;
}

export interface KubeConfigRequest {
  readonly kubeconfig?: string | undefined;
  readonly inCluster?: boolean | undefined;
}

export interface FoundKubeConfig {
  readonly config: KubeConfig;
  /** for logs: the file, or "in-cluster service account" */
  readonly from: string;
  readonly server: string;
}

const SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/** The config the flags and environment point at, undefined when there is none; throws
 * PasslbError(api_config_invalid) when one is named but cannot be loaded. */
export function findKubeConfig(request: KubeConfigRequest, env: KubeEnv): FoundKubeConfig | undefined {
  if (request.kubeconfig !== undefined) return fromFile(request.kubeconfig);
  if (request.inCluster) return inCluster(env);
  const files = (env.KUBECONFIG ?? "").split(delimiter).filter((f) => f !== "");
  const first = files.find((f) => existsSync(f));
  if (first) return fromFile(first);
  const home = env.HOME ? join(env.HOME, ".kube", "config") : undefined;
  if (home && existsSync(home)) return fromFile(home);
  if (env.KUBERNETES_SERVICE_HOST && existsSync(SERVICE_ACCOUNT_TOKEN)) return inCluster(env);
  return undefined;
}

function fromFile(path: string): FoundKubeConfig {
  const config = new KubeConfig();
  try {
    config.loadFromFile(path);
  } catch (e) {
    throw new PasslbError("api_config_invalid", `kubeconfig ${path}: ${(e as Error).message}`, { cause: e });
  }
  return checked(config, path);
}

function inCluster(env: KubeEnv): FoundKubeConfig {
  if (!env.KUBERNETES_SERVICE_HOST) {
    throw new PasslbError(
      "api_config_invalid",
      "--in-cluster: KUBERNETES_SERVICE_HOST is not set (not running in a Pod?)",
    );
  }
  const config = new KubeConfig();
  try {
    // client-node reads the service account files and the two variables itself
    config.loadFromCluster();
  } catch (e) {
    throw new PasslbError("api_config_invalid", `in-cluster config: ${(e as Error).message}`, { cause: e });
  }
  return checked(config, "in-cluster service account");
}

function checked(config: KubeConfig, from: string): FoundKubeConfig {
  const server = config.getCurrentCluster()?.server;
  if (!server) throw new PasslbError("api_config_invalid", `${from}: no current cluster with a server`);
  return { config, from, server };
}
