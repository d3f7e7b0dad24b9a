/** The proxy's read-buffer policy: small while reads are small, big while they fill it, never reuse a held one. */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  BIG_READ,
  firstReadBuffer,
  idleBigBuffers,
  nextReadBuffer,
  releaseReadBuffer,
  SMALL_READ,
} from "./read-buffers.ts";

test("a socket starts small, goes big after a read that filled its buffer, and back after one that did not", () => {
  const first = firstReadBuffer();
  assert.equal(first.length, SMALL_READ);
  assert.equal(nextReadBuffer(first, 10, false), first, "a partial read keeps the small buffer");
  const big = nextReadBuffer(first, SMALL_READ, false);
  assert.equal(big.length, BIG_READ);
  assert.equal(nextReadBuffer(big, BIG_READ, false), big, "full reads keep the big buffer");
  const idle = idleBigBuffers();
  const small = nextReadBuffer(big, 100, false);
  assert.equal(small.length, SMALL_READ);
  assert.equal(idleBigBuffers(), idle + 1, "the big buffer went back to the free list");
  const again = nextReadBuffer(small, SMALL_READ, false);
  assert.equal(again, big, "and is reused by the next bulk read");
  assert.equal(idleBigBuffers(), idle);
});

test("a buffer a write still holds is never handed out again", () => {
  const big = nextReadBuffer(firstReadBuffer(), SMALL_READ, false);
  const idle = idleBigBuffers();
  const next = nextReadBuffer(big, BIG_READ, true);
  assert.notEqual(next, big);
  assert.equal(next.length, BIG_READ);
  assert.equal(idleBigBuffers(), idle, "the held buffer is not on the free list");
  const small = nextReadBuffer(next, 5, true);
  assert.notEqual(small, next);
  assert.equal(idleBigBuffers(), idle, "nor is the next one, held in turn");
  const seen = new Set<Buffer>();
  for (let i = 0; i < 200; i++) seen.add(nextReadBuffer(small, SMALL_READ, false));
  assert.equal(seen.has(big) || seen.has(next), false);
  releaseReadBuffer(small);
  assert.equal(idleBigBuffers(), idle, "a small buffer is not kept");
});
