/**
 * Rolling replacement of every pod of a Service under load (issue 16 §1), eTP Local and
 * eTP Cluster, in the lab as root with real packets (test/fixtures/lab/rolling/). As a
 * Deployment's rolling update with maxSurge 1, maxUnavailable 0 does it, three times: a
 * new pod appears (selected, not ready: the EndpointSlice lists it ready=false,
 * serving=false), becomes ready, and in the same write an old pod starts terminating
 * (ready=false, serving=true, terminating=true, its Pod with a deletionTimestamp); a grace
 * period later the old pod's process ends (SIGTERM, as the kubelet's at the end of the
 * grace period) and its endpoint leaves the slice. Meanwhile two clients (two addresses)
 * each open a new connection every 20 ms to the Service's VIP, every socket bound to port 0
 * first as real clients do (the kernel's bind allocator reuses ports whose last connection
 * is in TIME_WAIT: the LB host must send such a SYN where its table says, issue 25), and
 * one of them also holds long-lived ones (12 from the start, 12 more after the first and
 * after the last step).
 * Bounds: ≥ 99.9 % of the new connections succeed; no long-lived connection breaks except
 * on a pod that is gone, and not before it is gone (a pod still serving, terminating or
 * not, keeps its connections). The figures are printed.
 * The grace period is 15 s: more than the Local health check's worst case (3 s × 2 + 1 s,
 * docs/health.md) for the LB to stop sending new connections to a node whose last ready
 * pod is terminating (Kubernetes' default terminationGracePeriodSeconds is 30 s).
 * The lab's "new" pods run from the start without the app label (the lab builds its pods'
 * namespaces up front); to every consumer of the manifests they appear when labelled.
 * Root only; otherwise skipped with the reason. The lab (`frol<pid>`) is removed when the
 * test ends, pass or fail.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Topology, TopologyPod } from "../../src/lab/topology.ts";
import { type Lab, labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { type HeldRun, holdLoad, streamFigures, streamLoad, waitServing } from "./under-load.ts";

const TOPOLOGY = "test/fixtures/lab/rolling/topology.yaml";
const GRACE_MS = 15_000;
/** after a step, before the next new pod appears */
const STEP_PAUSE_MS = 2000;
const why = labUnavailable();

interface Replacement {
  readonly old: string;
  readonly next: string;
}

/** Manifest changes one at a time: each rewrites the whole folder from the topology. */
function podEditor(lab: Lab) {
  let chain: Promise<void> = Promise.resolve();
  const find = (topo: Topology, name: string): TopologyPod => {
    for (const z of topo.zones)
      for (const n of z.nodes) for (const p of n.pods) if (p.name === name) return p;
    throw new Error(`no pod ${name}`);
  };
  return (edits: Record<string, (p: TopologyPod) => void>): Promise<void> => {
    chain = chain.then(() =>
      lab.update((topo) => {
        for (const [name, edit] of Object.entries(edits)) edit(find(topo, name));
        return topo;
      }),
    );
    return chain;
  };
}

async function rollingReplacement(lab: Lab, app: string, target: string, steps: readonly Replacement[]) {
  const edit = podEditor(lab);
  const streams = [
    { client: "client-a", target },
    { client: "client-b", target },
  ];
  const held = { client: "client-b", target };
  await waitServing(lab, streams);
  const ms = 2500 + steps.length * 6000 + GRACE_MS + 6000;
  const started = Date.now();
  const remaining = () => ms - (Date.now() - started) - 1000;
  const running = Promise.all(streams.map((x) => streamLoad(lab, x, ms, 20, true)));
  const holds: Promise<HeldRun>[] = [holdLoad(lab, held, ms)];
  await sleep(2500); // both clients are up and connected
  const t0 = Date.now();
  const goneAt = new Map<string, number>();
  const endings: Promise<void>[] = [];
  for (const [i, step] of steps.entries()) {
    // a new pod: selected, not ready yet (its readiness probe has not passed)
    await edit({
      [step.next]: (p) => {
        p.labels = { app };
        p.ready = false;
      },
    });
    // it is ready; the Deployment scales an old one down at once
    await edit({
      [step.next]: (p) => {
        p.ready = true;
      },
      [step.old]: (p) => {
        p.terminating = true;
      },
    });
    const terminatingAt = Date.now();
    endings.push(
      (async () => {
        await sleep(terminatingAt + GRACE_MS - Date.now());
        goneAt.set(step.old, Date.now());
        await lab.restart("echo", step.old, true); // the grace period is over
        await edit({
          [step.old]: (p) => {
            p.labels = { roll: "gone" };
            p.ready = false;
          },
        });
      })(),
    );
    if (i === 0 || i === steps.length - 1) holds.push(holdLoad(lab, held, remaining()));
    await sleep(STEP_PAUSE_MS);
  }
  await Promise.all(endings);
  const runs = await running;
  const h = (await Promise.all(holds)).flatMap((r) => r.connections);
  return { runs, h, t0, goneAt, f: runs.map((s) => streamFigures(s, t0)) };
}

test("rolling replacement of every pod under load: ≥ 99.9 % of new connections succeed, no surviving long-lived one breaks", {
  timeout: 300_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "frol", lb: true });
  const cases: [string, string, string, Replacement[]][] = [
    [
      "eTP Local",
      "local",
      `${await lab.vip("roll/local")}:80`,
      [
        { old: "l-old-1", next: "l-new-1" },
        { old: "l-old-3", next: "l-new-2" },
        { old: "l-old-2", next: "l-new-3" },
      ],
    ],
    [
      "eTP Cluster",
      "cluster",
      `${await lab.vip("roll/cluster")}:81`,
      [
        { old: "c-old-1", next: "c-new-1" },
        { old: "c-old-3", next: "c-new-2" },
        { old: "c-old-2", next: "c-new-3" },
      ],
    ],
  ];
  for (const [what, app, target, steps] of cases)
    await t.test(`${what}: every pod replaced`, async (st) => {
      const r = await rollingReplacement(lab, app, target, steps);
      const events = r.runs.flatMap((s) => s.events);
      const total = events.length;
      const failed = r.f.flatMap((f) => f.failed.map((e) => ({ ...e, sinceRollStart: f.sinceFault(e) })));
      const errors: Record<string, number> = {};
      for (const e of failed) errors[e.error ?? "?"] = (errors[e.error ?? "?"] ?? 0) + 1;
      const newPods = new Set(steps.map((x) => x.next));
      const broken = r.h.filter((c) => !c.ok);
      const onNew = r.h.filter((c) => c.pod !== undefined && newPods.has(c.pod));
      st.diagnostic(
        `${what}: ${failed.length} of ${total} new connections failed (${(
          (100 * (total - failed.length)) / Math.max(1, total)
        ).toFixed(2)} % succeeded; ${JSON.stringify(errors)}; at ${JSON.stringify(
          failed.map((e) => `${e.sinceRollStart} ms`),
        )} after the roll began); per client ${JSON.stringify(r.runs.map((s) => s.events.length))}; long-lived: ${r.h.length} held, ${onNew.length} on new pods, ${broken.length} ended early, all on gone pods: ${JSON.stringify(
          broken.map((c) => ({
            pod: c.pod,
            error: c.error,
            afterGone: c.at - (r.goneAt.get(c.pod ?? "") ?? 0),
          })),
        )}`,
      );
      st.diagnostic(
        `${what}: new connections per pod ${JSON.stringify(
          events.reduce<Record<string, number>>((m, e) => {
            const k = e.pod ?? "failed";
            m[k] = (m[k] ?? 0) + 1;
            return m;
          }, {}),
        )}`,
      );
      assert.ok(total > 1000, `only ${total} new connections were made`);
      assert.ok(
        failed.length <= Math.floor(total * 0.001),
        `${failed.length} of ${total} new connections failed: more than 0.1 %: ${JSON.stringify(failed)}`,
      );
      // the roll happened: at the end every new connection lands on a new pod, each takes some
      for (const s of r.runs) {
        const tail = s.events.filter((e) => e.t > s.events.at(-1)!.t - 2000);
        assert.deepEqual(
          tail.filter((e) => !newPods.has(e.pod ?? "")),
          [],
          "the last 2 s of new connections all reach new pods",
        );
      }
      for (const p of newPods)
        assert.ok(
          events.some((e) => e.pod === p),
          `${p} took no new connection`,
        );
      // long-lived: broken only on a pod that is gone, by its end (FIN or RST), after it went
      assert.ok(onNew.length > 0, "some long-lived connections were on new pods");
      const wrong = broken.filter((c) => {
        const gone = r.goneAt.get(c.pod ?? "");
        return gone === undefined || c.at < gone || !["ECLOSED", "ECONNRESET"].includes(c.error ?? "");
      });
      assert.deepEqual(wrong, [], "long-lived connections broke on a pod that still served");
    });
});
