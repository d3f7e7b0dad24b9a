/**
 * A TCP target that never answers a connect, without root: a listener in a child process
 * that never runs its event loop, whose one-slot accept queue is filled first, so further
 * connects hang in SYN retries (a dead backend). `close()` kills the child and the fillers.
 */
import { fork } from "node:child_process";
import { connect } from "node:net";

export async function stuckListener(host: string): Promise<{ port: number; close: () => void }> {
  const child = fork(
    "-e",
    [
      [
        `const s = require("node:net").createServer();`,
        `s.listen({ host: ${JSON.stringify(host)}, port: 0, backlog: 1 }, () => {`,
        `  process.send(s.address().port);`,
        `  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10000);`,
        `});`,
      ].join("\n"),
    ],
    { execArgv: [], stdio: ["ignore", "ignore", "ignore", "ipc"] },
  );
  const port = await new Promise<number>((r) => child.once("message", (m) => r(Number(m))));
  const fillers = [0, 1, 2, 3, 4].map(() => connect({ host, port }).on("error", () => {}));
  await new Promise((r) => setTimeout(r, 100));
  return {
    port,
    close: () => {
      for (const f of fillers) f.destroy();
      child.kill("SIGKILL");
    },
  };
}
