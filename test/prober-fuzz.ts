/**
 * The health prober's HTTP fuzzer (issue 16 §3), shared by test/prober-fuzz.test.ts (a few
 * hundred cases) and bench/prober-fuzz.bench.ts (thousands): fast-check generates what a
 * target answers — bad status lines, garbage and huge headers, broken chunked bodies,
 * endless bodies, slow trickles, early closes and resets, TLS bytes on a plain port, no
 * answer at all — and a real loopback server (`AnswerServer`) plays it to passlb's real
 * probes: `probeOnce` (a new connection per probe) and `ProbeConnections` (kept-alive
 * connections; two probes in a row on one key, so the leftovers of the first answer meet
 * the second probe).
 *
 * `expectation` is the oracle, from passlb's documented rule (docs/health.md "Probes"):
 * healthy iff the answer's head — everything up to the first empty line, at most
 * MAX_HEAD_BYTES including it — arrives before the timeout and its status line is
 * `HTTP/1.0|1.1 SP 3DIGIT [SP reason]` with code 200 (Google Cloud's and Azure's rule; the
 * body is never read). Kubernetes' own HTTP probe (pkg/probe/http/http.go) takes 200–399,
 * and a GCE/Azure health check 200 only; passlb emulates the cloud checks, so a 204 or a
 * 302 is unhealthy. Where timing makes both verdicts honest (a head ending near the
 * deadline, a reset racing the last bytes) the oracle accepts either; otherwise it names
 * the one verdict.
 */
import { createServer, type Server, type Socket } from "node:net";
import fc from "fast-check";
import type { ProbeConnections } from "../src/health/probe-connections.ts";
import { MAX_HEAD_BYTES, probeOnce } from "../src/health/probe-once.ts";

// ---------------------------------------------------------------- generated answers

export type Step = { readonly write: string } | { readonly pauseMs: number };

export interface Answer {
  /** which family of answer (for the figures) */
  readonly family: string;
  /** played once for every request the connection carries */
  readonly steps: readonly Step[];
  /** after the steps: FIN, RST, keep the connection silent, or an endless body */
  readonly end: "end" | "reset" | "hang" | "endless";
  /** the probe's protocol (HTTPS against this plain server must fail) */
  readonly protocol: "HTTP" | "HTTPS";
}

const CRLF = "\r\n";
const latin1 = fc.string({ unit: "binary-ascii", maxLength: 60 });
const anyByte = fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c));
const bytes = (max: number) => fc.array(anyByte, { maxLength: max }).map((a) => a.join(""));

const validStatus = fc
  .tuple(
    fc.constantFrom("HTTP/1.1", "HTTP/1.0"),
    fc.oneof(
      { weight: 3, arbitrary: fc.constant(200) },
      { weight: 2, arbitrary: fc.integer({ min: 100, max: 599 }) },
      { weight: 1, arbitrary: fc.constantFrom(204, 301, 302, 304, 399, 500, 503) },
    ),
    fc.oneof(
      fc.constant(" OK"),
      fc.constant(""),
      fc.constant(" "),
      latin1.map((s) => ` ${s.replace(/[\r\n]/g, "")}`),
    ),
  )
  .map(([v, code, reason]) => `${v} ${code}${reason}`);

const badStatus = fc.oneof(
  fc.constantFrom(
    "HTTP/2 200 OK",
    "HTTP/1.1 200OK",
    "HTTP/1.1  200 OK",
    "http/1.1 200 OK",
    "HTTP/1.1 2000 OK",
    "HTTP/1.1 20 OK",
    "HTTP/1.1 +20 OK",
    "HTTP/1.2 200 OK",
    " HTTP/1.1 200 OK",
    "ICY 200 OK",
    "HTTP/1.1 200 OK\nX-Bare-LF: 1",
    "HTTP/1.1\t200 OK",
    "HTTP/1.1 ２００ OK",
    "",
    "\u0000\u0000\u0000",
  ),
  bytes(40),
);

const headerLine = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.stringMatching(/^[A-Za-z-]{1,20}$/), latin1)
      .map(([k, v]) => `${k}: ${v.replace(/[\r\n]/g, "")}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "Content-Length: 5",
      "Content-Length: -1",
      "Content-Length: 99999999999999999999",
      "Content-Length: 2, 3",
      "Transfer-Encoding: chunked",
      "Connection: close",
      "Connection: keep-alive",
      "X-Load-Balancing-Endpoint-Weight: 3",
      "X-Load-Balancing-Endpoint-Weight: -4",
      " folded continuation",
      "no colon here",
      ": empty name",
    ),
  },
  { weight: 1, arbitrary: bytes(60) },
);

/** huge headers: one line or many, up to 4× the head limit */
const hugeHeaders = fc
  .tuple(fc.integer({ min: MAX_HEAD_BYTES - 200, max: MAX_HEAD_BYTES * 4 }), fc.boolean())
  .map(([n, oneLine]) =>
    oneLine
      ? `X-Huge: ${"h".repeat(n)}`
      : Array.from({ length: Math.ceil(n / 40) }, (_, i) => `X-Many-${i}: ${"m".repeat(28)}`).join(CRLF),
  );

const body = fc.oneof(
  fc.constant({ headers: "", text: "" }),
  bytes(100).map((b) => ({ headers: `Content-Length: ${b.length}${CRLF}`, text: b })),
  fc
    .tuple(bytes(100), fc.integer({ min: -50, max: 1000 }))
    .map(([b, d]) => ({ headers: `Content-Length: ${Math.max(0, b.length + d)}${CRLF}`, text: b })),
  fc.constant({ headers: `Transfer-Encoding: chunked${CRLF}`, text: `5${CRLF}hello${CRLF}0${CRLF}${CRLF}` }),
  fc
    .constantFrom("zz\r\nhello\r\n", "5\r\nhel", "ffffffffffffffff\r\n", "5\r\nhelloXX0\r\n\r\n", "-1\r\n")
    .map((t) => ({ headers: `Transfer-Encoding: chunked${CRLF}`, text: t })),
);

/** a well-formed or malformed HTTP answer, as text */
const httpAnswer = fc
  .record({
    status: fc.oneof({ weight: 3, arbitrary: validStatus }, { weight: 1, arbitrary: badStatus }),
    headers: fc.oneof(
      {
        weight: 6,
        arbitrary: fc.array(headerLine, { maxLength: 6 }).map((ls) => ls.map((l) => l + CRLF).join("")),
      },
      { weight: 1, arbitrary: hugeHeaders.map((h) => h + CRLF) },
    ),
    body,
    /** how the head ends: properly, with bare LFs, or never */
    terminator: fc.constantFrom(CRLF, CRLF, CRLF, CRLF, "\n", ""),
  })
  .map(
    ({ status, headers, body, terminator }) =>
      `${status}${CRLF}${headers}${body.headers}${terminator}${body.text}`,
  );

/** TLS records (a ServerHello-like handshake, an alert) sent to a plain-HTTP probe */
const tlsGarbage = fc
  .tuple(
    fc.constantFrom("\x16\x03\x03", "\x15\x03\x01\x00\x02\x02\x28", "\x16\x03\x01\x00\x31\x02"),
    bytes(200),
  )
  .map(([a, b]) => a + b);

/** the text cut into pieces with pauses between: all at once, a few pauses, or a trickle */
const timed = (text: string, timeoutMs: number) =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constant<Step[]>([{ write: text }]) },
    {
      weight: 2,
      arbitrary: fc
        .array(fc.tuple(fc.nat(Math.max(0, text.length)), fc.integer({ min: 0, max: 15 })), { maxLength: 4 })
        .map((cuts) => split(text, cuts)),
    },
    {
      // a slow trickle: 1–4 bytes every 10–40 ms (a head of any size misses the deadline)
      weight: 1,
      arbitrary: fc.tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 10, max: 40 })).map(([n, ms]) => {
        const steps: Step[] = [];
        for (let i = 0; i < text.length && steps.length < 400; i += n)
          steps.push({ write: text.slice(i, i + n) }, { pauseMs: ms });
        return steps;
      }),
    },
    {
      // the whole answer after the deadline
      weight: 1,
      arbitrary: fc.constant<Step[]>([{ pauseMs: timeoutMs + 150 }, { write: text }]),
    },
  );

function split(text: string, cuts: readonly (readonly [number, number])[]): Step[] {
  const at = [...new Set(cuts.map(([c]) => c))].sort((a, b) => a - b);
  const steps: Step[] = [];
  let from = 0;
  for (const [i, c] of at.entries()) {
    steps.push({ write: text.slice(from, c) }, { pauseMs: cuts[i]?.[1] ?? 0 });
    from = c;
  }
  steps.push({ write: text.slice(from) });
  return steps.filter((s) => !("write" in s) || s.write !== "");
}

export const answerArb = (timeoutMs: number): fc.Arbitrary<Answer> =>
  fc
    .record({
      kind: fc.oneof(
        { weight: 8, arbitrary: httpAnswer.map((t) => ["http", t] as const) },
        { weight: 1, arbitrary: tlsGarbage.map((t) => ["tls-bytes", t] as const) },
        { weight: 1, arbitrary: bytes(300).map((t) => ["random-bytes", t] as const) },
        { weight: 1, arbitrary: fc.constant(["silent", ""] as const) },
      ),
      end: fc.constantFrom("end", "end", "hang", "reset", "endless"),
      protocol: fc.oneof(
        { weight: 9, arbitrary: fc.constant("HTTP" as const) },
        { weight: 1, arbitrary: fc.constant("HTTPS" as const) },
      ),
    })
    .chain(({ kind, end, protocol }) => {
      const [family, text]: readonly [string, string] = kind;
      return timed(text, timeoutMs).map((steps): Answer => ({ family, steps, end, protocol }));
    });

// ---------------------------------------------------------------- the oracle

/** passlb's success rule for a status line (docs/health.md; RFC 9112 §4 status-line, the reason optional) */
const STATUS_200 = /^HTTP\/1\.[01] 200(?: [^\r\n]*)?$/;

export interface Expectation {
  /** "healthy", "unhealthy", or "either" where timing decides honestly */
  readonly verdict: "healthy" | "unhealthy" | "either";
  readonly why: string;
}

export function expectation(a: Answer, timeoutMs: number): Expectation {
  if (a.protocol === "HTTPS") return { verdict: "unhealthy", why: "TLS handshake against a plain server" };
  let text = "";
  let at = 0;
  let headAt: number | undefined;
  for (const s of a.steps) {
    if ("pauseMs" in s) at += s.pauseMs;
    else {
      text += s.write;
      if (headAt === undefined && text.includes("\r\n\r\n")) headAt = at;
    }
  }
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return { verdict: "unhealthy", why: "the head never ends" };
  if (end + 4 > MAX_HEAD_BYTES)
    return { verdict: "unhealthy", why: `head of ${end + 4} bytes > ${MAX_HEAD_BYTES}` };
  const first = text.slice(0, text.indexOf("\r\n"));
  if (!STATUS_200.test(first))
    return { verdict: "unhealthy", why: `status line ${JSON.stringify(first.slice(0, 40))}` };
  const t = headAt ?? 0;
  if (t > timeoutMs * 1.5) return { verdict: "unhealthy", why: `head ends ${t} ms in, after the timeout` };
  // a reset right behind the last bytes may reach the probe first; a late head may be late
  if (a.end === "reset" || t > timeoutMs / 3) return { verdict: "either", why: "timing" };
  return { verdict: "healthy", why: "a 200 head in time" };
}

// ---------------------------------------------------------------- one case

/** One answer to three probes: probeOnce, and two in a row on one kept connection (at once). */
export async function probeCase(
  server: AnswerServer,
  conns: ProbeConnections,
  a: Answer,
  key: string,
  timeoutMs: number,
) {
  server.answer = a;
  const req = {
    protocol: a.protocol,
    address: "127.0.0.1",
    port: server.port,
    path: "/healthz",
    timeoutMs,
    readsWeight: true,
  } as const;
  const timed = async (via: string, p: () => Promise<{ ok: boolean; reason: string }>) => {
    const t = performance.now();
    const o = await p();
    return { via, ok: o.ok, reason: o.reason, at: t, ms: performance.now() - t };
  };
  const kept = async () => [
    await timed("kept#1", () => conns.probe({ ...req, key })),
    await timed("kept#2", () => conns.probe({ ...req, key })),
  ];
  const [once, k] = await Promise.all([timed("once", () => probeOnce(req)), kept()]);
  conns.forget(key);
  return [once, ...k];
}

// ---------------------------------------------------------------- the server

/** A loopback TCP server that plays the current Answer for every request on a connection. */
export class AnswerServer {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  answer: Answer | undefined;
  port = 0;

  constructor() {
    this.#server = createServer((s) => this.#serve(s));
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.#server.listen({ host: "127.0.0.1", port: 0 }, r));
    this.port = (this.#server.address() as { port: number }).port;
  }

  /** connections still open on the server's side */
  get open(): number {
    return this.#sockets.size;
  }

  /** Destroys every connection still open (a hanging answer's, between cases). */
  cut(): void {
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((r) => this.#server.close(r));
  }

  #serve(s: Socket): void {
    const answer = this.answer;
    this.#sockets.add(s);
    let closed = false;
    const timers = new Set<ReturnType<typeof setTimeout>>();
    s.on("close", () => {
      closed = true;
      this.#sockets.delete(s);
      for (const t of timers) clearTimeout(t);
    });
    s.on("error", () => {});
    if (!answer) return void s.destroy();
    let seen = "";
    let playing = false;
    let queued = 0;
    const later = (fn: () => void, ms: number) => {
      const t = setTimeout(() => {
        timers.delete(t);
        if (!closed) fn();
      }, ms);
      timers.add(t);
    };
    const play = (i: number) => {
      if (closed) return;
      const step = answer.steps[i];
      if (step === undefined) return finish();
      if ("pauseMs" in step) return later(() => play(i + 1), step.pauseMs);
      s.write(Buffer.from(step.write, "latin1"));
      play(i + 1);
    };
    const finish = () => {
      switch (answer.end) {
        case "end":
          s.end();
          return;
        case "reset":
          s.resetAndDestroy();
          return;
        case "hang":
          playing = false;
          if (queued > 0) {
            queued--;
            start();
          }
          return;
        case "endless": {
          let sent = 0;
          const more = () => {
            // bounded: 8 MB, or the probe closing the connection
            while (!closed && sent < 8 << 20) {
              sent += 16384;
              if (!s.write("x".repeat(16384))) return void s.once("drain", more);
            }
          };
          more();
          return;
        }
      }
    };
    const start = () => {
      playing = true;
      play(0);
    };
    s.setEncoding("latin1");
    s.on("data", (chunk: string) => {
      // one play per request (an empty line), or at once for a TLS ClientHello
      const requests = (seen + chunk).split("\r\n\r\n").length - 1;
      seen = (seen + chunk).slice(-3);
      const n = requests > 0 ? requests : chunk.charCodeAt(0) === 0x16 ? 1 : 0;
      for (let i = 0; i < n; i++) {
        if (playing) queued++;
        else start();
      }
    });
  }
}
