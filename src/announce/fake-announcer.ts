/**
 * In-memory stand-in for an announcement engine (announcer.ts `Announcer`), for tests of
 * the wiring in `passlb lb`: it records every input and the stop, and reports each VIP as
 * held while it is ready, as an engine on a lone host would. It runs no process and touches
 * no address.
 */
import type {
  AnnounceInput,
  Announcer,
  AnnouncerStatus,
  EngineState,
  NotReadyReason,
  VipReadiness,
} from "./announcer.ts";

/** One VIP's readiness as `vipReadiness` would give it (`ok` is ready), for tests' inputs. */
export function vipReady(vip: string, reason: NotReadyReason = "ok", services: string[] = []): VipReadiness {
  return {
    vip,
    family: vip.includes(":") ? "IPv6" : "IPv4",
    services,
    ready: reason === "ok",
    reason,
    detail: reason,
  };
}

export class FakeAnnouncer implements Announcer {
  readonly inputs: AnnounceInput[] = [];
  stopped: { graceful: boolean } | undefined;
  #state: EngineState = "stopped";
  readonly #host: string;
  readonly #engine: AnnouncerStatus["engine"];

  constructor(host = "lb-1", engine: AnnouncerStatus["engine"] = "keepalived") {
    this.#host = host;
    this.#engine = engine;
  }

  async start(input: AnnounceInput): Promise<void> {
    this.#state = "running";
    this.inputs.push(input);
  }

  async update(input: AnnounceInput): Promise<void> {
    if (this.#state === "running") this.inputs.push(input);
  }

  get last(): AnnounceInput | undefined {
    return this.inputs.at(-1);
  }

  status(): AnnouncerStatus {
    const vips = this.last?.vips ?? [];
    return {
      engine: this.#engine,
      host: this.#host,
      state: this.#state,
      generation: this.last?.generation ?? 0,
      vips: vips.map((v) => ({
        vip: v.vip,
        state: this.#state === "running" && v.ready ? "held" : "withdrawn",
        reason: v.ready ? "fake" : `not_ready:${v.reason}`,
      })),
      groups: [],
    };
  }

  async stop(options: { readonly graceful: boolean }): Promise<void> {
    this.stopped = { graceful: options.graceful };
    this.#state = "stopped";
  }
}
