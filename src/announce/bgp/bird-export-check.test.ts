/**
 * The BGP export comparison (bird-export-check.ts) on output captured from BIRD 2.0.12
 * peering with FRR 8.4 (test/fixtures/bgp/): what each Established session exports against
 * what the engine announces.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { exportProblems, type SessionExports } from "./bird-export-check.ts";
import { bgpSessionsOf, parseBirdProtocols, parseBirdRouteExport } from "./bird-status.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`../../../test/fixtures/bgp/${name}`, import.meta.url), "utf8");

const sessions = (exports: Record<string, string[] | undefined>): SessionExports[] =>
  bgpSessionsOf(parseBirdProtocols(fixture("protocols-established.txt"))).map((s) => ({
    name: s.name,
    peer: s.peer,
    established: s.established,
    exported: s.name in exports ? exports[s.name] : parseBirdRouteExport(fixture(`export-${s.name}.txt`)),
  }));

test("every announced VIP exported to every session of its family: no problem", () => {
  const checks = exportProblems({
    announced: ["203.0.113.10", "fd00:10::10"],
    known: ["203.0.113.10", "fd00:10::10"],
    sessions: sessions({}),
  });
  assert.deepEqual(
    checks.map((c) => [c.vip, c.problem]),
    [
      ["203.0.113.10", null],
      ["fd00:10::10", null],
    ],
  );
});

test("a route withheld from a session is bgp_not_exported, naming the session and the router", () => {
  const checks = exportProblems({
    announced: ["203.0.113.10", "fd00:10::10"],
    known: ["203.0.113.10", "fd00:10::10"],
    sessions: sessions({ peer1: parseBirdRouteExport("BIRD 2.0.12 ready.\n") }),
  });
  assert.deepEqual(checks[0], {
    vip: "203.0.113.10",
    problem: "bgp_not_exported",
    answers: [],
    message: "203.0.113.10: announced but not exported to peer1 (198.51.100.1)",
  });
  assert.equal(checks[1]?.problem, null);
});

test("an export of a withdrawn VIP, or of no VIP at all, is bgp_unexpected_export", () => {
  const checks = exportProblems({
    announced: ["fd00:10::10"],
    known: ["203.0.113.10", "fd00:10::10"],
    sessions: sessions({}),
  });
  assert.equal(checks[0]?.problem, "bgp_unexpected_export");
  assert.equal(checks[0]?.message, "203.0.113.10: exported to peer1 (198.51.100.1) but withdrawn here");
  const stray = exportProblems({ announced: [], known: [], sessions: sessions({ peer2: [] }) });
  assert.equal(
    stray[0]?.message,
    "203.0.113.10: exported to peer1 (198.51.100.1) but not a VIP of this host",
  );
});

test("sessions that are down or did not answer are not compared", () => {
  const down = sessions({}).map((s) => ({ ...s, established: false }));
  assert.deepEqual(
    exportProblems({ announced: ["203.0.113.10"], known: ["203.0.113.10"], sessions: down }),
    [],
  );
  const unanswered = sessions({ peer1: undefined, peer2: undefined });
  assert.deepEqual(
    exportProblems({ announced: ["203.0.113.10"], known: ["203.0.113.10"], sessions: unanswered }),
    [],
  );
});
