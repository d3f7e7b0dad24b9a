/**
 * `kubectl passlb status [svc]`: the Services' VIPs and conditions from the API server, and
 * the nodes' health and weights as each LB host sees them — every LB pod's
 * `/api/v1/state`, fetched through the API server's pod proxy (`kubectl get --raw
 * /api/v1/namespaces/NS/pods/POD:PORT/proxy/api/v1/state`), so it works from anywhere
 * kubectl does, without reaching the hosts directly. The controller's pods are asked the
 * same way, for whether the API server accepts their requests (`kubeApi`; docs/kubernetes.md
 * "When the API server refuses"), and so are the LB hosts. Pods that do not answer, or whose
 * API calls are failing, are reported by name with the reason; the exit code is then 1.
 */
import type { Command } from "commander";
import type { CliIo } from "../cli/load-input.ts";
import { PasslbError } from "../errors.ts";
import { parseJsonList } from "./cluster-snapshot.ts";
import { type KubectlRunner, kubectlMessage, runAll } from "./kubectl-runner.ts";
import { pickServices } from "./service-pick.ts";
import {
  apiFailingPods,
  buildStatusReport,
  type LbHostAnswer,
  LbStateSchema,
  ownsService,
  renderStatusText,
  type StatusService,
  StatusServiceSchema,
} from "./status-report.ts";

export const DEFAULT_LB_SELECTOR = "app.kubernetes.io/name=passlb,app.kubernetes.io/component=lb";
export const DEFAULT_CONTROLLER_SELECTOR =
  "app.kubernetes.io/name=passlb,app.kubernetes.io/component=controller";
const DEFAULT_PORT = 9797;

interface StatusFlags {
  namespace?: string;
  output: string;
  defaultClass?: boolean;
  lbNamespace: string;
  lbSelector: string;
  controllerSelector: string;
}

interface LbPod {
  readonly name: string;
  readonly node: string;
  readonly phase: string;
  readonly port: number;
}

function lbPods(items: readonly unknown[]): LbPod[] {
  return items.map((item) => {
    const pod = item as {
      metadata?: { name?: string };
      spec?: { nodeName?: string; containers?: { ports?: { name?: string; containerPort?: number }[] }[] };
      status?: { phase?: string };
    };
    const ports = (pod.spec?.containers ?? []).flatMap((c) => c.ports ?? []);
    const port = ports.find((p) => p.name === "dashboard")?.containerPort ?? DEFAULT_PORT;
    return {
      name: pod.metadata?.name ?? "<unnamed>",
      node: pod.spec?.nodeName ?? "<unscheduled>",
      phase: pod.status?.phase ?? "Unknown",
      port,
    };
  });
}

async function askHost(kubectl: KubectlRunner, namespace: string, pod: LbPod): Promise<LbHostAnswer> {
  const base = { pod: pod.name, node: pod.node };
  if (pod.phase !== "Running") return { ...base, reachable: false, error: `pod is ${pod.phase}` };
  const path = `/api/v1/namespaces/${namespace}/pods/${pod.name}:${pod.port}/proxy/api/v1/state`;
  let text: string;
  try {
    text = await kubectl.run(["get", "--raw", path]);
  } catch (e) {
    if (!(e instanceof PasslbError)) throw e;
    if (e.code === "kubectl_missing") throw e;
    const said = kubectlMessage(String(e.details.stderr ?? "")) || e.message;
    return { ...base, reachable: false, error: said };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ...base, reachable: false, error: `${path} did not answer JSON` };
  }
  const state = LbStateSchema.safeParse(json);
  if (!state.success) return { ...base, reachable: false, error: `${path} is not passlb's /api/v1/state` };
  return { ...base, reachable: true, state: state.data };
}

export function registerStatusCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  kubectl: () => KubectlRunner,
): void {
  program
    .command("status")
    .description(
      "VIPs and conditions of passlb's Services, and their nodes' health and weights as the LB hosts see them",
    )
    .argument("[service]", "one Service (NAME or NAMESPACE/NAME)")
    .option("-n, --namespace <ns>", "only Services in this namespace")
    .option("-o, --output <format>", "text or json", "text")
    .option("--default-class", "passlb also owns LoadBalancer Services without a loadBalancerClass")
    .option("--lb-namespace <ns>", "where the LB DaemonSet runs", "passlb-system")
    .option("--lb-selector <labels>", "label selector of the LB pods", DEFAULT_LB_SELECTOR)
    .option(
      "--controller-selector <labels>",
      "label selector of the controller pods (in --lb-namespace)",
      DEFAULT_CONTROLLER_SELECTOR,
    )
    .action(async (service: string | undefined, opts: StatusFlags) => {
      if (opts.output !== "text" && opts.output !== "json") {
        io.stderr(`error: --output must be text or json (got "${opts.output}")\n`);
        return setExitCode(2);
      }
      const run = kubectl();
      const svcArgs = [
        "get",
        "services",
        ...(opts.namespace ? ["-n", opts.namespace] : ["-A"]),
        "-o",
        "json",
      ];
      const podArgs = ["get", "pods", "-n", opts.lbNamespace, "-l", opts.lbSelector, "-o", "json"];
      const controllerArgs = [
        "get",
        "pods",
        "-n",
        opts.lbNamespace,
        "-l",
        opts.controllerSelector,
        "-o",
        "json",
      ];
      const [svcText = "", podText = "", controllerText = ""] = await runAll(run, [
        svcArgs,
        podArgs,
        controllerArgs,
      ]);
      const services: StatusService[] = [];
      for (const item of parseJsonList(svcArgs, svcText)) {
        const parsed = StatusServiceSchema.safeParse(item);
        if (parsed.success && ownsService(parsed.data, opts.defaultClass ?? false))
          services.push(parsed.data);
      }
      const keys = services.map((s) => `${s.metadata.namespace}/${s.metadata.name}`);
      const pick = pickServices(keys, service, opts.namespace);
      if (!pick.ok) {
        io.stderr(`error: ${pick.error} among the LoadBalancer Services of class passlb.io/l4\n`);
        return setExitCode(1);
      }
      const pods = lbPods(parseJsonList(podArgs, podText));
      const answers = await Promise.all(pods.map((p) => askHost(run, opts.lbNamespace, p)));
      const controllerPods = lbPods(parseJsonList(controllerArgs, controllerText));
      const controllers = await Promise.all(controllerPods.map((p) => askHost(run, opts.lbNamespace, p)));
      const report = buildStatusReport(
        services.filter((s) => pick.matches(`${s.metadata.namespace}/${s.metadata.name}`)),
        answers,
        controllers,
      );
      if (opts.output === "json") io.stdout(`${JSON.stringify(report, null, 2)}\n`);
      else io.stdout(renderStatusText(report, opts.lbNamespace));
      const down = answers.filter((a) => !a.reachable);
      if (pods.length === 0)
        io.stderr(
          `warning: no LB pods in ${opts.lbNamespace} match ${opts.lbSelector}: is the DaemonSet applied and a node labelled passlb.io/lb-host=true?\n`,
        );
      for (const d of down) io.stderr(`warning: LB host ${d.pod} on node ${d.node} is unreachable\n`);
      const controllersDown = controllers.filter((a) => !a.reachable);
      if (controllerPods.length === 0)
        io.stderr(
          `warning: no controller pods in ${opts.lbNamespace} match ${opts.controllerSelector}: nothing assigns VIPs\n`,
        );
      for (const d of controllersDown)
        io.stderr(`warning: controller pod ${d.pod} on node ${d.node} is unreachable\n`);
      const failing = apiFailingPods(report);
      for (const p of failing)
        io.stderr(`warning: ${p.pod}: the API server refuses or does not answer its requests (see above)\n`);
      setExitCode(
        pods.length === 0 || down.length > 0 || controllersDown.length > 0 || failing.length > 0 ? 1 : 0,
      );
    });
}
