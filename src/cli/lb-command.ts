/**
 * `passlb lb -f DIR --dataplane userspace|auto`: the LB host. Plans the Services (with
 * `ipMode: Proxy`, as Kubernetes defines it for a proxying LB), probes the member nodes
 * and runs the userspace proxy on every VIP:port until stopped, following every change of
 * the -f paths (a bad edit keeps the last good state). `--loopback` applies the
 * quickstart's loopback rewrite to every read. With `--dataplane nftables` (or auto as
 * root with nft) the kernel data plane runs instead (lb-nftables.ts,
 * docs/dataplane-nftables.md).
 *
 * Kubernetes mode (`--kubeconfig`, `--in-cluster`, or no -f and a kubeconfig found:
 * lb-kube.ts, docs/kubernetes.md): the API server is the input, watched; VIPs come from
 * Service status only; both data planes follow every change.
 *
 * This file only declares the flags and runs one of the two: the userspace host is built
 * from its parts by src/lb-host/userspace-host/build-userspace-lb-host.ts (docs/architecture.md "The LB
 * host"); the nftables host by runNftablesLb.
 */

import { hostname } from "node:os";
import type { Command } from "commander";
import { chooseDataplane, type DataplaneRequest } from "../lb-host/choose-dataplane.ts";
import { LbHostStartError } from "../lb-host/lb-host.ts";
import { forwardFromFlags } from "../lb-host/routing/encap.ts";
import { parseTcpPlumbing, type TcpPlumbingChoice } from "../lb-host/userspace/tcp-plumbing.ts";
import {
  buildUserspaceLbHost,
  InputRefusedError,
} from "../lb-host/userspace-host/build-userspace-lb-host.ts";
import { userspaceHostDrivers } from "../lb-host/userspace-host/host-drivers.ts";
import { addNftablesOptions, type KubeLbRun, type NftLbFlags, runNftablesLb } from "./lb-nftables.ts";
import { addXdpOptions, createXdpFastPath, type XdpFlags, xdpFacts, xdpOff } from "./lb-xdp.ts";
import type { CliIo } from "./load-input.ts";
import {
  addObservabilityOptions,
  type Observability,
  type ObservabilityFlags,
  startObservability,
} from "./observability.ts";
import { runUntil } from "./run-until.ts";
import type { RunEnv } from "./up-command.ts";

interface LbOptions extends NftLbFlags, ObservabilityFlags, XdpFlags {
  filename: string[];
  dataplane: string;
  proxyProtocol?: boolean;
  tcpPlumbing: string;
  loopback?: boolean;
  duration?: string;
  kubeconfig?: string;
  inCluster?: boolean;
  defaultClass?: boolean;
  acceptClass: string[];
}

export function registerLbCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  env: RunEnv,
): void {
  const command = program
    .command("lb")
    .description("run the load balancer for the planned Services (userspace proxy)")
    .option(
      "-f, --filename <path>",
      "manifest file or directory; repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option(
      "--dataplane <mode>",
      "auto, userspace, nftables or xdp (nftables with the XDP fast path in front)",
      "auto",
    )
    .option("--proxy-protocol", "send PROXY protocol v2 to the nodes")
    .option(
      "--tcp-plumbing <kind>",
      "userspace TCP: net (node:net sockets) or experimental-libuv (libuv handles through undocumented Node internals; may break on a Node upgrade)",
      "net",
    )
    .option("--loopback", "apply the loopback rewrite of passlb up (docs/quickstart.md)")
    .option("--duration <seconds>", "stop by itself after this many seconds")
    .option("--kubeconfig <path>", "read the cluster through this kubeconfig (Kubernetes mode)")
    .option("--in-cluster", "read the cluster with the Pod's service account (Kubernetes mode)")
    .option("--default-class", "Kubernetes mode: also own LoadBalancer Services without a loadBalancerClass")
    .option(
      "--accept-class <class>",
      "Kubernetes mode: also serve this foreign loadBalancerClass (as the controller's --accept-class); repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    );
  addNftablesOptions(command);
  addXdpOptions(command);
  addObservabilityOptions(command, "127.0.0.1:9797");
  command.action(async (opts: LbOptions) => {
    const input = await chooseInput(opts, io, env);
    if (!input) return setExitCode(2);
    const tcp = parseTcpPlumbing(opts.tcpPlumbing);
    if (tcp === undefined) {
      io.stderr(`error: --tcp-plumbing must be net or experimental-libuv, not ${opts.tcpPlumbing}\n`);
      return setExitCode(2);
    }
    if (opts.xdpOff) return setExitCode(await xdpOff(opts, io));
    const choice = await chooseDataplaneOrExit(opts, io, env, setExitCode);
    if (!choice) return;
    const obs = await startObservability(opts, {
      io,
      process: "passlb lb",
      component: "lb",
      dataplane: choice.dataplane,
    });
    if (typeof obs === "string") {
      io.stderr(`error: ${obs}\n`);
      return setExitCode(2);
    }
    const kube = input.kind === "kube" ? await kubeLbRun(input, opts, io, obs) : undefined;
    if (choice.dataplane === "nftables" || choice.dataplane === "xdp") {
      io.stderr(`passlb lb: data plane ${choice.dataplane} (${choice.reason})\n`);
      const fastPath = choice.dataplane === "xdp" ? xdpFastPath(opts, io, obs) : undefined;
      if (typeof fastPath === "string") {
        io.stderr(`error: ${fastPath}\n`);
        await obs.close();
        setExitCode(2);
        return;
      }
      setExitCode(
        await runNftablesLb(opts, io, env.shutdownSignal, obs, kube, fastPath ? { fastPath } : undefined),
      );
      await obs.close();
      return;
    }
    setExitCode(await runUserspace(opts, { tcp, reason: choice.reason, kube }, io, env, obs));
  });
}

type LbInput =
  | { readonly kind: "manifests" }
  | (Extract<ReturnType<KubeModule["chooseLbInput"]>, { kind: "kube" }> & { readonly mod: KubeModule });
type KubeModule = typeof import("./lb-kube.ts");

/** manifests (-f/--manifests given, and no cluster flag) or the cluster; undefined: refused (printed) */
async function chooseInput(opts: LbOptions, io: CliIo, env: RunEnv): Promise<LbInput | undefined> {
  // the Kubernetes modules (and @kubernetes/client-node, which doubles the start-up time)
  // are loaded only when the LB may read a cluster
  const manifests = opts.filename.length + (opts.manifests?.length ?? 0) > 0;
  if (manifests && opts.kubeconfig === undefined && opts.inCluster !== true) return { kind: "manifests" };
  const mod = await import("./lb-kube.ts");
  const input = mod.chooseLbInput(opts, env.kubeEnv ?? {});
  if (typeof input === "string") {
    io.stderr(`error: ${input}\n`);
    return undefined;
  }
  return input.kind === "kube" ? { ...input, mod } : input;
}

/** --dataplane checked and chosen (choose-dataplane.ts); undefined: refused, exit code set */
async function chooseDataplaneOrExit(
  opts: LbOptions,
  io: CliIo,
  env: RunEnv,
  setExitCode: (code: number) => void,
) {
  const requested = opts.dataplane as DataplaneRequest;
  if (!["auto", "userspace", "nftables", "xdp"].includes(requested)) {
    io.stderr(`error: --dataplane must be auto, userspace, nftables or xdp, not ${opts.dataplane}\n`);
    setExitCode(2);
    return undefined;
  }
  const xdp = await xdpFacts(opts);
  const choice = chooseDataplane({ isRoot: env.isRoot, hasNft: env.hasNft(), requested, xdp });
  if (!choice.ok) {
    io.stderr(`error: ${choice.reason}\n`);
    setExitCode(1);
    return undefined;
  }
  return choice;
}

/** Kubernetes mode: the watched cluster and what the data planes need from it (lb-kube.ts) */
async function kubeLbRun(
  input: Extract<LbInput, { kind: "kube" }>,
  opts: LbOptions,
  io: CliIo,
  obs: Observability,
): Promise<KubeLbRun> {
  const { mod } = input;
  io.stderr(`passlb lb: reading the cluster at ${input.found.server} (${input.found.from})\n`);
  // --announce bgp with neither --bgp-asn nor --bgp-peer: the routers are LoadBalancerBGPPeers
  const crdPeers = opts.announce === "bgp" && opts.bgpAsn === undefined && (opts.bgpPeer ?? []).length === 0;
  const source = mod.kubeLbSource(input, obs, crdPeers);
  return {
    source,
    prepare: mod.kubeReadHandler(obs, (line) => io.stderr(`passlb lb: ${line}\n`)),
    ...(crdPeers && {
      bgpStatus: mod.kubeBgpStatusWriter(input, opts.hostName ?? hostname()),
      bgpPeers: () => source.bgpPeers,
      bgpExtras: () => ({
        advertisements: source.bgpAdvertisements,
        secrets: source.bgpSecrets,
        pools: source.ipPools
          .filter((p) => !p.spec.disabled)
          .map((p) => ({
            name: p.metadata.name,
            labels: { ...p.metadata.labels },
            addresses: p.spec.addresses,
          })),
      }),
    }),
    // the wire checks' findings as Events on the Services (lb-events.ts)
    serviceEvent: (await import("./lb-events.ts")).serviceEventRecorder(
      input.found.config,
      opts.hostName ?? hostname(),
      (line) => io.stderr(`passlb lb: ${line}\n`),
    ),
  };
}

/** the userspace LB host (userspace-host/build-userspace-lb-host.ts) until the signal or --duration; the exit code */
async function runUserspace(
  opts: LbOptions,
  run: { readonly tcp: TcpPlumbingChoice; readonly reason: string; readonly kube: KubeLbRun | undefined },
  io: CliIo,
  env: RunEnv,
  obs: Observability,
): Promise<number> {
  const paths = [...opts.filename, ...(opts.manifests ?? [])];
  const pollMs = Number(opts.pollMs ?? "1000");
  const refuse = async (message: string) => {
    io.stderr(`error: ${message}\n`);
    await obs.close();
    return 2;
  };
  if (!run.kube && paths.length === 0) return refuse("no manifests given: pass -f FILE|DIR|- (repeatable)");
  if (!(pollMs >= 50)) return refuse("--poll-ms must be ≥ 50");
  let stdin: Promise<string> | undefined;
  const { host } = buildUserspaceLbHost(
    {
      paths,
      pollMs,
      loopback: opts.loopback ?? false,
      proxyProtocol: opts.proxyProtocol ?? false,
      tcp: run.tcp,
      reason: run.reason,
    },
    userspaceHostDrivers(),
    {
      out: io.stdout,
      err: io.stderr,
      observer: obs.observer,
      metrics: obs.metrics,
      logger: obs.logger,
      serve: () => obs.serve(),
    },
    // stdin is read once; every later read of `-` gets the same text
    { ...(run.kube && { kube: run.kube }), readStdin: () => (stdin ??= io.readStdin()) },
  );
  try {
    await host.start();
  } catch (e) {
    const cause = e instanceof LbHostStartError ? e.cause : e;
    if (!(cause instanceof InputRefusedError)) io.stderr(`error: ${(e as Error).message}\n`);
    await obs.close();
    return cause instanceof InputRefusedError ? 2 : 1;
  }
  await runUntil(env.shutdownSignal(), opts.duration);
  await host.stop();
  await obs.close();
  return 0;
}

/** the XDP fast path for `--dataplane xdp` from the same flags the nftables path reads */
function xdpFastPath(opts: LbOptions, io: CliIo, obs: Observability) {
  const forward = forwardFromFlags(opts);
  if (typeof forward === "string") return forward;
  return createXdpFastPath(
    {
      flags: opts,
      seed: Number(opts.seed),
      maxTableSize: Number(opts.maxTableSize),
      forward,
      driftMs: opts.once ? 0 : Number(opts.driftCheckMs),
      countersMs: opts.once ? 0 : Number(opts.countersMs ?? "10000"),
    },
    io,
    obs,
  );
}
