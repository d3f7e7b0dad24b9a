/**
 * The part of `passlb up` both modes share after start: redraw the live view every
 * `refreshMs` until the shutdown signal, `--duration` seconds, or — with `--once` — one
 * view after a few seconds. Timers only; what is drawn is the caller's.
 */
export interface ViewLoopOptions {
  readonly draw: () => void;
  readonly refreshMs: number;
  readonly once: boolean;
  /** seconds */
  readonly duration: number | undefined;
  readonly signal: AbortSignal;
  /** how long `--once` waits before its one view (default 3000 ms) */
  readonly onceAfterMs?: number;
}

export function runViewLoop(o: ViewLoopOptions): Promise<void> {
  return new Promise<void>((resolve) => {
    const timers: Array<ReturnType<typeof setTimeout>> = [];
    const finish = () => {
      for (const t of timers) clearTimeout(t);
      clearInterval(view);
      o.signal.removeEventListener("abort", finish);
      resolve();
    };
    const view = setInterval(o.draw, Math.max(200, o.refreshMs));
    if (o.once) {
      view.unref();
      timers.push(
        setTimeout(() => {
          o.draw();
          finish();
        }, o.onceAfterMs ?? 3000),
      );
    }
    if (o.duration !== undefined) timers.push(setTimeout(finish, o.duration * 1000));
    if (o.signal.aborted) finish();
    else o.signal.addEventListener("abort", finish, { once: true });
  });
}
