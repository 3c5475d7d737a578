// The grid row the pointer rests on, reported to Python as `hovered_head` so that it builds that head's P
// before the click (headsne_widget/prefetch.py, which this mirrors: same constants). At 8192 tokens a
// click spends about 0.35 s on the head's attention and P; the pointer rests on a row longer than that
// before most clicks. Only for long texts: below PREFETCH_MIN_N a P takes milliseconds, and a message in
// flight would hold a click's write back (the host keeps one update per model in flight).

import { realClock } from "../lib/schedule.js";

/** tokens from which the row the pointer rests on is reported (prefetch.PREFETCH_MIN_N) */
export const PREFETCH_MIN_N = 2048;
/** how long the pointer rests on a row before it is reported (prefetch.DWELL_MS) */
export const DWELL_MS = 120;

/**
 * Calls `report([layer, head])` once the pointer has rested `ms` on the same row, unless `wanted(layer,
 * head)` says no (short text, hidden mode, the selected head) or that row was the last one reported.
 * @param {{report: (value: [number, number]) => void, wanted: (layer: number, head: number) => boolean,
 *   clock?: import("../lib/schedule.js").Clock, ms?: number}} options
 */
export function createDwell({ report, wanted, clock = realClock, ms = DWELL_MS }) {
  /** @type {any} */
  let timer = null;
  let at = "";
  let reported = "";
  const cancel = () => {
    if (timer !== null) clock.cancel(timer);
    timer = null;
    at = "";
  };
  return {
    /**
     * The pointer is over row (layer, head) of the grid, or over none (layer null).
     * @param {number | null} layer
     * @param {number} [head]
     */
    over(layer, head = 0) {
      const key = layer == null ? "" : `${layer}:${head}`;
      if (key === at) return; // still on the same row: its timer runs on
      cancel();
      if (layer == null || key === reported || !wanted(layer, head)) return;
      at = key;
      const row = layer;
      timer = clock.later(() => {
        timer = null;
        if (wanted(row, head)) {
          reported = key;
          report([row, head]);
        }
      }, ms);
    },
    /** Forget the row (a click selects it: nothing to report). */
    cancel,
  };
}
