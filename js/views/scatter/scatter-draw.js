// The map's redraw loop (js/views/scatter/scatter.js): at most one paint per animation frame, and one in every frame
// while the points move (a waiting frame, a tween, the domains easing). While a run goes, a frame whose points sit
// in one dot on screen (under the early exaggeration most of a map's points gather within a pixel while a few stay
// far out: pointSpread below MIN_SPREAD) is not drawn: the map says so instead, and shows its frames once they spread
// (issue 52); a run's last frame, paused or done, is always drawn. What a paint leaves for the
// page: the drawn label boxes as data-label-boxes / data-label-tokens (throttled), the count of points
// outside the plot (data-outside: 0 unless the user zoomed in), what it drew (data-points, data-rings: the
// points drawn hollow, data-hover-row, data-hover-edges, data-contours: the density levels drawn, data-clusters: the
// clusters' labels placed), how spread the points are on screen (data-spread:
// pointSpread) and the paint counters of js/lib/metrics.js.

import { setData, throttle } from "../../lib/schedule.js";
import { edgeEnds, isRing } from "../../paint/scatter-paint.js";

const BOXES_EVERY_MS = 150; // data-label-boxes is refreshed at most this often (and after the last draw)

/**
 * @typedef {import("../../paint/scatter-canvas.js").LabelBox} LabelBox
 * @typedef {import("../../paint/scatter-canvas.js").Scene} Scene
 */

/**
 * The label boxes drawn last as data-label-boxes and data-label-tokens, at most every BOXES_EVERY_MS
 * (the last draw always lands).
 * @param {HTMLCanvasElement} canvas
 * @param {import("../../lib/schedule.js").Clock} clock
 */
function boxPublisher(canvas, clock) {
  /** @type {LabelBox[]} */
  let boxes = [];
  const r = (/** @type {number} */ v) => Math.round(v * 10) / 10;
  const writer = throttle(
    () => {
      canvas.dataset.labelBoxes = JSON.stringify(boxes.map((b) => [r(b.x), r(b.y), r(b.w), r(b.h)]));
      canvas.dataset.labelTokens = JSON.stringify(boxes.map((b) => b.key));
    },
    BOXES_EVERY_MS,
    clock,
  );
  return {
    /** @param {LabelBox[]} next */
    write(next) {
      boxes = next;
      writer.request();
    },
    cancel: () => writer.cancel(),
  };
}

const SPREAD_SAMPLE = 512; // points the spread is measured on at most (every k-th)
/** the least spread (pointSpread) of a frame drawn while its run goes: 2 % of the plot, 8 px of a 400 px plot */
export const MIN_SPREAD = 0.02;
const NOT_RUNNING = { running: false, iteration: 0 };

/**
 * How spread the points are on screen: the median distance of a point from the points' median, over the plot's
 * smaller side (0: every point in one dot; a map that fills the plot about 0.2-0.3). Measured on at most
 * SPREAD_SAMPLE points, evenly strided.
 * @param {{sx: ArrayLike<number>, sy: ArrayLike<number>, m: number}} points
 * @param {{x0: number, y0: number, x1: number, y1: number}} plot
 */
export function pointSpread({ sx, sy, m }, plot) {
  if (m < 2) return 0;
  const step = Math.max(1, Math.floor(m / SPREAD_SAMPLE));
  /** @type {number[]} */
  const xs = [];
  /** @type {number[]} */
  const ys = [];
  for (let r = 0; r < m; r += step) {
    xs.push(sx[r]);
    ys.push(sy[r]);
  }
  const median = (/** @type {number[]} */ a) => a.sort((p, q) => p - q)[a.length >> 1];
  const [mx, my] = [median(xs.slice()), median(ys.slice())];
  const d = xs.map((x, i) => Math.hypot(x - mx, ys[i] - my));
  return median(d) / Math.max(1, Math.min(plot.x1 - plot.x0, plot.y1 - plot.y0));
}

/**
 * What the paint drew, on the canvas: its points, how many were rings (keys in query-key mode, special tokens
 * otherwise), the hovered point's row and its edges.
 * @param {HTMLCanvasElement} canvas
 * @param {Scene} s
 */
function publishDrawn(canvas, s) {
  if (!s.points) return;
  let rings = 0;
  for (let r = 0; r < s.points.m; r++) if (isRing(s.points, r)) rings++;
  const ends = edgeEnds(s);
  setData(canvas, "points", String(s.points.m));
  setData(canvas, "rings", String(rings));
  setData(canvas, "hoverRow", String(s.hoverRow));
  setData(canvas, "hoverEdges", String(ends.to.length + ends.from.length + ends.near.length));
  const syntax = s.syntax ? s.syntax.tokens : { head: -1, dependents: [] };
  setData(canvas, "syntaxArcs", JSON.stringify(s.hoverRow >= 0 ? syntax : { head: -1, dependents: [] }));
  setData(canvas, "contours", String(s.contours ? s.contours.length : 0));
  setData(canvas, "clusters", JSON.stringify((s.clusters ?? []).map((p) => p.label)));
}

/**
 * The scene to paint: `s`, or, while the run goes and its points sit in one dot, the map's message instead.
 * @param {Scene} s
 * @param {{running: boolean, iteration: number}} run
 * @returns {[Scene, number]} the scene and the points' spread (-1: no points)
 */
export function gatheredOrNot(s, { running, iteration }) {
  if (!s.points) return [s, -1];
  const spread = pointSpread(s.points, s.plot);
  if (!running || spread >= MIN_SPREAD) return [s, spread];
  const message = `iteration ${iteration}: the points gather under the early exaggeration; the map shows once they spread`;
  return [{ ...s, points: null, message }, spread];
}

/**
 * @param {{clock: import("../../lib/schedule.js").Clock, backend: import("../../paint/scatter-canvas.js").ScatterBackend,
 *   points: import("./scatter-points.js").ScatterPoints, scene: () => Scene | null,
 *   step: (frameTime: number) => boolean, onFrame: (count: number, run: any, ms: number) => void,
 *   run?: () => {running: boolean, iteration: number}}} parts
 *   `step(frameTime)` moves the points on (true: not settled yet); `onFrame` is told of each paint that
 *   shows a newly received frame; `run()`: whether a run goes, and the iteration shown
 */
export function createRedraw({ clock, backend, points, scene, step, onFrame, run = () => NOT_RUNNING }) {
  const { canvas } = backend;
  const boxes = boxPublisher(canvas, clock);
  /** @type {any} */
  let frameId = null;
  let framesDrawn = 0; // paints that showed a frame not shown before (tweens and repaints not counted)
  /** @type {LabelBox[]} */
  let lastBoxes = [];

  function paint() {
    const full = scene();
    if (!full) return;
    const [s, spread] = gatheredOrNot(full, run());
    setData(canvas, "gathering", String(s !== full));
    const t0 = clock.now();
    const drawn = backend.draw(s);
    if (!s.points) {
      if (s !== full) setData(canvas, "outside", "0"); // gathered into a dot: none drawn, none outside
      boxes.write([]);
      return;
    }
    setData(canvas, "spread", spread.toFixed(4));
    const ms = clock.now() - t0;
    points.paintMs += (ms - points.paintMs) / 4;
    lastBoxes = drawn;
    setData(canvas, "outside", String(points.outside));
    publishDrawn(canvas, s);
    boxes.write(drawn);
    points.hasDrawnPoints = true;
    if (!points.freshFrame) return;
    // a frame counts once, at the first paint that shows it: frames that arrive between two paints are
    // drawn as one, and the tween's in-between paints and hover or zoom repaints are not counted
    points.freshFrame = false;
    framesDrawn++;
    onFrame(framesDrawn, points.shownTag, ms);
  }

  /** @param {number} frameTime */
  function tick(frameTime) {
    frameId = null;
    const busy = step(frameTime);
    paint();
    if (busy) request();
  }

  function request() {
    if (frameId === null) frameId = clock.frame(tick);
  }

  return {
    /** Paint in the next animation frame. */
    request,
    /** The labels of the last paint with points. */
    get lastBoxes() {
      return lastBoxes;
    },
    destroy() {
      if (frameId !== null) clock.cancelFrame(frameId);
      frameId = null;
      boxes.cancel();
    },
  };
}
