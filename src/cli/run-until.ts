/**
 * A long-running command's wait: until the shutdown signal fires, or `--duration` seconds
 * have passed when it is set. Deliberately not here: what to stop afterwards (the caller).
 */
export function runUntil(signal: AbortSignal, durationSeconds: string | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = durationSeconds ? setTimeout(resolve, Number(durationSeconds) * 1000) : undefined;
    signal.addEventListener("abort", () => {
      if (t) clearTimeout(t);
      resolve();
    });
  });
}
