import assert from "node:assert/strict";
import { test } from "node:test";
import { createLogger, parseLogLevel } from "./logger.ts";

function capture(level: Parameters<typeof createLogger>[0]["level"]) {
  const lines: string[] = [];
  const logger = createLogger({
    level,
    component: "lb",
    write: (s) => lines.push(...s.split("\n").filter(Boolean)),
  });
  return { logger, lines, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

test("a finding becomes one JSON line with stable event/reason keys and the Service split out", () => {
  const { logger, lines, parsed } = capture("info");
  logger.finding({
    code: "pool_exhausted",
    severity: "warning",
    subject: "Service shop/api",
    message: "no free address in pool default",
  });
  assert.equal(lines.length, 1);
  const [line] = parsed();
  assert.equal(line!.event, "finding");
  assert.equal(line!.reason, "pool_exhausted");
  assert.equal(line!.service, "shop/api");
  assert.equal(line!.level, "warn");
  assert.equal(line!.component, "lb");
  assert.equal(line!.msg, "no free address in pool default");
  assert.match(String(line!.time), /^\d{4}-\d\d-\d\dT/);
});

test("node subjects, custom events, levels and redaction", () => {
  const { logger, parsed } = capture("info");
  logger.finding(
    { code: "agent_unreachable", severity: "error", subject: "Node node-b", message: "x" },
    "agent",
  );
  logger.log("debug", { event: "probe" }, "below the level: dropped");
  logger
    .child({ node: "node-a" })
    .log("info", { event: "health_transition", reason: "timeout", password: "hunter2" }, "down");
  const lines = parsed();
  assert.equal(lines.length, 2);
  assert.deepEqual([lines[0]!.event, lines[0]!.node, lines[0]!.level], ["agent", "node-b", "error"]);
  assert.deepEqual(
    [lines[1]!.event, lines[1]!.reason, lines[1]!.node],
    ["health_transition", "timeout", "node-a"],
  );
  assert.equal(lines[1]!.password, "[redacted]");
});

test("--log-level values", () => {
  assert.equal(parseLogLevel("debug"), "debug");
  assert.equal(parseLogLevel("verbose"), undefined);
  const { logger, lines } = capture("silent");
  logger.log("error", { event: "x" }, "nothing at silent");
  assert.equal(lines.length, 0);
});
