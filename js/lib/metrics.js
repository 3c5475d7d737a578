// Latency and redraw counters on the root's dataset, read by the browser tests and
// benchmarks/widget_speed.py: data-frames-drawn (first paints of newly received frames so far: each frame
// from Python counts once, at the scatter's first paint that shows it; frames that arrive between two
// paints count as one, and tween paints and repaints for hover, zoom or selection do not count),
// data-select-latency-ms (grid click -> first drawn frame of the run it started) and data-paint-ms (the
// scatter's drawing time per drawn frame in the main thread, a running mean over the last 60 frames).

/**
 * @param {HTMLElement} root
 * @param {{now: () => number}} clock js/lib/schedule.js `Clock`
 */
export function createMetrics(root, clock) {
  /** @type {{t0: number, runId: number} | null} */
  let pending = null;
  let paintMs = 0;
  root.dataset.framesDrawn = "0";
  return {
    /** A head was clicked while run `runId` was the current one. */
    /** @param {number} runId */
    clicked(runId) {
      pending = { t0: clock.now(), runId };
    },
    /** The scatter drew its `count`-th frame in `ms` milliseconds, showing a frame of run `shownRun`. */
    /** @param {number} count @param {number | null} shownRun @param {number} [ms] */
    drawn(count, shownRun, ms = 0) {
      root.dataset.framesDrawn = String(count);
      paintMs += (ms - paintMs) / Math.min(count, 60);
      root.dataset.paintMs = paintMs.toFixed(2);
      if (pending && shownRun != null && shownRun > pending.runId) {
        root.dataset.selectLatencyMs = String(Math.round(clock.now() - pending.t0));
        pending = null;
      }
    },
  };
}
