// The grid's canvas and what it holds (js/views/grid/grid.js is its controller): the maximum-attention values and
// their layout, the heat image (painted once per data, theme and zoom, js/paint/grid-paint.js) scaled up with
// nearest-neighbour sampling, and the grid's own interaction state (zoom range, keyboard cursor, hovered
// cell); `draw` repaints the cheap overlay from the state. Rows follow `head_order` (js/views/grid/grid-order.js): the
// canvas draws rows, everything else (the hit cell, the cursor, the selection) is in the model's heads.

import { max } from "d3-array";
import { columnsNote, gridGeometry, layerTop } from "../../paint/grid-geometry.js";
import { setText } from "../../lib/schedule.js";
import { drawGrid, paintHeat, paintHeatLegend } from "../../paint/grid-paint.js";
import { gridHit } from "../scatter/hittest.js";
import { headOf } from "../../store/state.js";
import { mapRow, rowOrder, rowsInOrder } from "./grid-order.js";

/**
 * @typedef {import("../../store/state.js").State} State
 * @typedef {import("../../paint/grid-paint.js").Geometry} Geometry
 */

export class GridCanvas {
  /**
   * @param {{gridScroll: HTMLElement, gridBins: HTMLElement, legend: HTMLCanvasElement, legendMax: HTMLElement}} dom
   * @param {() => State} state
   */
  constructor(dom, state) {
    this.dom = dom;
    this.state = state;
    const canvas = document.createElement("canvas");
    canvas.dataset.testid = "headsne-grid";
    canvas.tabIndex = 0;
    canvas.setAttribute("role", "grid");
    canvas.setAttribute(
      "aria-label",
      "layer-wise maximum attention: rows are heads, columns are tokens; arrows move, Enter selects",
    );
    dom.gridScroll.appendChild(canvas);
    this.canvas = canvas;
    this.ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    this.image = document.createElement("canvas");
    /** @type {Float32Array | null} (L, H, n) */
    this.values = null;
    /** @type {Float32Array | null} (L, H, n) with each layer's rows in the shown order */
    this.shown = null;
    /** @type {{data: ArrayLike<number>, shape: number[]} | null} the decoded `head_order` */
    this.headOrder = null;
    this.order = rowOrder(null, 0, 0);
    this.L = 0;
    this.H = 0;
    this.n = 0;
    this.vmax = 1;
    /** @type {Geometry | null} */
    this.geom = null;
    /** @type {[number, number]} token range [t0, t1); [0, 0] = everything */
    this.view = [0, 0];
    /** @type {{layer: number, head: number} | null} the keyboard cursor */
    this.cursor = null;
    /** @type {{layer: number, head: number, token: number} | null} */
    this.hoverCell = null;
    this.painted = ""; // what the heat image holds
  }

  paintImage() {
    const { theme } = this.state();
    if (!this.shown || !theme || !this.geom) return;
    const key = `${this.geom.t0}:${this.geom.t1}:${this.geom.columns}:${theme.dark}:${this.vmax}`;
    if (key === this.painted) return;
    this.painted = key;
    const lut = paintHeat(this.image, { values: this.shown, n: this.n, vmax: this.vmax, geom: this.geom, theme });
    paintHeatLegend(this.dom.legend, this.dom.legendMax, lut, this.vmax);
  }

  draw() {
    const s = this.state();
    const { geom, canvas } = this;
    if (!geom || !s.theme) return;
    const sel = headOf(s);
    const { order } = this;
    const cursor = this.cursor && document.activeElement === canvas ? this.cursor : null;
    const scene = {
      geom,
      theme: s.theme,
      image: this.image,
      header: s.doc.word ? (/** @type {number} */ t) => `${t + 1}` : (/** @type {number} */ t) => s.doc.tokens[t] ?? "",
      selected: sel.hidden ? sel : mapRow(order, sel, "toRow"),
      headAt: order.headAt,
      hidden: sel.hidden,
      kvGroups: order.sorted ? 0 : Number(s.kv_groups ?? 0) || 0, // sorted rows: a group is no band of rows
      hoverToken: s.hover,
      hoverCell: this.hoverCell && mapRow(order, this.hoverCell, "toRow"),
      cursor: cursor && (sel.hidden ? cursor : mapRow(order, cursor, "toRow")),
      marked: { selected: s.selected, matches: s.search.matches },
    };
    drawGrid(this.ctx, scene, canvas.width / geom.width);
    canvas.dataset.markedSelected = String(s.selected.size);
    canvas.dataset.markedMatches = String(s.search.matches.size);
  }

  /** Lay the grid out in the scroll box's width (and publish the layout on the canvas's dataset). */
  resize() {
    const { L, H, n, canvas } = this;
    if (!L || !H || !n) return;
    const width = Math.max(200, this.dom.gridScroll.clientWidth);
    const [t0, t1] = this.view[1] > this.view[0] ? this.view : [0, n];
    const geom = gridGeometry(L, H, n, width, { t0, t1, height: this.dom.gridScroll.clientHeight });
    this.geom = geom;
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${geom.width}px`;
    canvas.style.height = `${geom.height}px`;
    canvas.width = Math.round(geom.width * dpr);
    canvas.height = Math.round(geom.height * dpr);
    const layout = { layers: L, heads: H, tokens: n, labelW: geom.labelW, cellW: geom.cellW, cellH: geom.cellH };
    const range = { gap: geom.gap, tokenStart: geom.t0, tokenEnd: geom.t1 };
    for (const [key, value] of Object.entries({ ...layout, ...range })) canvas.dataset[key] = String(value);
    canvas.dataset.overview = geom.binned ? `max over bins of ${(geom.count / geom.columns).toFixed(1)} tokens` : "";
    canvas.dataset.labelEvery = String(geom.labelEvery);
    setText(this.dom.gridBins, columnsNote(geom));
    this.paintImage();
    this.draw();
  }

  /** The rows' order: the decoded `head_order`, or null (the model's). @param {State["headOrder"]} headOrder */
  setOrder(headOrder) {
    this.headOrder = headOrder;
    this.order = rowOrder(headOrder, this.L, this.H);
    this.shown = this.values && rowsInOrder(this.values, this.order, this);
    this.canvas.dataset.order = JSON.stringify(this.order.layers);
    this.painted = "";
    this.paintImage();
    this.draw();
  }

  /** New maximum-attention values (or none). @param {import("../../store/state.js").Grid | null} grid */
  setData(grid) {
    this.painted = "";
    if (!grid) {
      this.values = null;
      this.shown = null;
      this.L = this.H = this.n = 0;
      this.geom = null;
      this.canvas.width = this.canvas.height = 0;
      setText(this.dom.gridBins, "");
      return;
    }
    if (grid.shape[2] !== this.n) this.view = [0, 0];
    [this.L, this.H, this.n] = grid.shape;
    this.values = grid.data;
    this.order = rowOrder(this.headOrder, this.L, this.H);
    this.shown = rowsInOrder(this.values, this.order, this);
    this.canvas.dataset.order = JSON.stringify(this.order.layers);
    this.canvas.dataset.norm = grid.norm;
    this.vmax = Math.max(max(this.values) || 0, 1e-6);
    this.resize();
  }

  /** Whether the token axis is zoomed in. */
  get zoomed() {
    return this.view[1] > this.view[0];
  }

  /** Show every token again. */
  resetZoom() {
    this.view = [0, 0];
    this.resize();
  }

  /** Scroll so that layer `layer`'s map is in view (only when it is not). @param {number} layer */
  reveal(layer) {
    const { geom } = this;
    const scroll = this.dom.gridScroll;
    if (!geom) return;
    const top = layerTop(geom, layer) - geom.gap;
    const bottom = top + geom.gap + geom.blockH;
    if (top < scroll.scrollTop || bottom > scroll.scrollTop + scroll.clientHeight) {
      scroll.scrollTop = Math.max(0, top - 4);
    }
  }

  /** The cell under the pointer (its head in the model's order), or null. @param {MouseEvent} event */
  cellAt(event) {
    if (!this.geom) return null;
    const rect = this.canvas.getBoundingClientRect();
    const hit = gridHit(this.geom, event.clientX - rect.left, event.clientY - rect.top);
    return hit && mapRow(this.order, hit, "toHead");
  }
}
