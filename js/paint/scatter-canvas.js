// The scatter's drawing backend on a 2D canvas: a scene (js/views/scatter/scatter.js `Scene`: what the map shows, in
// CSS px) drawn on the screen canvas or, for a PNG export, on a new canvas at any scale. On screen its
// points come from WebGL2 when there are many and it runs on the GPU (js/paint/point-gl.js, drawn into this
// canvas between the axes and the labels), else from the script raster (js/paint/point-raster.js); an export
// draws them as arcs.

import { chooseLabels } from "./labels.js";
import { drawAxes } from "./axes.js";
import { createLabelAtlas } from "./label-atlas.js";
import { createPointRaster } from "./point-raster.js";
import { chooseBackend } from "./point-gl.js";
import { setData } from "../lib/schedule.js";
import { RADIUS, drawEdges, drawLasso, drawPoints, edgeEnds, haloFont, haloText, ring } from "./scatter-paint.js";
import { drawClusterLabels, drawContours } from "./map-aids-paint.js";
import { drawSyntaxArcs } from "./syntax-paint.js";

const LABEL_H = 14; // CSS px of a plain label's box

/**
 * @typedef {{x0: number, y0: number, x1: number, y1: number}} Box
 * @typedef {{key: number, x: number, y: number, w: number, h: number}} LabelBox a drawn label (CSS px)
 * @typedef {import("../lib/partners.js").Partner} Partner
 * @typedef {object} Scene what the map shows (CSS px)
 * @property {import("../lib/theme.js").Theme} theme
 * @property {number} width
 * @property {number} height
 * @property {Box} plot the plot's box inside the margins
 * @property {any} x d3 linear scale, data -> CSS px
 * @property {any} y
 * @property {{x: any, y: any} | null} knots quantile knots (quantile-equidistant axes)
 * @property {{sx: Float32Array, sy: Float32Array, m: number, kept: number[], tokenRow: Int32Array,
 *   colours: string[], special: boolean[], queryRows?: number} | null} points null: nothing to draw but `message`;
 *   rows from `queryRows` on are keys (query-key mode), drawn as rings
 * @property {string} message
 * @property {number} hover the hovered token (-1: none)
 * @property {number} hoverRow the row of its point drawn hovered (-1: not in the map; in query-key mode the
 *   query or the key under the pointer, js/views/scatter/scatter-scene.js)
 * @property {{to: Partner[], from: Partner[], near: Partner[]}} shown the hovered token's partners to draw
 * @property {number[]} partners their tokens (with a point)
 * @property {Set<number>} selected
 * @property {Set<number>} matches
 * @property {number} density label density
 * @property {(t: number) => boolean} subword
 * @property {string[]} tokens
 * @property {[number, number][] | null} lasso
 * @property {import("./map-aids-paint.js").Contour[]} [contours] the points' density contours, drawn under them
 * @property {import("./map-aids-paint.js").ClusterPlace[]} [clusters] the clusters' labels, drawn over everything
 * @property {number} [pinnedRow] the row of the token clicked last (the inspector's), ringed in the accent colour
 * @property {{head: number, dependents: number[], tokens: {head: number, dependents: number[]}}} [syntax] the hovered
 *   token's syntactic head and dependents (rows; `tokens`: their tokens), drawn as arcs (js/paint/syntax-paint.js)
 */

/**
 * A drawing backend of the scatter.
 * @typedef {object} ScatterBackend
 * @property {HTMLCanvasElement} canvas the element on screen (the view adds its listeners and data-*)
 * @property {(width: number, height: number) => void} resize the size it is laid out at (CSS px, by the
 *   stylesheet)
 * @property {(scene: Scene) => LabelBox[]} draw draw on screen; returns the labels drawn
 * @property {(scene: Scene, scale: number) => HTMLCanvasElement} render the scene on a new canvas at
 *   `scale` device px per CSS px (an export)
 * @property {() => void} forgetLabels the token strings or the theme changed
 */

/**
 * @typedef {ReturnType<typeof createLabelAtlas>} LabelAtlas the plain labels, each rendered once
 *   (js/paint/label-atlas.js)
 */

/**
 * Label boxes of the tokens to label, collision-free, in priority order (CSS px).
 * @param {CanvasRenderingContext2D} c
 * @param {Scene} scene
 * @param {LabelAtlas | null} labels
 */
function layoutLabels(c, scene, labels) {
  const { theme, tokens } = scene;
  if (!labels || !scene.points) return [];
  return chooseLabels({
    points: scene.points,
    plot: scene.plot,
    hovered: scene.hoverRow >= 0 ? scene.hover : -1,
    selected: scene.selected,
    partners: scene.partners,
    matches: scene.matches,
    subword: scene.subword,
    density: scene.density,
    radius: RADIUS,
    size: (t, emphasis) => {
      if (!emphasis) return [labels.width(tokens[t] ?? ""), LABEL_H];
      c.font = haloFont(theme, emphasis === "main");
      return [c.measureText(tokens[t] ?? "").width + 3, emphasis === "main" ? 17 : 15];
    },
    labelH: LABEL_H,
  });
}

/**
 * The labels: plain ones from the atlas, the hovered token's and its partners' with a halo.
 * @param {CanvasRenderingContext2D} c
 * @param {Scene} scene
 * @param {LabelBox[]} boxes
 * @param {LabelAtlas | null} labels
 */
function drawLabels(c, scene, boxes, labels) {
  const emphasised = new Set([scene.hover, ...scene.partners]);
  c.globalAlpha = scene.hoverRow >= 0 ? 0.45 : 0.85;
  if (labels) for (const b of boxes) if (!emphasised.has(b.key)) labels.draw(c, scene.tokens[b.key] ?? "", b);
  c.globalAlpha = 1;
  if (scene.hoverRow < 0 || !scene.points) return;
  const { sx, sy, colours } = scene.points;
  const { theme, hover } = scene;
  const ends = edgeEnds(scene);
  for (const { row, token } of [...ends.to, ...ends.from, ...ends.near]) {
    ring(c, sx[row], sy[row], { fill: colours[token] || theme.muted, stroke: theme.highlight });
  }
  ring(c, sx[scene.hoverRow], sy[scene.hoverRow], {
    fill: colours[hover] || theme.muted,
    stroke: theme.fg,
    main: true,
  });
  for (const b of boxes) {
    const text = scene.tokens[b.key] ?? "";
    if (emphasised.has(b.key)) haloText(c, theme, { text, x: b.x, y: b.y, h: b.h, main: b.key === hover });
  }
}

/**
 * The hovered token's edges to its partners (edgeEnds); returns how many were drawn.
 * @param {CanvasRenderingContext2D} c
 * @param {Scene} scene
 */
function drawHoverEdges(c, scene) {
  if (scene.hoverRow < 0 || !scene.points) return 0;
  const { sx, sy } = scene.points;
  const { theme } = scene;
  const ends = edgeEnds(scene);
  const at = (/** @type {{row: number, weight: number}[]} */ list) =>
    list.map((p) => ({ x: sx[p.row], y: sy[p.row], weight: p.weight }));
  /** @param {"to" | "from" | "near"} kind @param {any} style */
  const draw = (kind, style) => drawEdges(c, sx[ends.origin[kind]], sy[ends.origin[kind]], at(ends[kind]), style);
  draw("near", { colour: theme.highlight });
  draw("from", { colour: theme.highlight, dash: [5, 4], arrow: "in" });
  draw("to", { colour: theme.accent, arrow: "out" });
  return ends.to.length + ends.from.length + ends.near.length;
}

/**
 * The message of an empty map.
 * @param {CanvasRenderingContext2D} c
 * @param {Scene} scene
 */
function drawMessage(c, { theme, width, height, message }) {
  c.fillStyle = theme.muted;
  c.font = `12px ${theme.font}`;
  c.textAlign = "center";
  c.textBaseline = "middle";
  c.fillText(message, width / 2, height / 2);
}

/**
 * Draw the whole scene into `c` at `scale` device px per CSS px; returns the labels drawn. An export
 * draws every point as an arc and no lasso; on screen the points come from `layer` (WebGL2, or the
 * filled ones rasterised in script, js/paint/point-raster.js): canvas arcs cost little in the script but
 * 3-4 µs each in chromium's raster at the commit (30-40 ms at 8192 points, never in data-paint-ms).
 * @param {CanvasRenderingContext2D} c
 * @param {Scene} scene
 * @param {{scale: number, exporting: boolean, layer: PointLayer,
 *   labels: (scene: Scene, dpr: number) => LabelAtlas | null}} how
 * @returns {LabelBox[]}
 */
function paint(c, scene, { scale, exporting, layer, labels }) {
  const { theme, plot, points } = scene;
  c.setTransform(scale, 0, 0, scale, 0, 0);
  c.fillStyle = theme.panel;
  c.fillRect(0, 0, scene.width, scene.height);
  if (!points) {
    drawMessage(c, scene);
    return [];
  }
  const [w, h] = [plot.x1 - plot.x0, plot.y1 - plot.y0];
  drawAxes(c, theme, { x: scene.x, y: scene.y, w, h, width: scene.width, knots: scene.knots });
  c.save();
  c.beginPath();
  c.rect(plot.x0, plot.y0, plot.x1 - plot.x0, plot.y1 - plot.y0);
  c.clip();
  if (scene.contours) drawContours(c, theme, scene.contours);
  drawHoverEdges(c, scene);
  drawSyntaxArcs(c, scene);
  const { selected, matches } = scene;
  const dim = selected.size > 0 || scene.hoverRow >= 0;
  const by = exporting ? "arcs" : layer(c, { theme, scale, box: plot, points, dim, selected, matches });
  if (by !== "webgl") drawPoints(c, theme, points, { selected, matches, dim, filled: by === "arcs" });
  const pin = scene.pinnedRow ?? -1;
  if (pin >= 0 && pin < points.m) {
    const fill = points.colours[points.kept[pin]] || theme.muted;
    ring(c, points.sx[pin], points.sy[pin], { fill, stroke: theme.accent, main: true });
  }
  const atlas = labels(scene, scale);
  const boxes = layoutLabels(c, scene, atlas);
  drawLabels(c, scene, boxes, atlas);
  if (scene.clusters) drawClusterLabels(c, theme, scene.clusters);
  if (scene.lasso && !exporting) drawLasso(c, theme, scene.lasso);
  c.restore();
  return boxes;
}

/**
 * The screen's filled points (special tokens' rings and the marks' rings too, from WebGL): drawn by
 * WebGL ("webgl"), by the script raster ("canvas"), or left to canvas arcs ("arcs").
 * @typedef {(c: CanvasRenderingContext2D, scene: import("./point-gl.js").GlScene) => "webgl" | "canvas" | "arcs"} PointLayer
 */

/**
 * The points' layer of the screen: WebGL from WEBGL_MIN_POINTS points on where it runs on the GPU, else
 * the script raster (js/paint/point-gl.js chooseBackend); which one drew last is the canvas's data-backend, its
 * time in the last paint (ms) data-points-ms, and what WebGL2 is here (hardware, software, none: known
 * once asked) data-webgl.
 * @param {HTMLCanvasElement} canvas
 * @param {ReturnType<typeof import("./point-gl.js").createGlPoints> | null} gl
 * @param {() => number} now
 * @returns {PointLayer}
 */
function pointLayer(canvas, gl, now) {
  const raster = createPointRaster();
  return (c, scene) => {
    const t0 = now();
    const { dim, selected } = scene;
    const kind = () => {
      const k = gl ? gl.kind() : "none";
      setData(canvas, "webgl", k);
      return k;
    };
    const want = chooseBackend(scene.points.m, canvas.dataset.backendForce, kind);
    let by = /** @type {"webgl" | "canvas" | "arcs"} */ ("webgl");
    if (want !== "webgl" || !gl || !gl.draw(c, scene)) {
      const alpha = (/** @type {number} */ tok) => (!dim || selected.has(tok) ? 1 : 0.3);
      by = raster.draw(c, { ...scene, alpha }) ? "canvas" : "arcs";
    }
    setData(canvas, "backend", by === "webgl" ? "webgl" : "canvas");
    setData(canvas, "pointsMs", (now() - t0).toFixed(2));
    return by;
  };
}

/**
 * The 2D-canvas backend; its points drawn with WebGL when `gl` is given and there are many.
 * @param {{gl?: ReturnType<typeof import("./point-gl.js").createGlPoints> | null, now?: () => number}} [options] `now`: the
 *   clock of data-points-ms
 * @returns {ScatterBackend}
 */
export function createCanvasBackend({ gl = null, now = () => 0 } = {}) {
  const canvas = document.createElement("canvas");
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
  const layer = pointLayer(canvas, gl, now);
  /** @type {LabelAtlas | null} */
  let atlas = null;
  let width = 0;
  /** @type {(scene: Scene, dpr: number) => LabelAtlas | null} */
  const labels = ({ tokens, theme }, dpr) => {
    if (!atlas || atlas.dpr !== dpr) atlas = tokens.length ? createLabelAtlas(theme, dpr, LABEL_H) : null;
    return atlas;
  };
  /** @param {CanvasRenderingContext2D} c @param {Scene} scene @param {number} scale @param {boolean} exporting */
  const paintWith = (c, scene, scale, exporting) => paint(c, scene, { scale, exporting, layer, labels });

  return {
    canvas,
    resize(w, h) {
      const dpr = window.devicePixelRatio || 1;
      width = w;
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    },
    draw(scene) {
      const t0 = now();
      const boxes = paintWith(ctx, scene, canvas.width / Math.max(width, 1), false);
      setData(canvas, "drawMs", (now() - t0).toFixed(2));
      return boxes;
    },
    render(scene, scale) {
      const out = document.createElement("canvas");
      out.width = Math.round(scene.width * scale);
      out.height = Math.round(scene.height * scale);
      paintWith(/** @type {CanvasRenderingContext2D} */ (out.getContext("2d")), scene, scale, true);
      atlas = null; // built at the export's scale: rebuild for the screen
      return out;
    },
    forgetLabels() {
      atlas = null;
    },
  };
}
