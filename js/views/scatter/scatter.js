// The t-SNE scatter view: one point per kept token in its colour, labelled without overlap, animated
// between received frames (js/views/scatter/scatter-points.js), autoscaled to the data until the user zooms (d3-zoom),
// with linear or quantile-equidistant axes, the hovered token's partners, the selection and the search
// matches highlighted, and lasso (shift + drag) or box selection (js/views/scatter/lasso.js). It reads the state and
// draws through a backend (js/paint/scatter-canvas.js); the user's hovers and selections go to the intents.

import { select } from "d3-selection";
import { zoom as d3zoom, zoomIdentity } from "d3-zoom";
import { pointsInPolygon } from "./hittest.js";
import { createPointIndex } from "./point-index.js";
import { createLasso } from "./lasso.js";
import { MARGIN } from "../../paint/scatter-paint.js";
import { MAX_QUANTILE_K } from "../../lib/rescaling.js";
import { ScatterPoints } from "./scatter-points.js";
import { createCanvasBackend } from "../../paint/scatter-canvas.js";
import { createGlPoints } from "../../paint/point-gl.js";
import { disposer } from "../../lib/dom.js";
import { createRedraw } from "./scatter-draw.js";
import { changed } from "../../store/store.js";
import { sceneOf, snapshotOf } from "./scatter-scene.js";
import { createMapAids, withAids } from "./map-aids.js";
import { sourceOf } from "../../model/sources.js";

const MIN_W = 200; // CSS px
const MIN_H = 160; // widget.css's min-height of the map

/**
 * @typedef {import("../../store/state.js").State} State
 * @typedef {import("../../paint/scatter-canvas.js").Scene} Scene
 */

/**
 * d3-zoom on the canvas: wheel zooms, drag pans (not with shift, in box mode, or with ctrl but for the
 * wheel; double-click resets elsewhere). `onZoom(transform, byUser)`.
 * @param {HTMLCanvasElement} canvas
 * @param {{boxMode: () => boolean, onZoom: (transform: any, byUser: boolean) => void}} options
 */
function attachZoom(canvas, { boxMode, onZoom }) {
  const zoom = d3zoom()
    .scaleExtent([0.25, 200])
    .filter(
      (/** @type {any} */ event) =>
        (!event.ctrlKey || event.type === "wheel") &&
        !event.button &&
        event.type !== "dblclick" &&
        !(event.type === "mousedown" && (event.shiftKey || boxMode())),
    )
    .on("zoom", (/** @type {any} */ event) => onZoom(event.transform, Boolean(event.sourceEvent)));
  const selection = select(canvas).call(zoom);
  return {
    reset: () => selection.call(zoom.transform, zoomIdentity),
    destroy: () => selection.on(".zoom", null),
  };
}

/**
 * The points follow the state: a new frame is queued, a new token set or an empty frame clears them, the
 * axes follow the quantile traits. Returns whether the axes' kind switched (the zoom resets).
 * @param {ScatterPoints} points
 * @param {State} s
 * @param {State | null} prev
 * @param {{w: number, h: number}} plot
 */
function follow(points, s, prev, plot) {
  if (changed(s, prev, "rows") && s.rows.kept.length !== points.m) points.clear();
  if (changed(s, prev, "frame")) {
    if (s.frame) points.enqueue(s.frame);
    else if (prev) points.clear();
  }
  const k = Math.min(MAX_QUANTILE_K, Math.max(2, Math.floor(Number(s.quantile_k) || 100))); // never more knots than Python allows
  if (Boolean(s.quantile) === points.quantile && k === points.quantileK) return false;
  return points.setQuantile(Boolean(s.quantile), k, plot);
}

/**
 * The pointer on the map: the token under it is hovered (through the intents). In query-key mode a token has
 * two points, and the one under the pointer is the one ringed (js/views/scatter/scatter-scene.js): `row()`,
 * -1 when none.
 * @param {{canvas: HTMLCanvasElement, points: ScatterPoints, hits: ReturnType<typeof createPointIndex>,
 *   store: import("../../store/store.js").Store<State>, intents: import("../../store/intents.js").Intents,
 *   scope: ReturnType<typeof disposer>, lasso: {active: () => boolean}, request: () => void}} parts
 */
function attachPointer({ canvas, points, hits, store, intents, scope, lasso, request }) {
  let pointerRow = -1;
  /** @param {MouseEvent} event */
  function pointAt(event) {
    const rect = canvas.getBoundingClientRect();
    const r = hits.nearest(points, [event.clientX - rect.left, event.clientY - rect.top], 10);
    const moved = r !== pointerRow;
    pointerRow = r;
    if (moved && sourceOf(store.state.mode).pointRoles.length > 1) request(); // the token's other point: no hover change
    return r >= 0 ? store.state.rows.kept[r] : -1;
  }
  scope.listen(canvas, "mousemove", (/** @type {MouseEvent} */ event) => {
    if (lasso.active()) return;
    const token = pointAt(event);
    intents.hover(token, token >= 0 ? { source: "scatter", x: event.clientX, y: event.clientY } : null);
  });
  scope.listen(canvas, "mouseleave", () => {
    pointerRow = -1;
    intents.hover(-1, null);
  });
  scope.listen(canvas, "click", (/** @type {MouseEvent} */ event) => {
    if (event.shiftKey || store.state.boxMode || lasso.active()) return; // a lasso or a box, not a pin
    const token = pointAt(event);
    if (token >= 0) intents.pin(token);
  });
  return { row: () => pointerRow };
}

/**
 * @param {{dom: {scatterWrap: HTMLElement}, store: import("../../store/store.js").Store<State>,
 *   intents: import("../../store/intents.js").Intents, clock: import("../../lib/schedule.js").Clock,
 *   metrics: {drawn: (count: number, run: any, ms: number) => void},
 *   backend?: import("../../paint/scatter-canvas.js").ScatterBackend}} ctx
 */
export function createScatter({
  dom,
  store,
  intents,
  clock,
  metrics,
  backend = createCanvasBackend({ gl: createGlPoints(), now: clock.now }),
}) {
  const wrap = dom.scatterWrap;
  const canvas = backend.canvas;
  canvas.dataset.testid = "headsne-scatter";
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", "t-SNE map of the tokens");
  wrap.appendChild(canvas);
  const points = new ScatterPoints();
  const scope = disposer();
  const view = {
    width: 0,
    height: 0, // CSS px
    transform: zoomIdentity,
    userZoomed: false,
    /** @type {[number, number][] | null} */
    lasso: null,
  };

  const plotBox = () => ({
    x0: MARGIN.left,
    y0: MARGIN.top,
    x1: MARGIN.left + Math.max(10, view.width - MARGIN.left - MARGIN.right),
    y1: MARGIN.top + Math.max(10, view.height - MARGIN.top - MARGIN.bottom),
  });
  const plotSize = () => {
    const b = plotBox();
    return { w: b.x1 - b.x0, h: b.y1 - b.y0 };
  };

  const zoom = attachZoom(canvas, {
    boxMode: () => store.state.boxMode,
    onZoom: (transform, byUser) => {
      view.transform = transform;
      if (byUser) view.userZoomed = true;
      request();
    },
  });
  scope.add(zoom.destroy);

  const lasso = createLasso({
    canvas,
    boxMode: () => store.state.boxMode,
    onChange: (polygon) => {
      view.lasso = polygon;
      request();
    },
    onDone: (polygon, _box, event) => {
      const tokens = pointsInPolygon(points.sx, points.sy, points.m, polygon).map((r) => store.state.rows.kept[r]);
      intents.select(tokens, { add: event.altKey });
    },
  });
  scope.add(() => lasso.destroy());

  // the pointer's hit test looks at the points near it, not at every point (65536 of them at most)
  const hits = createPointIndex({ box: () => ({ x0: 0, y0: 0, x1: view.width, y1: view.height }) });
  /** What the map shows now (the screen positions move: the hit index is rebuilt when next asked). */
  const aids = createMapAids();
  const scene = () => {
    hits.invalidate();
    const s = sceneOf(store.state, points, { ...view, plot: plotBox(), pointerRow: pointer.row() });
    return withAids(s, store.state, aids); // the contours and the clusters' names (js/views/scatter/map-aids.js)
  };
  const redraw = createRedraw({
    clock,
    backend,
    points,
    scene,
    step: (frameTime) => points.step({ frameTime, now: clock.now(), plot: plotSize(), userZoomed: view.userZoomed }),
    onFrame: (count, run, ms) => metrics.drawn(count, run, ms),
    run: () => ({ running: store.state.state === "running", iteration: store.state.readout.iteration }),
  });
  const request = () => redraw.request();
  scope.add(() => redraw.destroy());

  // The map's size is the stylesheet's (js/widget.css: the box's width, a height that follows it within
  // bounds); the view draws at the size it gets, at least MIN_W x MIN_H (also without a layout, in node).
  function resize() {
    const w = Math.max(MIN_W, wrap.clientWidth);
    const h = Math.max(MIN_H, canvas.clientHeight);
    if (w === view.width && h === view.height) return;
    view.width = w;
    view.height = h;
    backend.resize(w, h);
    const box = plotBox();
    canvas.dataset.plot = JSON.stringify([box.x0, box.y0, box.x1, box.y1]);
    points.project(plotSize());
    if (!view.userZoomed) points.domains = points.target;
    request();
  }

  function resetView() {
    view.userZoomed = false;
    zoom.reset();
    request();
  }

  scope.listen(canvas, "dblclick", resetView);
  const pointer = attachPointer({ canvas, points, hits, store, intents, scope, lasso, request });
  scope.add(store.on("resetView", resetView));

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    if (follow(points, s, prev, plotSize())) resetView();
    if (changed(s, prev, "theme") || changed(s, prev, "doc")) backend.forgetLabels();
    if (changed(s, prev, "boxMode")) canvas.classList.toggle("hs-box-mode", s.boxMode);
    request();
  }
  /** @type {(keyof State)[]} */
  const keys = ["theme", "doc", "colours", "rows", "frame", "selected", "search", "hover", "edges", "boxMode"];
  keys.push("edge_k", "edge_direction", "mode", "quantile", "quantile_k", "label_density", "state");
  keys.push("contours", "cluster_labels", "cluster_names", "clusterOf", "pinned", "syntaxTree");
  scope.add(store.watch(keys, update));

  const observer = new ResizeObserver(resize);
  observer.observe(wrap);
  scope.add(() => observer.disconnect());
  resize();

  return {
    canvas,
    /** The current view drawn afresh on a new canvas at `scale` device px per CSS px (an export). */
    render(/** @type {number} */ scale) {
      const s = scene();
      let out = document.createElement("canvas");
      if (s) out = backend.render(s, scale);
      else Object.assign(out, { width: Math.round(view.width * scale), height: Math.round(view.height * scale) });
      request();
      return out;
    },
    get size() {
      return { width: view.width, height: view.height };
    },
    /** What is on screen, for the SVG export: points and label boxes in CSS px. */
    snapshot: () => snapshotOf(store.state, points, { ...view, lastBoxes: redraw.lastBoxes, scene: scene() }),
    destroy: () => scope.dispose(),
  };
}
