/**
 * The conntrack sizing part (issue 16; lb-host/conntrack-check.ts decides and reports):
 * checked at start, where a refused --conntrack-max stops the host (exit 1); nf_conntrack
 * may load only with the table's `ct mark` rules, so when it is not loaded yet the check
 * runs once more after the first sync. Nothing to undo.
 */
import type { ConntrackSysctl } from "../../../drivers/conntrack-sysctl.ts";
import { checkConntrack } from "../../conntrack-check.ts";
import type { LbHostPart } from "../../lb-host.ts";
import type { FlowTableConfig } from "../../nftables/render/flow-map.ts";
import type { LbHostSinks } from "../lb-host-sinks.ts";
import { StartRefused } from "../start-refused.ts";

export interface ConntrackPartOptions {
  readonly conntrack: ConntrackSysctl;
  readonly max: number | undefined;
  readonly flowTable: FlowTableConfig;
  readonly expectedFlows: number | undefined;
  readonly firstSync: Promise<void>;
}

export class ConntrackPart implements LbHostPart {
  readonly name = "conntrack";
  readonly #o: ConntrackPartOptions;
  readonly #sinks: LbHostSinks;

  constructor(options: ConntrackPartOptions, sinks: LbHostSinks) {
    this.#o = options;
    this.#sinks = sinks;
  }

  async start(): Promise<undefined> {
    const sized = await this.#check();
    if (sized === "failed") throw new StartRefused(1, undefined);
    if (sized === "not_loaded")
      void this.#o.firstSync.then(async () => {
        if ((await this.#check()) === "not_loaded")
          this.#sinks.say(
            "passlb lb: info conntrack_not_loaded: nf_conntrack is not loaded; its sizes were not checked",
          );
      });
    return undefined;
  }

  #check() {
    const { say, obs } = this.#sinks;
    return checkConntrack({
      conntrack: this.#o.conntrack,
      max: this.#o.max,
      flowTable: this.#o.flowTable,
      expectedFlows: this.#o.expectedFlows,
      log: say,
      warn: (event, message) => obs?.observer.note({ event, severity: "warning", message }),
    });
  }
}
