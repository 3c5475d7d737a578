// Canvas painting of the maximum-attention grid (js/views/grid/grid.js): the heat image (one pixel per column,
// painted once per data, theme and zoom), its legend ramp, and the overlay drawn at every hover: labels (every
// head's row, in the row's font), group separators, marks of the selection and the search matches, the hovered
// column and cell, the selected head (or layer: marked inside its own rows and in the margins, never over its
// neighbours) and the keyboard cursor.

import { scaleSequentialSqrt } from "d3-scale";
import { color as parseColor } from "d3-color";
import { binColumns, kvGroup, layerTop } from "./grid-geometry.js";

const TOKEN_LABEL_W = 12; // columns at least this wide get token labels

/**
 * @typedef {ReturnType<typeof import("./grid-geometry.js").gridGeometry>} Geometry
 * @typedef {import("../lib/theme.js").Theme} Theme
 * @typedef {{layer: number, head: number}} Head
 * @typedef {object} GridScene what the grid shows
 * @property {Geometry} geom
 * @property {Theme} theme
 * @property {HTMLCanvasElement} image the heat image (js/paint/grid-paint.js paintHeat)
 * @property {(t: number) => string} header the column header of token t (its text; in word mode the occurrence's
 *   number)
 * @property {Head} selected its head as the row that shows it (js/views/grid/grid-order.js)
 * @property {(layer: number, row: number) => number} headAt the head row `row` of a layer shows
 * @property {boolean} hidden hidden-state mode: layers are selected
 * @property {number} kvGroups
 * @property {number} hoverToken
 * @property {{layer: number, head: number, token: number} | null} hoverCell
 * @property {Head | null} cursor the keyboard cursor (as a row), when the grid has the focus
 * @property {{selected: Set<number>, matches: Set<number>}} marked
 */

/**
 * 256-entry RGB lookup table of a sequential colour scale.
 * @param {(t: number) => string} interpolator
 */
export function colourTable(interpolator) {
  const lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const c = /** @type {import("d3-color").Color} */ (parseColor(interpolator(i / 255))).rgb();
    lut.set([c.r, c.g, c.b], 3 * i);
  }
  return lut;
}

/**
 * Paint the heat map of `values` (L, H, n) over the geometry's token range into `image`: one pixel per
 * column (bins of several tokens, each its maximum, when there are more tokens than pixels), the square
 * root of max attention in [0, vmax] through the theme's heat palette. Returns the palette's table.
 * @param {HTMLCanvasElement} image
 * @param {{values: Float32Array, n: number, vmax: number, geom: Geometry, theme: Theme}} data
 */
export function paintHeat(image, { values, n, vmax, geom, theme }) {
  const rows = geom.L * geom.H;
  const cols = geom.columns;
  const data =
    geom.binned || geom.count < n ? binColumns(values, { rows, n, t0: geom.t0, t1: geom.t1, columns: cols }) : values;
  image.width = cols;
  image.height = Math.max(rows, 1);
  const ictx = /** @type {CanvasRenderingContext2D} */ (image.getContext("2d"));
  const pixels = ictx.createImageData(image.width, image.height);
  const lut = colourTable(theme.heat);
  const scale = scaleSequentialSqrt([0, vmax], (/** @type {number} */ t) => t).clamp(true);
  for (let i = 0; i < rows * cols; i++) {
    const c = 3 * Math.round(255 * scale(data[i]));
    pixels.data[4 * i] = lut[c];
    pixels.data[4 * i + 1] = lut[c + 1];
    pixels.data[4 * i + 2] = lut[c + 2];
    pixels.data[4 * i + 3] = 255;
  }
  ictx.putImageData(pixels, 0, 0);
  return lut;
}

/**
 * The heat legend: a 128 px ramp of the palette and the maximum.
 * @param {HTMLCanvasElement} legend
 * @param {HTMLElement} legendMax
 * @param {Uint8ClampedArray} lut
 * @param {number} vmax
 */
export function paintHeatLegend(legend, legendMax, lut, vmax) {
  legend.width = 128;
  legend.height = 1;
  const lctx = /** @type {CanvasRenderingContext2D} */ (legend.getContext("2d"));
  const row = lctx.createImageData(128, 1);
  for (let i = 0; i < 128; i++) {
    const c = 3 * Math.round((255 * i) / 127);
    row.data.set([lut[c], lut[c + 1], lut[c + 2], 255], 4 * i);
  }
  lctx.putImageData(row, 0, 0);
  legendMax.textContent = vmax.toPrecision(2);
}

/**
 * Marks under a layer block at `top`: selected tokens (fg) and search matches (highlight).
 * @param {CanvasRenderingContext2D} ctx
 * @param {GridScene} scene
 * @param {number} top
 */
function drawMarks(ctx, { geom, theme, marked }, top) {
  const y = top + geom.blockH + 1;
  const mark = (/** @type {Set<number>} */ set, /** @type {string} */ colour, /** @type {number} */ dy) => {
    ctx.fillStyle = colour;
    for (const t of set) {
      if (t < geom.t0 || t >= geom.t1) continue;
      ctx.fillRect(geom.labelW + (t - geom.t0) * geom.cellW, y + dy, Math.max(1.5, geom.cellW), 2.5);
    }
  };
  mark(marked.matches, theme.highlight, 0);
  mark(marked.selected, theme.fg, 3);
}

/**
 * How many columns a header may take: the fewest (1, 2, 4, ...) whose width holds the widest header of the range,
 * so that every header drawn is whole (issue 52: 72 headers cut to "banl"); one every that many columns.
 * @param {CanvasRenderingContext2D} ctx
 * @param {GridScene} scene
 */
export function headerStep(ctx, { geom, header }) {
  let widest = 0;
  for (let t = geom.t0; t < geom.t1; t++) widest = Math.max(widest, ctx.measureText(header(t)).width);
  let step = 1;
  while (step * geom.cellW < widest + 3 && step < geom.count) step *= 2;
  return step;
}

/**
 * The column headers above layer block `top` (wide columns only), one every headerStep columns, each whole.
 * @param {CanvasRenderingContext2D} ctx
 * @param {GridScene} scene
 * @param {number} top
 */
function drawTokenLabels(ctx, scene, top) {
  const { geom, theme, header } = scene;
  ctx.font = `9px ${theme.font}`;
  ctx.fillStyle = theme.muted;
  const step = headerStep(ctx, scene);
  for (let t = geom.t0; t < geom.t1; t += step) {
    const x = geom.labelW + (t - geom.t0) * geom.cellW;
    ctx.fillText(header(t), x + 1, top - geom.gap / 2 + 1);
  }
}

/**
 * Layer `l`: its heat map, title, token labels, head labels, key/value group separators and marks.
 * @param {CanvasRenderingContext2D} ctx
 * @param {GridScene} scene
 * @param {number} l
 */
function drawLayer(ctx, scene, l) {
  const { geom, theme, selected, hidden } = scene;
  const H = geom.H;
  const w = geom.count * geom.cellW;
  const top = layerTop(geom, l);
  ctx.drawImage(scene.image, 0, l * H, geom.columns, H, geom.labelW, top, w, geom.blockH);
  ctx.font = `600 11px ${theme.font}`;
  ctx.textAlign = "left";
  ctx.fillStyle = l === selected.layer ? theme.accent : theme.fg;
  ctx.fillText(`Layer ${l}`, 2, top - geom.gap / 2);
  if (geom.cellW >= TOKEN_LABEL_W) drawTokenLabels(ctx, scene, top);
  const size = Math.min(10, geom.cellH * geom.labelEvery);
  ctx.textAlign = "right";
  for (let h = 0; h < H; h++) {
    const isSel = !hidden && l === selected.layer && h === selected.head;
    if (!isSel && h % geom.labelEvery) continue;
    ctx.font = `${isSel ? "700 " : ""}${size}px ${theme.font}`;
    ctx.fillStyle = isSel ? theme.accent : theme.muted;
    ctx.fillText(`H${scene.headAt(l, h)}`, geom.labelW - 6, top + (h + 0.5) * geom.cellH + 0.5);
  }
  const perGroup = kvGroup(0, H, scene.kvGroups) >= 0 ? scene.kvGroups : 0;
  if (perGroup) {
    ctx.strokeStyle = theme.panel;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    for (let g = perGroup; g < H; g += perGroup) {
      ctx.moveTo(geom.labelW - 30, top + g * geom.cellH);
      ctx.lineTo(geom.labelW + w, top + g * geom.cellH);
    }
    ctx.stroke();
  }
  drawMarks(ctx, scene, top);
}

/**
 * The outlines: the hovered token's column through every layer, the selected head (or layer), the
 * keyboard cursor and the hovered cell.
 * @param {CanvasRenderingContext2D} ctx
 * @param {GridScene} scene
 */
function drawOutlines(ctx, { geom, theme, selected, hidden, hoverToken, hoverCell, cursor }) {
  const w = geom.count * geom.cellW;
  if (hoverToken >= geom.t0 && hoverToken < geom.t1) {
    ctx.strokeStyle = theme.highlight;
    ctx.lineWidth = 1;
    const x = geom.labelW + (hoverToken - geom.t0) * geom.cellW;
    for (let l = 0; l < geom.L; l++) ctx.strokeRect(x - 1, layerTop(geom, l) - 1, geom.cellW + 2, geom.blockH + 2);
  }
  // the selected head's row (a layer's block in hidden-state mode): bars in the margins beside it and a line inside
  // its own rows, nothing over the rows next to it
  const top = layerTop(geom, selected.layer) + (hidden ? 0 : selected.head * geom.cellH);
  const tall = hidden ? geom.blockH : geom.cellH;
  ctx.fillStyle = theme.accent;
  ctx.fillRect(geom.labelW - 4, top, 3, tall);
  ctx.fillRect(geom.labelW + w + 1, top, 3, tall);
  ctx.strokeStyle = theme.accent;
  ctx.lineWidth = 1;
  ctx.strokeRect(geom.labelW + 0.5, top + 0.5, w - 1, tall - 1);
  if (cursor) {
    ctx.strokeStyle = theme.fg;
    ctx.setLineDash([3, 2]);
    ctx.lineWidth = 1;
    const ct = layerTop(geom, cursor.layer) + (hidden ? 0 : cursor.head * geom.cellH);
    ctx.strokeRect(1, ct - 0.5, geom.labelW + w - 1, hidden ? geom.blockH + 1 : geom.cellH + 1);
    ctx.setLineDash([]);
  }
  if (hoverCell && hoverCell.token >= 0) {
    ctx.strokeStyle = theme.fg;
    ctx.lineWidth = 1;
    const x = geom.labelW + (hoverCell.token - geom.t0) * geom.cellW - 0.5;
    ctx.strokeRect(
      x,
      layerTop(geom, hoverCell.layer) + hoverCell.head * geom.cellH - 0.5,
      geom.cellW + 1,
      geom.cellH + 1,
    );
  }
}

/**
 * The whole grid on `ctx` (whose canvas is `dpr` device px per CSS px).
 * @param {CanvasRenderingContext2D} ctx
 * @param {GridScene} scene
 * @param {number} dpr
 */
export function drawGrid(ctx, scene, dpr) {
  const { geom, theme } = scene;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = theme.panel;
  ctx.fillRect(0, 0, geom.width, geom.height);
  ctx.imageSmoothingEnabled = false;
  ctx.textBaseline = "middle";
  for (let l = 0; l < geom.L; l++) drawLayer(ctx, scene, l);
  drawOutlines(ctx, scene);
}
