// The map's axes: ticks, grid lines, the frame, and tick labels that always fit their margin (the y labels
// shrink to it, the x labels stay inside the canvas): plain numbers when they are short, else
// numbers relative to a shared offset and power of ten, which a note next to the axis gives
// ("×1e-10, offset −1.98e-8"), as matplotlib does. A t-SNE run starts with points 1e-4 apart, sometimes
// around a centre far from 0 (a frame aligned onto the last run's), where plain labels would be 12+
// characters and the margin would cut them ("0667664").

import { tickStep } from "d3-array";
import { format, precisionFixed, precisionRound } from "d3-format";
import { quantileTicks } from "../lib/rescaling.js";
import { MARGIN } from "./scatter-paint.js";

export const MAX_CHARS = 7; // a label of the 48 px y margin at 10 px

/**
 * Labels for tick `values` (sorted, `step` apart) and the note that completes them ("" when they are
 * plain): value = label × 10^e + offset.
 * @param {number[]} values
 * @param {number} step
 * @param {number} [maxChars]
 * @returns {{labels: string[], note: string}}
 */
export function tickLabels(values, step, maxChars = MAX_CHARS) {
  if (!values.length || !(step > 0) || !Number.isFinite(step)) return { labels: values.map(String), note: "" };
  const plain = format(`,.${precisionFixed(step)}f`);
  const labels = values.map((v) => plain(v));
  if (labels.every((s) => s.length <= maxChars)) return { labels, note: "" };
  const mag = Math.max(...values.map(Math.abs));
  // ticks far from 0 relative to their step: labels count from the middle tick
  const offset = mag > 100 * step ? values[Math.floor(values.length / 2)] : 0;
  const rel = values.map((v) => v - offset);
  const top = Math.max(...rel.map(Math.abs), step);
  const e = Math.floor(Math.log10(top));
  const power = e >= 4 || e <= -3 ? e : 0;
  const scaled = step / 10 ** power;
  const short = format(`.${precisionFixed(scaled)}f`);
  const notes = [
    power ? `×1e${String(power).replace("-", "−")}` : "",
    offset ? `offset ${format(`.${precisionRound(step, Math.abs(offset))}~g`)(offset)}` : "",
  ];
  return {
    labels: rel.map((v) => short(v / 10 ** power)),
    note: notes.filter(Boolean).join(", "),
  };
}

const valueLabel = format(".3~g");

/**
 * The ticks of one axis: positions (CSS px, through `scale`) and labels, and the axis's note. Linear axes
 * get `tickLabels`; quantile-equidistant ones (`knots`) are labelled with the original values phi^-1(t).
 * @param {any} scale a d3 linear scale, data -> CSS px
 * @param {import("../lib/rescaling.js").Knots | null} knots
 * @param {number} [count]
 * @returns {{ticks: {pos: number, text: string}[], note: string}}
 */
export function axisTicks(scale, knots, count = 6) {
  const [d0, d1] = scale.domain();
  if (knots) {
    const ticks = quantileTicks(knots, d0, d1, count).map((t) => ({ pos: scale(t.t), text: valueLabel(t.value) }));
    return { ticks, note: "" };
  }
  const values = scale.ticks(count);
  const { labels, note } = tickLabels(values, tickStep(Math.min(d0, d1), Math.max(d0, d1), count));
  return {
    ticks: values.map((/** @type {number} */ v, /** @type {number} */ i) => ({ pos: scale(v), text: labels[i] })),
    note,
  };
}

/**
 * The largest font size (CSS px, at most `size`, at least 6) at which every text of `texts` is at most
 * `room` px wide in `c`'s font family.
 * @param {CanvasRenderingContext2D} c
 * @param {string[]} texts
 * @param {number} room
 * @param {number} size
 * @param {string} family
 */
function fitFont(c, texts, room, size, family) {
  c.font = `${size}px ${family}`;
  const widest = Math.max(0, ...texts.map((t) => c.measureText(t).width));
  return widest <= room ? size : Math.max(6, Math.floor(((size * room) / widest) * 10) / 10);
}

/**
 * Ticks, grid lines, frame and tick labels of both axes: `x`, `y` d3 linear scales (data -> CSS px), `w`,
 * `h` the plot's size, `knots` the quantile knots when the axes are quantile-equidistant, `width` the
 * canvas's. No label is cut: y labels shrink to fit the margin, x labels stay inside the canvas, and long
 * numbers share an offset and a power of ten given by a note inside the plot (js/axis-labels.js).
 * @param {CanvasRenderingContext2D} c
 * @param {import("../lib/theme.js").Theme} theme
 * @param {{x: any, y: any, w: number, h: number, width: number, knots: {x: any, y: any} | null}} axes
 */
export function drawAxes(c, theme, { x, y, w, h, width, knots }) {
  const xa = axisTicks(x, knots ? knots.x : null);
  const ya = axisTicks(y, knots ? knots.y : null);
  c.lineWidth = 1;
  c.strokeStyle = theme.border;
  c.globalAlpha = 0.55;
  c.beginPath();
  for (const t of xa.ticks) {
    c.moveTo(Math.round(t.pos) + 0.5, MARGIN.top);
    c.lineTo(Math.round(t.pos) + 0.5, MARGIN.top + h);
  }
  for (const t of ya.ticks) {
    c.moveTo(MARGIN.left, Math.round(t.pos) + 0.5);
    c.lineTo(MARGIN.left + w, Math.round(t.pos) + 0.5);
  }
  c.stroke();
  c.globalAlpha = 1;
  c.strokeRect(MARGIN.left + 0.5, MARGIN.top + 0.5, w - 1, h - 1);
  c.fillStyle = theme.muted;
  const ySize = fitFont(
    c,
    ya.ticks.map((t) => t.text),
    MARGIN.left - 7,
    10,
    theme.font,
  );
  c.font = `${ySize}px ${theme.font}`;
  c.textAlign = "right";
  c.textBaseline = "middle";
  for (const t of ya.ticks) c.fillText(t.text, MARGIN.left - 5, t.pos);
  c.font = `10px ${theme.font}`;
  c.textBaseline = "top";
  for (const t of xa.ticks) {
    const half = c.measureText(t.text).width / 2;
    c.textAlign = "center";
    c.fillText(t.text, Math.max(half + 1, Math.min(width - half - 1, t.pos)), MARGIN.top + h + 5);
  }
  axisNotes(c, theme, { y: ya.note, x: xa.note, w, h });
}

/**
 * The axes' notes inside the plot: the y axis's at its top left, the x axis's at its bottom right.
 * @param {CanvasRenderingContext2D} c
 * @param {import("../lib/theme.js").Theme} theme
 * @param {{x: string, y: string, w: number, h: number}} notes
 */
function axisNotes(c, theme, { x, y, w, h }) {
  c.font = `9.5px ${theme.font}`;
  c.lineJoin = "round";
  c.lineWidth = 3;
  c.strokeStyle = theme.panel;
  c.fillStyle = theme.muted;
  const put = (/** @type {string} */ text, /** @type {number} */ px, /** @type {number} */ py) => {
    c.strokeText(text, px, py);
    c.fillText(text, px, py);
  };
  if (y) {
    c.textAlign = "left";
    c.textBaseline = "top";
    put(`y ${y}`, MARGIN.left + 4, MARGIN.top + 3);
  }
  if (x) {
    c.textAlign = "right";
    c.textBaseline = "bottom";
    put(`x ${x}`, MARGIN.left + w - 4, MARGIN.top + h - 3);
  }
}
