/**
 * The agent's flags → AgentConfig: every refusal names its flag, with the words the CLI
 * has always printed, and a good set of flags becomes the config the parts read.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type AgentFlags, agentConfig } from "./agent-config.ts";

const FLAGS: AgentFlags = {
  node: "node-a1",
  dataplane: "none",
  manifests: "examples/quickstart",
  healthzBindAddress: "0.0.0.0:10256",
  syncPeriod: "30",
  procSys: "/proc/sys",
};

function refusal(change: Partial<AgentFlags>, remove: readonly (keyof AgentFlags)[] = []): string {
  const flags: Record<string, unknown> = { ...FLAGS, ...change };
  for (const k of remove) delete flags[k];
  const r = agentConfig(flags as unknown as AgentFlags);
  assert.ok("error" in r, `expected a refusal for ${JSON.stringify(change)}`);
  return r.error;
}

test("each refusal names the flag it is about", () => {
  assert.match(
    refusal({}, ["manifests"]),
    /^--manifests DIR is required \(the agent stands in for kube-proxy/,
  );
  assert.equal(
    refusal({ dataplane: "nftables", decap: "ipip" }, ["manifests"]),
    "--dataplane nftables needs --manifests (decapsulation alone takes none)",
  );
  assert.equal(refusal({ healthzBindAddress: "10256" }), "--healthz-bind-address 10256: expected host:port");
  assert.equal(
    refusal({ healthzBindAddress: "[::1]:70000" }),
    "--healthz-bind-address [::1]:70000: expected host:port",
  );
  assert.equal(refusal({ bindAddress: "node-a1" }), "--bind-address node-a1: expected an IP address");
  assert.equal(refusal({ syncPeriod: "0" }), "--sync-period 0: expected a positive number of seconds");
  assert.equal(refusal({ syncPeriod: "soon" }), "--sync-period soon: expected a positive number of seconds");
  assert.equal(refusal({ dataplane: "ebpf" }), "--dataplane ebpf: expected none, userspace or nftables");
  assert.equal(
    refusal({ decap: "wireguard" }),
    "--decap wireguard: expected one of vxlan-gpe, ipip, gre, gue",
  );
  assert.equal(refusal({ decap: "ipip", encapPort: "4790" }), "--encap-port: ipip has no port");
  assert.equal(refusal({ decap: "gue", encapPort: "0" }), "--encap-port 0: expected 1..65535");
  assert.equal(refusal({ decap: "gre", encapMtu: "1000" }), "--encap-mtu 1000: expected 1280..65535");
});

test("the first problem wins, in the order the CLI checks", () => {
  assert.match(refusal({ syncPeriod: "0", dataplane: "ebpf" }), /^--sync-period/);
  assert.match(refusal({ healthzBindAddress: "x", bindAddress: "y" }), /^--healthz-bind-address/);
});

test("good flags become the config the parts read", () => {
  const r = agentConfig({ ...FLAGS, dataplane: "userspace", bindAddress: "192.0.2.10", proxyProtocol: true });
  assert.ok("config" in r);
  assert.deepEqual(r.config, {
    node: "node-a1",
    manifests: "examples/quickstart",
    healthz: { host: undefined, port: 10256 },
    serviceHost: "192.0.2.10",
    syncMs: 30_000,
    dataplane: "userspace",
    decap: undefined,
    procSys: "/proc/sys",
    loopback: false,
    sendProxyProtocol: true,
    seed: 0x5eed,
  });
  const alone = agentConfig({
    ...FLAGS,
    manifests: undefined,
    decap: "vxlan-gpe",
    syncPeriod: "0.5",
  } as AgentFlags);
  assert.ok("config" in alone);
  assert.equal(alone.config.manifests, undefined);
  assert.deepEqual(alone.config.decap, { kind: "vxlan-gpe", port: 4790, mtu: 1500 });
  assert.equal(alone.config.syncMs, 500);
});
