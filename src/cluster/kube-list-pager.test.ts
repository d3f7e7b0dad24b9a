/**
 * The list pager against a scripted server: pages concatenated in order, the first page's
 * resourceVersion, the full-list fallback on an expired continue token (and only then).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { PasslbError } from "../errors.ts";
import { type ListPage, listInPages, type PageQuery } from "./kube-list-pager.ts";

const gone = () =>
  new PasslbError("api_request_failed", "GET /api/v1/pods: HTTP 410 Expired", { details: { status: 410 } });

/**
 * A collection of `size` items served `limit` at a time from a snapshot at resourceVersion
 * `rv`; later pages report `laterRv` (a server may move on), and `fail(n)` may throw for request n.
 */
function server(size: number, opts: { rv?: string; laterRv?: string; fail?: (n: number) => unknown } = {}) {
  const all = Array.from({ length: size }, (_, i) => `item-${i}`);
  const queries: PageQuery[] = [];
  const fetchPage = async (q: PageQuery): Promise<ListPage> => {
    queries.push(q);
    const failure = opts.fail?.(queries.length);
    if (failure) throw failure;
    const from = q.continue === undefined ? 0 : Number(q.continue);
    const to = q.limit === undefined ? all.length : Math.min(all.length, from + q.limit);
    return {
      items: all.slice(from, to),
      resourceVersion: from === 0 ? (opts.rv ?? "100") : (opts.laterRv ?? opts.rv ?? "100"),
      continue: to < all.length ? String(to) : "",
    };
  };
  return { all, queries, fetchPage };
}

test("a list longer than the limit arrives whole, in order, in ceil(size/limit) requests", async () => {
  for (const [size, limit, requests] of [
    [0, 500, 1],
    [500, 500, 1],
    [501, 500, 2],
    [1234, 100, 13],
  ] as const) {
    const s = server(size, { rv: "7", laterRv: "9" });
    const list = await listInPages(s.fetchPage, limit);
    assert.deepEqual(list.items, s.all, `${size}/${limit}`);
    assert.equal(s.queries.length, requests, `${size}/${limit}`);
    assert.equal(list.resourceVersion, "7", "the list's version is the first page's");
    assert.equal(list.fallback, undefined);
    assert.ok(s.queries.every((q) => q.limit === limit));
    assert.equal(s.queries[0]?.continue, undefined);
  }
});

test("limit 0 reads the collection in one request without a limit", async () => {
  const s = server(1200);
  const list = await listInPages(s.fetchPage, 0);
  assert.equal(list.items.length, 1200);
  assert.deepEqual(s.queries, [{}]);
});

test("an expired continue token falls back to one unpaginated list, whose version counts", async () => {
  let n = 0;
  const s = server(250, { rv: "5", fail: (i) => (i === 3 ? gone() : undefined) });
  const list = await listInPages(async (q) => {
    n++;
    const page = await s.fetchPage(q);
    return q.limit === undefined ? { ...page, resourceVersion: "12" } : page;
  }, 100);
  assert.deepEqual(list.items, s.all);
  assert.equal(list.resourceVersion, "12");
  assert.deepEqual(
    s.queries.map((q) => [q.limit, q.continue]),
    [
      [100, undefined],
      [100, "100"],
      [100, "200"],
      [undefined, undefined],
    ],
  );
  assert.equal(n, 4);
  assert.match(list.fallback ?? "", /continue token expired on page 3, after 200 items/);
});

test("a 410 on the first page, or another error on a later one, is the caller's to handle", async () => {
  const first = server(250, { fail: (i) => (i === 1 ? gone() : undefined) });
  await assert.rejects(listInPages(first.fetchPage, 100), /HTTP 410/);
  assert.equal(first.queries.length, 1, "no fallback list");

  const refused = new PasslbError("api_unreachable", "GET /api/v1/pods: connect ECONNREFUSED");
  const later = server(250, { fail: (i) => (i === 2 ? refused : undefined) });
  await assert.rejects(listInPages(later.fetchPage, 100), (e) => e === refused);
  assert.equal(later.queries.length, 2);
});

test("a server that hands back the token it was given is an error, not an endless loop", async () => {
  let calls = 0;
  await assert.rejects(
    listInPages(async () => {
      calls++;
      return { items: [], resourceVersion: "1", continue: "same" };
    }, 10),
    /same continue token/,
  );
  assert.equal(calls, 2);
});
