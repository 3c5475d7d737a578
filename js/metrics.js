// Latency and redraw counters on the root's dataset, read by the browser tests and
// benchmarks/widget_speed.py: data-frames-drawn (scatter redraws so far) and data-select-latency-ms
// (grid click -> first drawn frame of the run it started).

/** @param {HTMLElement} root */
export function createMetrics(root) {
  /** @type {{t0: number, runId: number} | null} */
  let pending = null;
  root.dataset.framesDrawn = "0";
  return {
    /** A head was clicked while run `runId` was the current one. */
    clicked(runId) {
      pending = { t0: performance.now(), runId };
    },
    /** The scatter drew its `count`-th frame, showing a frame of run `shownRun`. */
    drawn(count, shownRun) {
      root.dataset.framesDrawn = String(count);
      if (pending && shownRun != null && shownRun > pending.runId) {
        root.dataset.selectLatencyMs = String(Math.round(performance.now() - pending.t0));
        pending = null;
      }
    },
  };
}
