// The SVG export, laid out as the PNG (js/export/export.js composePng): the title, the grid (its heat image, a PNG
// inside the SVG), the map with its frame, grid lines, tick labels and notes (js/paint/axes.js), its points and
// labels, and the colour legend under it. Every text is a text node (the serializer escapes it).

const NS = "http://www.w3.org/2000/svg";
export const PAD = 10;
export const HEAD = 26;
export const LEGEND_H = 22;

/**
 * @typedef {{pos: number, text: string}} Tick
 * @typedef {{width: number, height: number, margin: {top: number, right: number, bottom: number, left: number},
 *   radius: number, points: {x: number, y: number, colour: string, special: boolean}[],
 *   labels: {x: number, y: number, w: number, h: number, text: string}[],
 *   axes: {x: {ticks: Tick[], note: string}, y: {ticks: Tick[], note: string}} | null}} Snapshot
 */

/**
 * An SVG element with attributes and optional text.
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {string | null} [text]
 */
function node(tag, attrs = {}, text = null) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text != null) e.textContent = text;
  return e;
}

/**
 * The map's axes: grid lines, frame, tick labels and notes (the same as the canvas's, js/paint/axes.js).
 * @param {Snapshot} snap
 * @param {any} theme
 */
function axesGroup(snap, theme) {
  const M = snap.margin;
  const w = snap.width - M.left - M.right;
  const h = snap.height - M.top - M.bottom;
  const g = node("g", { class: "axes", "font-size": 10, fill: theme.muted });
  g.append(node("rect", { x: M.left, y: M.top, width: w, height: h, fill: "none", stroke: theme.border }));
  if (!snap.axes) return g;
  const lines = node("g", { stroke: theme.border, "stroke-opacity": 0.55 });
  for (const t of snap.axes.x.ticks) lines.append(node("line", { x1: t.pos, x2: t.pos, y1: M.top, y2: M.top + h }));
  for (const t of snap.axes.y.ticks) lines.append(node("line", { x1: M.left, x2: M.left + w, y1: t.pos, y2: t.pos }));
  g.append(lines);
  for (const t of snap.axes.x.ticks) {
    g.append(node("text", { x: t.pos, y: M.top + h + 14, "text-anchor": "middle" }, t.text));
  }
  for (const t of snap.axes.y.ticks) {
    g.append(node("text", { x: M.left - 5, y: t.pos, "text-anchor": "end", "dominant-baseline": "middle" }, t.text));
  }
  if (snap.axes.y.note) g.append(node("text", { x: M.left + 4, y: M.top + 12 }, `y ${snap.axes.y.note}`));
  if (snap.axes.x.note) {
    g.append(node("text", { x: M.left + w - 4, y: M.top + h - 4, "text-anchor": "end" }, `x ${snap.axes.x.note}`));
  }
  return g;
}

/**
 * The colour legend in one line at (x, y): a gradient between its ends, or a swatch per category.
 * @param {import("../lib/colors.js").Legend | null} legend
 * @param {any} theme
 * @param {number} x
 * @param {number} y
 * @param {(text: string) => number} measure the width of a text (CSS px)
 */
function legendGroup(legend, theme, x, y, measure) {
  const g = node("g", { class: "legend", "font-size": 11, fill: theme.fg });
  if (!legend) return g;
  let cx = x;
  const text = (/** @type {string} */ t) => {
    g.append(node("text", { x: cx, y: y + 11 }, t));
    cx += measure(t) + 8;
  };
  text(legend.title);
  if (legend.kind === "sequential") {
    text(legend.low);
    const gradient = node("linearGradient", { id: "hs-legend-ramp" });
    for (let i = 0; i <= 10; i++)
      gradient.append(node("stop", { offset: i / 10, "stop-color": legend.colour(i / 10) }));
    const defs = node("defs");
    defs.append(gradient);
    g.append(defs);
    g.append(node("rect", { x: cx, y: y + 2, width: 96, height: 10, fill: "url(#hs-legend-ramp)" }));
    cx += 104;
    text(legend.high);
  } else {
    for (const entry of legend.entries) {
      g.append(node("rect", { x: cx, y: y + 2, width: 10, height: 10, fill: entry.colour }));
      cx += 14;
      text(entry.label);
    }
  }
  return g;
}

/**
 * The export as an SVG document: title, grid image, the map with axes, points and labels, the legend.
 * @param {{snap: Snapshot, theme: any, title: string, legend: import("../lib/colors.js").Legend | null,
 *   grid: {href: string, width: number, height: number} | null, measure: (text: string) => number}} parts
 */
export function composeSvg({ snap, theme, title, legend, grid, measure }) {
  const gw = grid ? grid.width : 0;
  const x0 = grid ? gw + 2 * PAD : PAD;
  const width = x0 + snap.width + PAD;
  const height = HEAD + Math.max(grid ? grid.height : 0, snap.height) + LEGEND_H + PAD;
  const svg = node("svg", { width, height, viewBox: `0 0 ${width} ${height}`, "font-family": theme.font });
  svg.append(node("title", {}, title), node("rect", { width, height, fill: theme.bg }));
  svg.append(node("text", { x: PAD, y: HEAD / 2 + 6, "font-size": 13, "font-weight": 600, fill: theme.fg }, title));
  if (grid) {
    svg.append(node("image", { x: PAD, y: HEAD, width: gw, height: grid.height, href: grid.href, class: "grid" }));
  }
  const map = node("g", { class: "map", transform: `translate(${x0} ${HEAD})` });
  map.append(node("rect", { width: snap.width, height: snap.height, fill: theme.panel }), axesGroup(snap, theme));
  const M = snap.margin;
  const inside = (/** @type {{x: number, y: number}} */ p) =>
    p.x >= M.left && p.x <= snap.width - M.right && p.y >= M.top && p.y <= snap.height - M.bottom;
  const points = node("g", { class: "points" });
  for (const p of snap.points) {
    if (!inside(p)) continue;
    const attrs = { cx: p.x.toFixed(2), cy: p.y.toFixed(2), r: snap.radius };
    points.append(
      node("circle", p.special ? { ...attrs, fill: "none", stroke: p.colour } : { ...attrs, fill: p.colour }),
    );
  }
  const labels = node("g", { class: "labels", "font-size": "10.5", fill: theme.fg });
  for (const b of snap.labels) {
    const at = { x: (b.x + 1).toFixed(2), y: (b.y + b.h / 2).toFixed(2), "dominant-baseline": "middle" };
    labels.append(node("text", at, b.text));
  }
  map.append(points, labels);
  svg.append(map, legendGroup(legend, theme, x0, HEAD + Math.max(grid ? grid.height : 0, snap.height) + 4, measure));
  return new XMLSerializer().serializeToString(svg);
}
