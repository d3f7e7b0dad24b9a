import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { assertGolden } from "../../test/golden.ts";
import { type LiveState, renderLiveLines, renderLiveView } from "./live-view.ts";

const FIXTURES = new URL("../../test/fixtures/userspace/", import.meta.url);
const state = JSON.parse(readFileSync(new URL("live-state.json", FIXTURES), "utf8")) as LiveState;

test("the terminal view: per Service the VIP, node health and weight, pod shares", () => {
  const text = renderLiveView(state);
  assertGolden(new URL("live-view.txt", FIXTURES).pathname, text);
  assert.match(text, /running 45s/);
  assert.match(text, /demo\/web-4 +node-a2 +40% +40/);
  assert.match(text, /node-c1\[zone-c\] DOWN w0 \(out\)/);
  assert.match(text, /FAIL-OPEN/);
});

test("plain lines: one per Service, no escape sequences", () => {
  const text = renderLiveLines(state);
  assert.equal(text.split("\n").filter(Boolean).length, 2);
  assert.ok(!text.includes("\u001b"), "no escape sequences");
  assert.match(
    text,
    /^\[45s\] demo\/web TCP 127\.0\.1\.3:8080 Local nodes: node-a1=up\/w3 node-a2=up\/w1 node-c1=DOWN\/w0 \| last 10s: 100 conns web-1=30 web-2=30 web-4=40$/m,
  );
  assert.match(text, /demo\/dns .* Cluster fail-open nodes: node-a1=\?\/w1 \| last 10s: 0 conns/);
});
