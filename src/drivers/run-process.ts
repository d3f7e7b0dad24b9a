/**
 * Runs one external program to completion: argv, optional stdin, collected stdout and
 * stderr, the exit code, and the spawn error when it could not start (ENOENT, EACCES).
 * Never throws and never rejects: each driver classifies the result itself.
 *
 * Does not: time out, retry or interpret output.
 */
import { spawn } from "node:child_process";

export interface ProcessResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly spawnError?: NodeJS.ErrnoException;
}

export function runProcess(cmd: string, argv: readonly string[], input?: string): Promise<ProcessResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, argv, { stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let spawnError: NodeJS.ErrnoException | undefined;
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", (e) => {
      spawnError = e;
    });
    child.on("close", (code) => {
      const r = {
        code,
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
      };
      resolve(spawnError ? { ...r, spawnError } : r);
    });
    child.stdin.on("error", () => {}); // EPIPE when the program exits early; the exit code tells
    child.stdin.end(input ?? "");
  });
}
