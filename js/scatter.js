// The t-SNE scatter view: one point per kept token in its colour, labelled without overlap, animated
// between received frames (js/scatter-points.js), autoscaled to the data until the user zooms (d3-zoom),
// with linear or quantile-equidistant axes, the hovered token's partners, the selection and the search
// matches highlighted, and lasso (shift + drag) or box selection (js/lasso.js). It reads the state and
// draws through a backend (js/scatter-canvas.js); the user's hovers and selections go to the intents.

import { scaleLinear } from "d3-scale";
import { select } from "d3-selection";
import { zoom as d3zoom, zoomIdentity } from "d3-zoom";
import { nearestPoint, pointsInPolygon } from "./hittest.js";
import { partnerTokens, shownPartners } from "./partners.js";
import { createLasso } from "./lasso.js";
import { MARGIN, RADIUS } from "./scatter-paint.js";
import { ScatterPoints } from "./scatter-points.js";
import { createCanvasBackend } from "./scatter-canvas.js";
import { disposer } from "./dom.js";
import { setData, throttle } from "./schedule.js";
import { changed } from "./store.js";
import { directionOf, partnersAt } from "./state.js";

const BOXES_EVERY_MS = 150; // data-label-boxes is refreshed at most this often (and after the last draw)
const NO_PARTNERS = { to: [], from: [], near: [], hidden: false };

/**
 * @typedef {import("./state.js").State} State
 * @typedef {import("./scatter-canvas.js").Scene} Scene
 * @typedef {import("./scatter-canvas.js").LabelBox} LabelBox
 */

/** The label density of the state, in [0, 1]. @param {State} s */
function densityOf(s) {
  const value = s.label_density == null ? 0.5 : Number(s.label_density);
  return Math.max(0, Math.min(1, Number.isFinite(value) ? value : 0.5));
}

/**
 * The label boxes drawn last as data-label-boxes and data-label-tokens, at most every BOXES_EVERY_MS
 * (the last draw always lands).
 * @param {HTMLCanvasElement} canvas
 * @param {import("./schedule.js").Clock} clock
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
 * @param {{dom: {scatterWrap: HTMLElement}, store: import("./store.js").Store<State>,
 *   intents: import("./intents.js").Intents, clock: import("./schedule.js").Clock,
 *   metrics: {drawn: (count: number, run: any, ms: number) => void},
 *   backend?: import("./scatter-canvas.js").ScatterBackend}} ctx
 */
export function createScatter({ dom, store, intents, clock, metrics, backend = createCanvasBackend() }) {
  const wrap = dom.scatterWrap;
  const canvas = backend.canvas;
  canvas.dataset.testid = "headsne-scatter";
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", "t-SNE map of the tokens");
  wrap.appendChild(canvas);
  const points = new ScatterPoints();
  const boxes = boxPublisher(canvas, clock);
  const scope = disposer();
  const view = {
    width: 0,
    height: 0, // CSS px
    transform: zoomIdentity,
    userZoomed: false,
    /** @type {[number, number][] | null} */
    lasso: null,
    /** @type {any} */
    frameId: null,
    framesDrawn: 0, // paints that showed a frame not shown before (tweens and repaints not counted)
    /** @type {LabelBox[]} */
    lastBoxes: [],
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

  const zoom = d3zoom()
    .scaleExtent([0.25, 200])
    .filter(
      (/** @type {any} */ event) =>
        (!event.ctrlKey || event.type === "wheel") &&
        !event.button &&
        event.type !== "dblclick" &&
        !(event.type === "mousedown" && (event.shiftKey || store.state.boxMode)),
    )
    .on("zoom", (/** @type {any} */ event) => {
      view.transform = event.transform;
      if (event.sourceEvent) view.userZoomed = true;
      request();
    });
  const selection = select(canvas).call(zoom);
  scope.add(() => selection.on(".zoom", null));

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

  function request() {
    if (view.frameId === null) view.frameId = clock.frame(tick);
  }
  scope.add(() => view.frameId !== null && clock.cancelFrame(view.frameId));

  /** @param {number} frameTime */
  function tick(frameTime) {
    view.frameId = null;
    const busy = points.step({ frameTime, now: clock.now(), plot: plotSize(), userZoomed: view.userZoomed });
    paint();
    if (busy) request();
  }

  /** What the map shows now, or null before there is a theme and a size. @returns {Scene | null} */
  function scene() {
    const s = store.state;
    if (!s.theme || !view.width) return null;
    const plot = plotBox();
    const { kept, tokenRow } = s.rows;
    const colours = s.colours ? s.colours.colours : [];
    const base = {
      theme: s.theme,
      width: view.width,
      height: view.height,
      plot,
      x: null,
      y: null,
      knots: null,
      points: null,
      message: s.doc.tokens.length ? "waiting for the first t-SNE frame…" : "no text yet",
      pinned: points.pinned,
      hover: s.hover,
      hoverRow: -1,
      shown: NO_PARTNERS,
      partners: [],
      selected: s.selected,
      matches: s.search.matches,
      density: densityOf(s),
      subword: s.doc.subword,
      tokens: s.doc.tokens,
      lasso: view.lasso,
    };
    if (!points.domains || points.m === 0) return base;
    const x = view.transform.rescaleX(scaleLinear(points.domains.x, [plot.x0, plot.x1]));
    const y = view.transform.rescaleY(scaleLinear(points.domains.y, [plot.y1, plot.y0]));
    points.toScreen(x, y, plot, points.pinOutliers && !view.userZoomed);
    const hoverRow = s.hover >= 0 && s.hover < tokenRow.length ? tokenRow[s.hover] : -1;
    const shown = shownPartners(hoverRow >= 0 ? partnersAt(s, s.hover) : NO_PARTNERS, directionOf(s));
    const partners = partnerTokens(shown).filter((t) => tokenRow[t] >= 0);
    const { sx, sy, m } = points;
    const pts = { sx, sy, m, kept, tokenRow, colours, special: s.doc.special };
    return { ...base, x, y, knots: points.quantile ? points.knots : null, points: pts, hoverRow, shown, partners };
  }

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
    view.lastBoxes = drawn;
    setData(canvas, "pinned", String(points.pinned.length));
    boxes.write(drawn);
    points.hasDrawnPoints = true;
    if (!points.freshFrame) return;
    // a frame counts once, at the first paint that shows it: frames that arrive between two paints are
    // drawn as one, and the tween's in-between paints and hover or zoom repaints are not counted
    points.freshFrame = false;
    view.framesDrawn++;
    metrics.drawn(view.framesDrawn, points.shownTag, ms);
  }

  function resize() {
    const w = Math.max(200, wrap.clientWidth);
    const h = Math.round(Math.min(620, Math.max(300, w * 0.78)));
    if (w === view.width && h === view.height) return;
    view.width = w;
    view.height = h;
    backend.resize(w, h);
    points.project(plotSize());
    if (!view.userZoomed) points.domains = points.target;
    request();
  }

  function resetView() {
    view.userZoomed = false;
    selection.call(zoom.transform, zoomIdentity);
    request();
  }

  /** @param {MouseEvent} event */
  function pointAt(event) {
    const rect = canvas.getBoundingClientRect();
    const r = nearestPoint(points.sx, points.sy, points.m, event.clientX - rect.left, event.clientY - rect.top, 10);
    return r >= 0 ? store.state.rows.kept[r] : -1;
  }
  scope.listen(canvas, "dblclick", resetView);
  scope.listen(canvas, "mousemove", (/** @type {MouseEvent} */ event) => {
    if (lasso.active()) return;
    const token = pointAt(event);
    intents.hover(token, token >= 0 ? { source: "scatter", x: event.clientX, y: event.clientY } : null);
  });
  scope.listen(canvas, "mouseleave", () => intents.hover(-1, null));
  scope.add(store.on("resetView", resetView));

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    const is = (/** @type {keyof State} */ key) => changed(s, prev, key);
    if (is("theme") || is("doc")) backend.forgetLabels();
    if (is("rows") && s.rows.kept.length !== points.m) points.clear();
    if (is("frame")) {
      if (s.frame) points.enqueue(s.frame);
      else if (prev) points.clear();
    }
    if (is("quantile") || is("quantile_k")) {
      const k = Math.max(2, Math.floor(s.quantile_k ?? 100));
      if (Boolean(s.quantile) !== points.quantile || k !== points.quantileK) {
        if (points.setQuantile(Boolean(s.quantile), k, plotSize())) resetView();
      }
    }
    if (is("boxMode")) canvas.classList.toggle("hs-box-mode", s.boxMode);
    request();
  }
  /** @type {(keyof State)[]} */
  const keys = ["theme", "doc", "colours", "rows", "frame", "selected", "search", "hover", "edges", "boxMode"];
  keys.push("edge_k", "edge_direction", "mode", "quantile", "quantile_k", "label_density");
  scope.add(store.watch(keys, update));

  const observer = new ResizeObserver(resize);
  observer.observe(wrap);
  scope.add(() => observer.disconnect());
  scope.add(() => boxes.cancel());
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
    snapshot() {
      const { doc, rows, colours } = store.state;
      const list = colours ? colours.colours : [];
      const pts = [];
      for (let r = 0; r < points.m; r++) {
        const t = rows.kept[r];
        pts.push({
          x: points.sx[r],
          y: points.sy[r],
          colour: list[t] || "#888",
          special: Boolean(doc.special[t]),
          token: t,
        });
      }
      const labels = view.lastBoxes.map((b) => ({ ...b, text: doc.tokens[b.key] ?? "" }));
      return { width: view.width, height: view.height, margin: MARGIN, radius: RADIUS, points: pts, labels };
    },
    destroy: () => scope.dispose(),
  };
}
