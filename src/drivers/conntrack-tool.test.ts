/**
 * The conntrack adapter: its command lines and its reading of conntrack's count line, and
 * — when root with the conntrack tool — the same calls against the kernel's table in a
 * throwaway network namespace (entries inserted with `conntrack -I`): by reply source (the
 * node agent's filter) and by mark (the LB host's), each deleting exactly its entry.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import {
  conntrackDeleteArgs,
  conntrackTool,
  parseDeletedCount,
  parseReplySources,
} from "./conntrack-tool.ts";

test("command lines and the deleted count", () => {
  assert.deepEqual(
    conntrackDeleteArgs({
      family: "IPv6",
      protocol: "sctp",
      origDst: "fd00:10::5",
      origPortDst: 53,
      replySrc: "fd00:203::9",
    }).join(" "),
    "-D -f ipv6 -p sctp --orig-dst fd00:10::5 --orig-port-dst 53 --reply-src fd00:203::9",
  );
  assert.equal(
    conntrackDeleteArgs({
      family: "IPv4",
      protocol: "udp",
      origDst: "203.0.113.5",
      origPortDst: 53,
      mark: 7,
    }).join(" "),
    "-D -f ipv4 -p udp --orig-dst 203.0.113.5 --orig-port-dst 53 --mark 7",
  );
  assert.equal(
    parseDeletedCount("conntrack v1.4.7 (conntrack-tools): 0 flow entries have been deleted.\n"),
    0,
  );
  assert.equal(
    parseDeletedCount("conntrack v1.4.7 (conntrack-tools): 3 flow entries have been deleted.\n"),
    3,
  );
  assert.equal(parseDeletedCount("conntrack v1.4.7 (conntrack-tools): Illegal option"), undefined);
  assert.deepEqual(
    parseReplySources(
      "udp      17 59 src=192.0.2.10 dst=203.0.113.20 sport=54321 dport=53 [UNREPLIED] src=198.51.100.200 dst=192.0.2.10 sport=5353 dport=54321 mark=0 use=1\n" +
        "sctp     132 9 ESTABLISHED src=fd00:192::10 dst=fd00:10::5 sport=5000 dport=2905 src=fd00:203::9 dst=fd00:192::10 sport=2905 dport=5000 [ASSURED] mark=0 use=1\n",
    ),
    ["198.51.100.200", "fd00:203::9"],
  );
});

test("a missing tool is conntrack_unavailable, a refused call conntrack_failed", async () => {
  await assert.rejects(
    conntrackTool(["/nonexistent/conntrack"]).deleteFlows({
      family: "IPv4",
      protocol: "udp",
      origDst: "203.0.113.5",
      origPortDst: 53,
      replySrc: "198.51.100.9",
    }),
    { code: "conntrack_unavailable" },
  );
  // `false` exits 1 without conntrack's count line: a failure, not "0 deleted"
  await assert.rejects(
    conntrackTool(["false"]).deleteFlows({
      family: "IPv4",
      protocol: "udp",
      origDst: "203.0.113.5",
      origPortDst: 53,
    }),
    { code: "conntrack_failed" },
  );
});

test("against the kernel: by reply source and by mark (root with conntrack only)", async (t) => {
  if (process.getuid?.() !== 0) return t.skip("needs root and conntrack: not running as root");
  if (spawnSync("conntrack", ["--version"]).error)
    return t.skip("needs root and conntrack: conntrack is not installed");
  const ns = `plbct${process.pid}`;
  assert.equal(spawnSync("ip", ["netns", "add", ns]).status, 0);
  t.after(() => spawnSync("ip", ["netns", "del", ns]));
  const insert = (sport: number, pod: string, mark: number) => {
    const r = spawnSync("ip", [
      "netns",
      "exec",
      ns,
      "conntrack",
      "-I",
      "-p",
      "udp",
      "-s",
      "192.0.2.10",
      "-d",
      "203.0.113.20",
      "--sport",
      String(sport),
      "--dport",
      "53",
      "-r",
      pod,
      "-q",
      "192.0.2.10",
      "--reply-port-src",
      "5353",
      "--reply-port-dst",
      String(sport),
      "-t",
      "60",
      "--mark",
      String(mark),
    ]);
    assert.equal(r.status, 0, String(r.stderr));
  };
  const listed = () =>
    spawnSync("ip", ["netns", "exec", ns, "conntrack", "-L", "-p", "udp"], { encoding: "utf8" }).stdout;
  insert(54321, "198.51.100.200", 7);
  insert(54322, "198.51.100.201", 8);
  insert(54323, "198.51.100.202", 9);
  const tool = conntrackTool(["ip", "netns", "exec", ns, "conntrack"]);
  const flow = { family: "IPv4", protocol: "udp", origDst: "203.0.113.20", origPortDst: 53 } as const;
  assert.deepEqual((await tool.listReplySources(flow)).sort(), [
    "198.51.100.200",
    "198.51.100.201",
    "198.51.100.202",
  ]);
  assert.deepEqual(await tool.listReplySources({ ...flow, origPortDst: 54 }), []);
  assert.equal(await tool.deleteFlows({ ...flow, replySrc: "198.51.100.200" }), 1);
  assert.equal(
    await tool.deleteFlows({ ...flow, replySrc: "198.51.100.200" }),
    0,
    "none left: 0, not an error",
  );
  assert.equal(await tool.deleteFlows({ ...flow, mark: 8 }), 1);
  assert.equal(await tool.deleteFlows({ ...flow, origPortDst: 54, mark: 9 }), 0, "another port: untouched");
  const left = listed();
  assert.doesNotMatch(left, /198\.51\.100\.20[01]/);
  assert.match(left, /src=198\.51\.100\.202 .*mark=9/);
});
