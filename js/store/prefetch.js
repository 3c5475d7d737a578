// The grid row the pointer rests on, reported to Python as `hovered_head` so that it builds that row's P before
// the click (headsne_widget/widget/prefetch.py, which this mirrors: same dwell). Only where the mode's P is worth
// it, its source's range of tokens (`prefetchFrom`, `prefetchBelow` in the protocol's SOURCES): a head matrix's P
// at 512 tokens takes a few milliseconds, and a message in flight would hold a click's write back (the host keeps
// one update per model in flight), while a source of points' exact Gaussians take most of a click there.

import { realClock } from "../lib/schedule.js";

/** how long the pointer rests on a row before it is reported (prefetch.DWELL_MS) */
export const DWELL_MS = 120;

/**
 * Whether the page reports the row the pointer rests on, in a mode of this source, for a text of `n` tokens:
 * n in [prefetchFrom, prefetchBelow) (from null: never; below null: no bound).
 * @param {{prefetchFrom: number | null, prefetchBelow: number | null}} source
 * @param {number} n
 */
export function prefetches({ prefetchFrom, prefetchBelow }, n) {
  return prefetchFrom !== null && n >= prefetchFrom && (prefetchBelow === null || n < prefetchBelow);
}

/**
 * Calls `report([layer, head])` once the pointer has rested `ms` on the same row, unless `wanted(layer,
 * head)` says no (a text outside the mode's range, the selected head) or that row was the last one reported
 * under the same `scope()` (what else P depends on: after a mode change the same row is a new P).
 * @param {{report: (value: [number, number]) => void, wanted: (layer: number, head: number) => boolean,
 *   scope?: () => string, clock?: import("../lib/schedule.js").Clock, ms?: number}} options
 */
export function createDwell({ report, wanted, scope = () => "", clock = realClock, ms = DWELL_MS }) {
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
      const key = layer == null ? "" : `${scope()}|${layer}:${head}`;
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
