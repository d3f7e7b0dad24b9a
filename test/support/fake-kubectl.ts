/**
 * A fake `kubectl` for the plugin's end-to-end tests: a small node script written into a
 * fresh temp dir, which the test puts first on PATH. It answers from a routes table
 * (arguments joined by spaces → a fixture file to print, or stderr and an exit code) and
 * records every call, one JSON array of arguments per line. Nothing touches a cluster.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

export type Route = { stdout: string } | { stderr: string; exit: number };

const SCRIPT = `
const { readFileSync, appendFileSync } = require("node:fs");
const { join } = require("node:path");
const args = process.argv.slice(2);
appendFileSync(process.env.FAKE_KUBECTL_LOG, JSON.stringify(args) + "\\n");
const routes = JSON.parse(readFileSync(process.env.FAKE_KUBECTL_ROUTES, "utf8"));
// kubectl's global flags (the plugin passes --context and --kubeconfig) do not change the answer
const route = routes[args.filter((a) => !/^--(context|kubeconfig)=/.test(a)).join(" ")];
if (!route) {
  process.stderr.write("fake kubectl: no answer for: " + args.join(" ") + "\\n");
  process.exit(1);
}
if (route.stdout !== undefined) process.stdout.write(readFileSync(join(process.env.FAKE_KUBECTL_FIXTURES, route.stdout)));
else {
  process.stderr.write(route.stderr);
  process.exit(route.exit);
}
`;

export interface FakeKubectl {
  /** the environment to run the plugin with: PATH starts with the fake's dir */
  readonly env: NodeJS.ProcessEnv;
  /** the calls made so far, each as its argument list */
  calls(): string[][];
  remove(): void;
}

/** `routes` is the fixture routes file's table with `overrides` on top; `null` removes a route. */
export function fakeKubectl(fixtures: string, overrides: Record<string, Route | null> = {}): FakeKubectl {
  const dir = mkdtempSync(join(tmpdir(), "plb-kubectl-"));
  const routes: Record<string, Route | null> = {
    ...JSON.parse(readFileSync(join(fixtures, "routes.json"), "utf8")),
    ...overrides,
  };
  for (const [k, v] of Object.entries(routes)) if (v === null) delete routes[k];
  writeFileSync(join(dir, "routes.json"), JSON.stringify(routes));
  writeFileSync(join(dir, "calls.log"), "");
  const script = join(dir, "kubectl");
  writeFileSync(script, `#!${process.execPath}\n${SCRIPT}`);
  chmodSync(script, 0o755);
  return {
    env: {
      ...process.env,
      PATH: `${dir}${delimiter}${process.env.PATH ?? ""}`,
      FAKE_KUBECTL_ROUTES: join(dir, "routes.json"),
      FAKE_KUBECTL_FIXTURES: fixtures,
      FAKE_KUBECTL_LOG: join(dir, "calls.log"),
    },
    calls: () =>
      readFileSync(join(dir, "calls.log"), "utf8")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as string[]),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
