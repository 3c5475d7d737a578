// The layer-wise maximum-attention grid view: one h x n heat map per layer on a single canvas. The heat
// image is painted once per data, theme and zoom (js/grid-paint.js) and scaled up with nearest-neighbour
// sampling, so hovering and selecting only redraw a cheap overlay. Every head is labelled; a click on a
// cell or a head label selects the head (the layer in hidden-state mode); arrows move a cursor and Enter
// selects when the grid has focus; ctrl/alt + wheel zooms the token axis (double-click or Escape resets),
// with token labels once columns are wide enough. The grid's own interaction state (zoom range, cursor,
// hovered cell) stays here; everything shared comes from the state.

import { max } from "d3-array";
import { gridGeometry, kvGroup, layerTop, moveCursor, zoomRange } from "./grid-geometry.js";
import { drawGrid, paintHeat, paintHeatLegend } from "./grid-paint.js";
import { gridHit } from "./hittest.js";
import { disposer } from "./dom.js";
import { changed } from "./store.js";
import { headOf } from "./state.js";

/**
 * @typedef {import("./state.js").State} State
 * @typedef {import("./grid-paint.js").Geometry} Geometry
 */

/**
 * @param {{dom: {gridScroll: HTMLElement, legend: HTMLCanvasElement, legendMax: HTMLElement},
 *   store: import("./store.js").Store<State>, intents: import("./intents.js").Intents}} ctx
 */
export function createGrid({ dom, store, intents }) {
  const { gridScroll: scroll } = dom;
  const canvas = document.createElement("canvas");
  canvas.dataset.testid = "headsne-grid";
  canvas.tabIndex = 0;
  canvas.setAttribute("role", "grid");
  canvas.setAttribute(
    "aria-label",
    "layer-wise maximum attention: rows are heads, columns are tokens; arrows move, Enter selects",
  );
  scroll.appendChild(canvas);
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
  const image = document.createElement("canvas");
  const scope = disposer();
  const g = {
    /** @type {Float32Array | null} (L, H, n) */
    values: null,
    L: 0,
    H: 0,
    n: 0,
    vmax: 1,
    /** @type {Geometry | null} */
    geom: null,
    /** @type {[number, number]} token range [t0, t1); [0, 0] = everything */
    view: [0, 0],
    /** @type {{layer: number, head: number} | null} the keyboard cursor */
    cursor: null,
    /** @type {{layer: number, head: number, token: number} | null} */
    hoverCell: null,
    painted: "", // what the heat image holds
  };

  function paintImage() {
    const { theme } = store.state;
    if (!g.values || !theme || !g.geom) return;
    const key = `${g.geom.t0}:${g.geom.t1}:${g.geom.columns}:${theme.dark}:${g.vmax}`;
    if (key === g.painted) return;
    g.painted = key;
    const lut = paintHeat(image, { values: g.values, n: g.n, vmax: g.vmax, geom: g.geom, theme });
    paintHeatLegend(dom.legend, dom.legendMax, lut, g.vmax);
  }

  function draw() {
    const s = store.state;
    const sel = headOf(s);
    if (!g.geom || !s.theme) return;
    drawGrid(
      ctx,
      {
        geom: g.geom,
        theme: s.theme,
        image,
        tokens: s.doc.tokens,
        selected: sel,
        hidden: sel.hidden,
        kvGroups: Number(s.kv_groups ?? 0) || 0,
        hoverToken: s.hover,
        hoverCell: g.hoverCell,
        cursor: g.cursor && document.activeElement === canvas ? g.cursor : null,
        marked: { selected: s.selected, matches: s.search.matches },
      },
      canvas.width / g.geom.width,
    );
    canvas.dataset.markedSelected = String(s.selected.size);
    canvas.dataset.markedMatches = String(s.search.matches.size);
  }

  function resize() {
    if (!g.L || !g.H || !g.n) return;
    const width = Math.max(200, scroll.clientWidth);
    const [t0, t1] = g.view[1] > g.view[0] ? g.view : [0, g.n];
    const geom = gridGeometry(g.L, g.H, g.n, width, { t0, t1 });
    g.geom = geom;
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${geom.width}px`;
    canvas.style.height = `${geom.height}px`;
    canvas.width = Math.round(geom.width * dpr);
    canvas.height = Math.round(geom.height * dpr);
    Object.assign(canvas.dataset, {
      layers: g.L,
      heads: g.H,
      tokens: g.n,
      labelW: geom.labelW,
      cellW: geom.cellW,
      cellH: geom.cellH,
      gap: geom.gap,
      tokenStart: geom.t0,
      tokenEnd: geom.t1,
      overview: geom.binned ? `max over bins of ${(geom.count / geom.columns).toFixed(1)} tokens` : "",
    });
    paintImage();
    draw();
  }

  /** @param {import("./state.js").Grid | null} grid */
  function setData(grid) {
    g.painted = "";
    if (!grid) {
      g.values = null;
      g.L = g.H = g.n = 0;
      g.geom = null;
      canvas.width = canvas.height = 0;
      return;
    }
    if (grid.shape[2] !== g.n) g.view = [0, 0];
    [g.L, g.H, g.n] = grid.shape;
    g.values = grid.data;
    g.vmax = Math.max(max(g.values) || 0, 1e-6);
    resize();
  }

  /** Scroll so that layer `layer`'s map is in view (only when it is not). @param {number} layer */
  function reveal(layer) {
    if (!g.geom) return;
    const top = layerTop(g.geom, layer) - g.geom.gap;
    const bottom = top + g.geom.gap + g.geom.blockH;
    if (top < scroll.scrollTop || bottom > scroll.scrollTop + scroll.clientHeight) {
      scroll.scrollTop = Math.max(0, top - 4);
    }
  }

  /** @param {MouseEvent} event */
  function cellAt(event) {
    if (!g.geom) return null;
    const rect = canvas.getBoundingClientRect();
    return gridHit(g.geom, event.clientX - rect.left, event.clientY - rect.top);
  }

  /** @param {number} layer @param {number} head */
  const select = (layer, head) => {
    const sel = headOf(store.state);
    intents.selectHead(layer, sel.hidden ? sel.head : head);
  };

  /** @param {MouseEvent} event */
  function onMove(event) {
    const hit = cellAt(event);
    g.hoverCell = hit;
    intents.restOnRow(hit ? hit.layer : null, hit ? hit.head : 0);
    if (hit && hit.token >= 0 && g.values) {
      const value = g.values[(hit.layer * g.H + hit.head) * g.n + hit.token];
      const cell = { ...hit, value, group: kvGroup(hit.head, g.H, Number(store.state.kv_groups ?? 0) || 0) };
      intents.hover(hit.token, { source: "grid", x: event.clientX, y: event.clientY, cell });
    } else {
      intents.hover(-1, null);
    }
    draw();
  }

  /** @param {KeyboardEvent} event */
  function onKey(event) {
    if (!g.geom) return;
    const sel = headOf(store.state);
    const c = g.cursor ?? { layer: sel.layer, head: sel.head };
    const moved = moveCursor(c, event.key, { L: g.L, H: g.H, hidden: sel.hidden });
    if (moved) {
      g.cursor = moved;
    } else if (event.key === "Enter" || event.key === " ") {
      select(c.layer, c.head);
      g.cursor = c;
    } else if (event.key === "Escape") {
      g.view = [0, 0];
      resize();
      g.cursor = c;
    } else {
      return;
    }
    event.preventDefault();
    reveal(g.cursor.layer);
    draw();
  }

  /** @param {WheelEvent} event */
  function onWheel(event) {
    if (!g.geom || !(event.ctrlKey || event.altKey || event.metaKey)) return;
    event.preventDefault();
    const hit = cellAt(event);
    const at = hit && hit.token >= 0 ? hit.token : (g.geom.t0 + g.geom.t1) / 2;
    g.view = zoomRange(g.geom.t0, g.geom.t1, g.n, event.deltaY < 0 ? 0.8 : 1.25, at);
    if (g.view[0] === 0 && g.view[1] === g.n) g.view = [0, 0];
    resize();
  }

  scope.listen(canvas, "mousemove", onMove);
  scope.listen(canvas, "mouseleave", () => {
    g.hoverCell = null;
    intents.restOnRow(null, 0);
    intents.hover(-1, null);
    draw();
  });
  scope.listen(canvas, "click", (/** @type {MouseEvent} */ event) => {
    const hit = cellAt(event);
    if (!hit) return;
    g.cursor = { layer: hit.layer, head: hit.head };
    select(hit.layer, hit.head);
  });
  scope.listen(canvas, "keydown", onKey);
  scope.listen(canvas, "wheel", onWheel, { passive: false });
  scope.listen(canvas, "dblclick", () => {
    g.view = [0, 0];
    resize();
  });
  scope.listen(canvas, "focus", draw);
  scope.listen(canvas, "blur", draw);

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    const is = (/** @type {keyof State} */ key) => changed(s, prev, key);
    if (is("grid")) setData(s.grid);
    if (is("theme")) {
      g.painted = "";
      paintImage();
    }
    if (is("layer") || is("head") || is("mode")) g.cursor = null;
    draw();
    if (prev === null || headOf(s).layer !== headOf(prev).layer) reveal(headOf(s).layer);
  }
  /** @type {(keyof State)[]} */
  const keys = ["grid", "theme", "doc", "layer", "head", "mode", "kv_groups", "selected", "search", "hover"];
  scope.add(store.watch(keys, update));

  const observer = new ResizeObserver(resize);
  observer.observe(scroll);
  scope.add(() => observer.disconnect());

  return {
    canvas,
    destroy: () => scope.dispose(),
  };
}
