// EndpointSlice reconciler benchmark (issue 3 §5). Run: node --import tsx bench/endpointslices.bench.ts
//
// Budgets: a 10,000-Pod Service from nothing ≤ 100 ms; one Pod change in it ≤ 5 ms with exactly
// one slice written. Times are per call; each figure is the median (and the minimum) of many
// runs, as wall time and as this process's CPU time (the machine may be shared). Ratios are
// against a baseline measured in the same run: JSON-cloning the 10,000 Pods once.
import assert from "node:assert/strict";
import { cpuUsage } from "node:process";
import { reconcileService } from "../src/endpoints/reconciler.ts";
import { applySliceWrites, writeCount } from "../src/endpoints/slice-writes.ts";
import type { Pod } from "../src/k8s/objects.ts";
import { nodeMap, pod, sequentialNames, service } from "../test/support/endpointslice-builders.ts";

const PODS = 10_000;
const NODES = 100;
const svc = service("web");
const nodes = nodeMap(NODES);
const pods = Array.from({ length: PODS }, (_, i) => pod(i, "web", undefined, NODES));
const clone = (list: readonly Pod[]): Pod[] => JSON.parse(JSON.stringify(list));

interface Figure {
  wall: number;
  wallMin: number;
  cpu: number;
  cpuMin: number;
}

/** Runs `prepare` untimed and `run` timed, `n` times after `warm` warm-ups. */
function measure<T>(n: number, prepare: (i: number) => T, run: (input: T) => void, warm = 3): Figure {
  for (let i = 0; i < warm; i++) run(prepare(i));
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < n; i++) {
    const input = prepare(i + warm);
    const c = cpuUsage();
    const t = performance.now();
    run(input);
    wall.push(performance.now() - t);
    const d = cpuUsage(c);
    cpu.push((d.user + d.system) / 1000);
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  return { wall: med(wall), wallMin: Math.min(...wall), cpu: med(cpu), cpuMin: Math.min(...cpu) };
}

const baseline = measure(
  15,
  () => pods,
  (p) => void clone(p),
);

// 1. From nothing: fresh Pod objects every run (nothing memoised).
const cold = measure(
  15,
  () => clone(pods),
  (p) => {
    const w = reconcileService({ service: svc, pods: p, nodes, slices: [] });
    assert.equal(w.create.length, PODS / 100);
  },
);

// 2. One Pod change, as a watch-fed controller sees it: the other 9,999 Pod objects unchanged.
const stored = applySliceWrites(
  [],
  reconcileService({ service: svc, pods, nodes, slices: [] }),
  sequentialNames(),
);
const flipped = (i: number) => {
  const k = (i * 7919) % PODS;
  const next = pods.slice();
  next[k] = pod(
    k,
    "web",
    (p) => {
      p.status.conditions = [{ type: "Ready", status: "False" }];
    },
    NODES,
  );
  return next;
};
const oneChange = measure(200, flipped, (p) => {
  const w = reconcileService({ service: svc, pods: p, nodes, slices: stored });
  assert.equal(writeCount(w), 1);
});

// 3. One Pod change with every object freshly decoded (a CLI run: no memo can help).
const oneChangeFresh = measure(
  15,
  (i) => clone(flipped(i)),
  (p) => {
    assert.equal(writeCount(reconcileService({ service: svc, pods: p, nodes, slices: stored })), 1);
  },
);

const row = (name: string, f: Figure, budget?: number) =>
  `| ${name} | ${f.wall.toFixed(2)} (${f.wallMin.toFixed(2)}) | ${f.cpu.toFixed(2)} (${f.cpuMin.toFixed(2)}) | ${(f.wall / baseline.wall).toFixed(2)} | ${budget === undefined ? "–" : `${budget} ms: ${f.wall <= budget ? "met" : f.wallMin <= budget ? "met at the minimum only" : "MISSED"}`} |`;

console.log(
  `EndpointSlice reconciler, ${PODS} Pods on ${NODES} Nodes, maxEndpointsPerSlice 100 (node ${process.version})`,
);
console.log("| case | wall ms, median (min) | CPU ms, median (min) | × baseline | budget |");
console.log("| --- | --- | --- | --- | --- |");
console.log(row("baseline: JSON-clone the 10,000 Pods", baseline));
console.log(row("10,000 Pods from nothing (100 creates)", cold, 100));
console.log(row("one Pod change, other Pod objects unchanged (1 update)", oneChange, 5));
console.log(row("one Pod change, all objects freshly decoded (1 update)", oneChangeFresh));
