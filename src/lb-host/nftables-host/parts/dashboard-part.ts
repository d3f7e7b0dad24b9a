/**
 * The dashboard, /api/v1/state and /metrics (src/web/), served once the data plane runs;
 * its address is said on stderr. The server closes with the process's Observability
 * (cli/lb-command.ts), so nothing to undo here.
 */
import type { Observability } from "../../../cli/observability.ts";
import type { LbHostPart } from "../../lb-host.ts";

export class DashboardPart implements LbHostPart {
  readonly name = "dashboard";

  constructor(
    readonly obs: Observability,
    readonly say: (line: string) => void,
  ) {}

  async start(): Promise<undefined> {
    const dashboard = await this.obs.serve();
    if (dashboard) this.say(`passlb lb: dashboard ${dashboard} (metrics at ${dashboard}metrics)`);
    return undefined;
  }
}
