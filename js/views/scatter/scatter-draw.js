// The map's redraw loop (js/views/scatter/scatter.js): at most one paint per animation frame, and one in every frame
// while the points move (a waiting frame, a tween, the domains easing); what a paint leaves for the
// page: the drawn label boxes as data-label-boxes / data-label-tokens (throttled), the count of points
// outside the plot (data-outside: 0 unless the user zoomed in), what it drew (data-points, data-rings: the
// points drawn hollow, data-hover-row, data-hover-edges) and the paint counters of js/lib/metrics.js.

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
}

/**
 * @param {{clock: import("../../lib/schedule.js").Clock, backend: import("../../paint/scatter-canvas.js").ScatterBackend,
 *   points: import("./scatter-points.js").ScatterPoints, scene: () => Scene | null,
 *   step: (frameTime: number) => boolean, onFrame: (count: number, run: any, ms: number) => void}} parts
 *   `step(frameTime)` moves the points on (true: not settled yet); `onFrame` is told of each paint that
 *   shows a newly received frame
 */
export function createRedraw({ clock, backend, points, scene, step, onFrame }) {
  const { canvas } = backend;
  const boxes = boxPublisher(canvas, clock);
  /** @type {any} */
  let frameId = null;
  let framesDrawn = 0; // paints that showed a frame not shown before (tweens and repaints not counted)
  /** @type {LabelBox[]} */
  let lastBoxes = [];

  function paint() {
    const s = scene();
    if (!s) return;
    const t0 = clock.now();
    const drawn = backend.draw(s);
    if (!s.points) {
      boxes.write([]);
      return;
    }
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
