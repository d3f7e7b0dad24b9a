/**
 * The lab's own scripts, transpiled once per lab into its state directory.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export type LabScript = "echo-server" | "lab-client";

/**
 * The lab's own scripts (src/lab/echo-server.ts, lab-client.ts) as plain JavaScript in the
 * state directory: a dozen pods start in well under a second instead of paying tsx's
 * start-up each. They import only Node's built-ins, so a bare transform (esbuild, which
 * tsx already brings) is enough; without esbuild they run through tsx.
 */
export async function compileLabScripts(
  repoRoot: string,
  stateDir: string,
): Promise<{ command: (script: LabScript) => string[] }> {
  const outDir = join(stateDir, "bin");
  mkdirSync(outDir, { recursive: true });
  let transform: ((code: string) => string) | undefined;
  try {
    const esbuild = await import("esbuild");
    transform = (code) => esbuild.transformSync(code, { loader: "ts", format: "esm", target: "node20" }).code;
  } catch {
    transform = undefined;
  }
  const scripts: LabScript[] = ["echo-server", "lab-client"];
  // written to a temporary name, then renamed: a running lab compiles again when it grows
  // (lab-grow.ts), while its clients may be starting from these files
  if (transform)
    for (const s of scripts) {
      const tmp = join(outDir, `.${s}.mjs.tmp`);
      writeFileSync(tmp, transform(readFileSync(join(repoRoot, "src", "lab", `${s}.ts`), "utf8")));
      renameSync(tmp, join(outDir, `${s}.mjs`));
    }
  return {
    command: (script) =>
      transform
        ? [join(outDir, `${script}.mjs`)]
        : ["--import", "tsx", join(repoRoot, "src", "lab", `${script}.ts`)],
  };
}
