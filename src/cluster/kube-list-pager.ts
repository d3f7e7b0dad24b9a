/**
 * Adapter helper: one collection read as a sequence of pages — client-go's ListPager in our
 * own words (k8s.io/client-go/tools/pager/pager.go; Kubernetes API concepts, "Retrieving
 * large results sets in chunks").
 *
 * - Each request asks for at most `limit` items; the server answers with a
 *   `metadata.continue` token while more remain. The pages are concatenated in order.
 * - Every page of one list is served from the same snapshot, so the list's resourceVersion
 *   is the first page's (later pages repeat it); a watch resumes from it.
 * - A continue token the server no longer honours (410 Gone, reason Expired: the snapshot's
 *   resourceVersion was compacted while we paged) makes the pager read the collection again
 *   in one unpaginated request, as client-go does with FullListIfExpired; `fallback` says
 *   why, so the caller can count it. A 410 on the first page is an ordinary error.
 * - A server that hands back the token it was given would loop forever: that is an error.
 * - `limit` 0 (or less) asks for everything in one request.
 *
 * Deliberately not: retries or backoff (the reflector owns them), the streaming-list
 * protocol (sendInitialEvents), resourceVersion/resourceVersionMatch on the list request.
 */
import { PasslbError } from "../errors.ts";

export interface PageQuery {
  /** absent: no limit (everything in one answer) */
  readonly limit?: number;
  readonly continue?: string;
}

export interface ListPage {
  readonly items: readonly unknown[];
  readonly resourceVersion: string;
  /** "" when this was the last page */
  readonly continue: string;
}

export interface PagedList {
  readonly items: readonly unknown[];
  readonly resourceVersion: string;
  /** set when a continue token expired mid-list and the list was read again in one request */
  readonly fallback?: string;
}

/** client-go's default page size (pager.go, defaultPageSize) */
export const DEFAULT_PAGE_SIZE = 500;

export async function listInPages(
  fetchPage: (query: PageQuery) => Promise<ListPage>,
  limit: number,
): Promise<PagedList> {
  if (limit <= 0) {
    const whole = await fetchPage({});
    return { items: whole.items, resourceVersion: whole.resourceVersion };
  }
  const first = await fetchPage({ limit });
  const items: unknown[] = [...first.items];
  let token = first.continue;
  let requests = 1;
  while (token !== "") {
    let page: ListPage;
    try {
      requests++;
      page = await fetchPage({ limit, continue: token });
    } catch (e) {
      if (!isExpired(e)) throw e;
      const whole = await fetchPage({});
      return {
        items: whole.items,
        resourceVersion: whole.resourceVersion,
        fallback: `continue token expired on page ${requests}, after ${items.length} items (${errorText(e)}): listed again in one request`,
      };
    }
    if (page.continue === token) {
      throw new PasslbError("api_request_failed", "list: the server returned the same continue token again", {
        details: { requests },
      });
    }
    items.push(...page.items);
    token = page.continue;
  }
  return { items, resourceVersion: first.resourceVersion };
}

/** 410 Gone from the API server (our transport's error carries the HTTP status) */
function isExpired(e: unknown): boolean {
  return e instanceof PasslbError && e.details.status === 410;
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
