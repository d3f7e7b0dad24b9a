/**
 * Adapter: listens for VRRP advertisements on the segment with tcpdump (docs/vip-announce.md
 * "VRRP hygiene") and keeps the foreign speakers heard on one of passlb's VRIDs
 * (vrrp-adverts.ts, pure, parses and judges). tcpdump runs for as long as the watch does
 * (`-l`: line-buffered, `-n`: no name lookups, `-e`: the source MAC), restarted 5 s after it
 * exits. A speaker goes from the report `holdMs` after its last advert.
 *
 * Measured with keepalived 2.2.7 (test/announce/vrrp-hygiene.test.ts): a foreign router
 * advertising a passlb VRID by multicast leaves no line in keepalived's log — in unicast
 * mode keepalived joins no VRRP group, so the kernel never hands it those adverts — so a
 * capture is the way to see a clash. tcpdump puts the interface into promiscuous mode
 * (its default; a NIC drops multicast frames of groups nobody joined otherwise).
 * Does not change keepalived's configuration.
 */
import { type ChildProcess, spawn } from "node:child_process";
import {
  currentSpeakers,
  type ForeignSpeaker,
  noteAdvert,
  parseVrrpLine,
  type VridRange,
} from "./vrrp-adverts.ts";
import type { WireReport } from "./wire-verdict.ts";

export interface VrrpWatchOptions {
  readonly interface: string;
  readonly range: VridRange;
  /** every address of our LB hosts on the segment (both families) */
  ours(): ReadonlySet<string>;
  /** tests: `["ip", "netns", "exec", NS]` */
  readonly prefix?: readonly string[];
  readonly tcpdump?: string;
  readonly holdMs?: number;
  readonly now?: () => number;
  /** a speaker heard for the first time (or again after it was gone) */
  onForeign?(speaker: ForeignSpeaker): void;
  onGone?(speaker: ForeignSpeaker): void;
  onError?(message: string): void;
}

export type VrrpWatchReport = NonNullable<WireReport["vrrp"]>;

export class VrrpWatch {
  readonly #o: VrrpWatchOptions;
  #child: ChildProcess | undefined;
  #speakers: ForeignSpeaker[] = [];
  #reported = new Set<string>();
  #restart: ReturnType<typeof setTimeout> | undefined;
  #sweep: ReturnType<typeof setInterval> | undefined;
  #stopped = false;
  #error: string | undefined;

  constructor(options: VrrpWatchOptions) {
    this.#o = options;
  }

  start(): void {
    this.#spawn();
    this.#sweep = setInterval(() => this.#expire(), 1000);
    this.#sweep.unref();
  }

  report(): VrrpWatchReport {
    const now = (this.#o.now ?? Date.now)();
    return {
      watching: this.#child !== undefined,
      interface: this.#o.interface,
      range: this.#o.range,
      foreign: currentSpeakers(this.#speakers, now, this.#holdMs),
      ...(this.#error !== undefined && { error: this.#error }),
    };
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#restart);
    clearInterval(this.#sweep);
    this.#child?.kill("SIGTERM");
    this.#child = undefined;
  }

  get #holdMs(): number {
    return this.#o.holdMs ?? 10_000;
  }

  #spawn(): void {
    const cmd = [
      ...(this.#o.prefix ?? []),
      this.#o.tcpdump ?? "tcpdump",
      "-l",
      "-n",
      "-e",
      "-i",
      this.#o.interface,
      "ip proto 112 or ip6 proto 112",
    ];
    const child = spawn(cmd[0]!, cmd.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    this.#child = child;
    let buffered = "";
    let stderr = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop() ?? "";
      for (const line of lines) this.#line(line);
    });
    child.stderr!.on("data", (b: Buffer) => {
      stderr = `${stderr}${b.toString()}`.slice(-2000);
    });
    const ended = (why: string) => {
      if (this.#child !== child) return;
      this.#child = undefined;
      if (this.#stopped) return;
      this.#error = `tcpdump on ${this.#o.interface} ${why}: ${stderr.trim().split("\n").pop() ?? ""}`.trim();
      this.#o.onError?.(this.#error);
      this.#restart = setTimeout(() => this.#spawn(), 5000);
      this.#restart.unref();
    };
    child.on("error", (e) => ended(`could not start (${e.message})`));
    child.on("exit", (code, signal) => ended(`exited (${signal ?? `code ${code}`})`));
  }

  #line(line: string): void {
    const advert = parseVrrpLine(line);
    if (!advert) return;
    const now = (this.#o.now ?? Date.now)();
    this.#speakers = noteAdvert(this.#speakers, advert, {
      interface: this.#o.interface,
      ours: this.#o.ours(),
      range: this.#o.range,
      now,
    });
    for (const s of currentSpeakers(this.#speakers, now, this.#holdMs)) {
      const key = `${s.family} ${s.vrid} ${s.source}`;
      if (this.#reported.has(key)) continue;
      this.#reported.add(key);
      this.#o.onForeign?.(s);
    }
  }

  #expire(): void {
    const now = (this.#o.now ?? Date.now)();
    const current = currentSpeakers(this.#speakers, now, this.#holdMs);
    for (const s of this.#speakers)
      if (!current.includes(s)) {
        this.#reported.delete(`${s.family} ${s.vrid} ${s.source}`);
        this.#o.onGone?.(s);
      }
    this.#speakers = current;
  }
}
