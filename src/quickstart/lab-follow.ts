/**
 * Adapter: a running `passlb up --dataplane nftables` lab follows a reload's change
 * (lab-reload.ts), in the order that keeps traffic flowing:
 *   1. hosts whose namespace or address a new host takes are torn down;
 *   2. new zones, clients, nodes and pods are built, new echo servers start and those with
 *      changed ports restart (src/lab/lab-grow.ts), until they serve;
 *   3. `publish` writes the lab's manifests for the new layout, so the agents and the LB
 *      see new pods and endpoints, and no longer see removed ones;
 *   4. new nodes get their agent;
 *   5. after `drainMs` (the agents' folder watch has dropped removed endpoints by then),
 *      the other removed hosts are torn down: processes, veths, routes, namespaces.
 * When building fails half-way (an echo server or agent not ready in time), the hosts it
 * added are torn down again and the manifests rewritten for what runs, so a later reload
 * starts from a lab that matches its layout. `onState` hears the lab's state after every
 * step (and `labDown` removes all of it anyway). Not here: the
 * manifests' content, the view's counters (the caller's `publish`).
 */
import { type LabChange, labChangeCommands, labUndoAdd, layoutWithout } from "../lab/lab-change.ts";
import { labAddHosts, labRemoveHosts, labStartAgents } from "../lab/lab-grow.ts";
import type { LabHost, LabLayout } from "../lab/lab-layout.ts";
import type { LabState } from "../lab/lab-runner.ts";
import { sleep } from "../lab/lab-shell.ts";

export interface LabFollowOptions {
  readonly repoRoot: string;
  readonly agentArgs: readonly string[];
  readonly drainMs: number;
  readonly publish: (layout: LabLayout) => Promise<void>;
  readonly onState: (state: LabState) => void;
  readonly event: (text: string) => void;
}

export async function followLabChange(
  state: LabState,
  change: LabChange,
  o: LabFollowOptions,
): Promise<LabState> {
  const commands = labChangeCommands(state.layout, change);
  const grow = { repoRoot: o.repoRoot, agentArgs: o.agentArgs };
  const first = new Set(change.removeFirst);
  const removed = [...change.remove.nodes, ...change.remove.pods];
  const gone = (hosts: readonly LabHost[]) => {
    for (const h of hosts) o.event(`${h.role} ${"namespace" in h ? `${h.namespace}/` : ""}${h.name} removed`);
  };
  let s = state;
  const step = (next: LabState) => {
    s = next;
    o.onState(s);
  };
  // what runs once the hosts that go first are gone
  const base = layoutWithout(state.layout, change.removeFirst);
  step(await labRemoveHosts(s, change.removeFirst, commands.first, base));
  gone(removed.filter((h) => first.has(h.ns)));
  try {
    step(await labAddHosts(s, change, commands, grow));
    await o.publish(change.layout);
    step(await labStartAgents(s, change.add.nodes, grow));
  } catch (e) {
    // half a change is undone: the lab runs `base`, and a later reload starts from there
    const undo = labUndoAdd(change);
    step(await labRemoveHosts(s, undo.namespaces, undo.commands, base));
    await o.publish(base).catch(() => {});
    throw e;
  }
  for (const z of change.add.zones) o.event(`zone ${z.name} added (clients ${z.clientCidr4})`);
  for (const n of change.add.nodes) o.event(`node ${n.name} added in ${n.zone} (${n.ipv4})`);
  for (const p of change.add.pods) o.event(`pod ${p.namespace}/${p.name} started on ${p.node} (${p.ipv4})`);
  for (const p of change.restart)
    o.event(
      `pod ${p.namespace}/${p.name} restarted on ports ${p.spec.ports.map((x) => `${x.protocol}/${x.port}`).join(",")}`,
    );
  const last = removed.filter((h) => !first.has(h.ns));
  if (last.length > 0) {
    await sleep(o.drainMs);
    step(
      await labRemoveHosts(
        s,
        last.map((h) => h.ns),
        commands.last,
      ),
    );
  }
  gone(last);
  return s;
}
