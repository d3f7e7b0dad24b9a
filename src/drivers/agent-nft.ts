/**
 * Adapter: hands a node agent's ruleset (`agent-ruleset.ts`) to `nft -f -` as one
 * transaction, checks one with `nft --check`, or removes the agent's table. Failures are
 * PasslbErrors (`nft_failed` with nft's stderr, `nft_unavailable` when nft cannot run).
 * It does not decide anything; it does not read or diff the kernel's ruleset (the table
 * is replaced whole, which leaves conntrack, and so established connections, alone).
 */
import { spawn } from "node:child_process";
import { PasslbError } from "../errors.ts";
import { AGENT_TABLE } from "../node-agent/agent-ruleset.ts";

export interface AgentNft {
  readonly apply: (script: string) => Promise<void>;
  readonly check: (script: string) => Promise<void>;
  readonly remove: () => Promise<void>;
}

/** `command` is how to run nft: `["nft"]`, or e.g. `["ip", "netns", "exec", NS, "nft"]`. */
export function agentNft(command: readonly string[] = ["nft"]): AgentNft {
  return {
    apply: (script) => runNft(command, ["-f", "-"], script),
    check: (script) => runNft(command, ["--check", "-f", "-"], script),
    remove: () =>
      runNft(command, ["-f", "-"], `table inet ${AGENT_TABLE}\ndelete table inet ${AGENT_TABLE}\n`),
  };
}

export function runNft(command: readonly string[], args: readonly string[], stdin: string): Promise<void> {
  const [nftPath, ...prefix] = command;
  if (nftPath === undefined) throw new Error("runNft: empty command");
  return new Promise((resolve, reject) => {
    const child = spawn(nftPath, [...prefix, ...args], { stdio: ["pipe", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d: string) => {
      stderr += d;
    });
    child.on("error", (e) =>
      reject(new PasslbError("nft_unavailable", `cannot run ${nftPath}: ${e.message}`, { cause: e })),
    );
    child.on("close", (code) => {
      if (code === 0) resolve();
      else
        reject(
          new PasslbError("nft_failed", `nft ${args.join(" ")} failed (exit ${code}): ${stderr.trim()}`, {
            details: { stderr, exitCode: code },
          }),
        );
    });
    child.stdin.on("error", () => {}); // a dying nft closes stdin early; "close" reports it
    child.stdin.end(stdin);
  });
}
