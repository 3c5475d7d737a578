// When to run things: once per batch of trait changes, and at most so often; and DOM writes that cost
// nothing when nothing changed (an equal write still invalidates style, and a text write lays out again).

/**
 * `fn` wrapped to run once, a microtask later, however often it is called meanwhile.
 * @param {() => void} fn
 */
export function coalesce(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      fn();
    });
  };
}

/**
 * Time for everything that schedules: the time in ms, timers and animation frames. The page uses
 * `realClock`; tests pass `fakeClock()` (js/test-helpers/testing.js), whose time moves only when told.
 * @typedef {object} Clock
 * @property {() => number} now
 * @property {(fn: () => void, ms: number) => any} later
 * @property {(id: any) => void} cancel
 * @property {(fn: (now: number) => void) => any} frame the next animation frame
 * @property {(id: any) => void} cancelFrame
 */

/** @type {Clock} */
export const realClock = {
  now: () => performance.now(),
  later: (fn, ms) => setTimeout(fn, ms),
  cancel: (id) => clearTimeout(id),
  frame: (fn) => requestAnimationFrame(fn),
  cancelFrame: (id) => cancelAnimationFrame(id),
};

/**
 * `fn` run at most once every `ms` milliseconds: a request after a quiet window runs it at once, a request
 * inside the window runs it once at the window's end (so the last state always goes out, at most `ms`
 * late). With `leading: false` every request waits for a window's end, even after a quiet time (so that
 * a later write can take it along: see `hovered` in js/store/intents.js). `flush()` runs it now (a pending run is
 * dropped: it would show the same state). Returns {request(), flush(), cancel(), pending}.
 * @param {() => void} fn
 * @param {number} ms
 * @param {Clock} [clock]
 * @param {{leading?: boolean}} [options]
 */
export function throttle(fn, ms, clock = realClock, { leading = true } = {}) {
  /** @type {any} */
  let timer = null;
  let last = -Infinity;
  const run = () => {
    timer = null;
    last = clock.now();
    fn();
  };
  const cancel = () => {
    if (timer !== null) clock.cancel(timer);
    timer = null;
  };
  return {
    request() {
      if (timer !== null) return;
      const wait = leading ? ms - (clock.now() - last) : ms;
      if (wait <= 0) run();
      else timer = clock.later(run, wait);
    },
    flush() {
      cancel();
      run();
    },
    cancel,
    /** a run is waiting for the window's end */
    get pending() {
      return timer !== null;
    },
  };
}

/**
 * Set `node`'s text only when it differs.
 * @param {Node} node
 * @param {string} text
 */
export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/**
 * Set a data-* attribute (dataset `key`) only when it differs.
 * @param {HTMLElement} node
 * @param {string} key
 * @param {string} value
 */
export function setData(node, key, value) {
  if (node.dataset[key] !== value) node.dataset[key] = value;
}

const TWEEN_MIN_GAP_MS = 50; // frames closer than this (more than 20 a second) are drawn as they come
const TWEEN_MAX_MS = 140;
// A tween repaints the scatter in every display frame until the next frame is due. Worth it while a paint
// is cheap; at 8192 points a paint takes 5-10 ms of main thread (and chromium's commit after it more), and
// the 4-8 in-between paints per received frame took the CPU the kernel needed to compute the next frames
// (2 shared cores, a 200-iteration run: 10.0 frames drawn a second with them, 12.3 without).
const TWEEN_MAX_PAINT_MS = 4;

/**
 * How long (ms) the scatter tweens to a frame that arrived `gapMs` after the last one, when its paints
 * take `paintMs` each: 0 (shown as it is) for frames closer than TWEEN_MIN_GAP_MS, which would get only
 * paints of in-between positions and never one of their own, and when a paint costs over
 * TWEEN_MAX_PAINT_MS; else the gap, at most TWEEN_MAX_MS.
 * @param {number} gapMs
 * @param {number} paintMs
 */
export function tweenMs(gapMs, paintMs) {
  if (!(gapMs >= TWEEN_MIN_GAP_MS) || paintMs > TWEEN_MAX_PAINT_MS) return 0;
  return Math.min(TWEEN_MAX_MS, gapMs);
}
