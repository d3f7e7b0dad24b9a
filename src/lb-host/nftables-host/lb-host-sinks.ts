/**
 * Where the nftables LB host's parts report: one operator line at a time (stderr; the
 * lines the tests assert) and, when the process has them, the logs, metrics and dashboard
 * (cli/observability.ts).
 */
import type { Observability } from "../../cli/observability.ts";

export interface LbHostSinks {
  /** one line, without its newline */
  readonly say: (line: string) => void;
  readonly obs?: Observability | undefined;
}
