// The scatter's points drawn with WebGL2 (tens of thousands of them at display rate): one point sprite a
// point, its disc (special tokens: a ring) antialiased in the fragment shader, then the rings of the search
// matches and of the selection on top (a second and third draw of those rows only), into an offscreen
// WebGL canvas the size of the plot, which the 2D screen canvas draws with one drawImage between the axes
// and edges below and the labels above (js/paint/scatter-canvas.js). Positions are uploaded every frame (8 bytes
// a point); colours and opacities only when the colouring, the selection or the dimming change. Without
// WebGL2 (or after the context is lost) `draw` answers false and the canvas draws the points.

import { RADIUS, isRing } from "./scatter-paint.js";
import { packColours } from "./point-raster.js";
import { glColour, glProgram } from "./gl-program.js";

const STROKE = 1.5; // CSS px: a special token's ring, a mark's ring (js/paint/scatter-paint.js drawPoints, ring)
const MARK_R = RADIUS + 1.5;

const VERTEX = `#version 300 es
in float a_x;
in float a_y;
in vec4 a_colour;
in float a_kind;
uniform vec2 u_origin; // device px of the target's top-left corner on the screen canvas
uniform vec2 u_size; // the target's size, device px
uniform float u_scale; // device px per CSS px
uniform float u_sprite; // device px
out vec4 v_colour;
out float v_kind;
void main() {
  vec2 p = vec2(a_x, a_y) * u_scale - u_origin;
  gl_Position = vec4(p.x / u_size.x * 2.0 - 1.0, 1.0 - p.y / u_size.y * 2.0, 0.0, 1.0);
  gl_PointSize = u_sprite;
  v_colour = a_colour;
  v_kind = a_kind;
}`;

// coverage of a disc of radius R (or a ring of width w at radius R) at distance r from the centre,
// antialiased over one device px; premultiplied output (the blend is ONE, ONE_MINUS_SRC_ALPHA)
const FRAGMENT = `#version 300 es
precision highp float;
in vec4 v_colour;
in float v_kind;
uniform float u_sprite;
uniform float u_radius; // device px
uniform float u_stroke; // device px
uniform int u_mark; // 0: the points; 1: rings around marked points in u_ring's colour
uniform vec4 u_ring;
out vec4 colour;
void main() {
  float r = length((gl_PointCoord - 0.5) * u_sprite);
  float line = clamp(0.5 * u_stroke + 0.5 - abs(r - u_radius), 0.0, 1.0);
  float disc = clamp(u_radius + 0.5 - r, 0.0, 1.0);
  if (u_mark == 1) {
    colour = vec4(u_ring.rgb * line + v_colour.rgb * disc * (1.0 - line), line + disc * (1.0 - line));
  } else {
    float a = (v_kind > 0.5 ? line : disc) * v_colour.a;
    colour = vec4(v_colour.rgb * a, a);
  }
  if (colour.a <= 0.0) discard;
}`;

/**
 * @typedef {{sx: Float32Array, sy: Float32Array, m: number, kept: number[], tokenRow: Int32Array,
 *   colours: string[], special: boolean[], queryRows?: number}} Points
 * @typedef {{theme: {muted: string, fg: string, highlight: string}, scale: number,
 *   box: {x0: number, y0: number, x1: number, y1: number}, points: Points, dim: boolean,
 *   selected: Set<number>, matches: Set<number>}} GlScene
 */

/**
 * Per row: RGBA (A: 255, or 77 for a point dimmed outside the selection) and the kind (1: a ring).
 * @param {Points} points
 * @param {Int32Array} rgb packed colour per token (js/paint/point-raster.js packColours)
 * @param {{dim: boolean, selected: Set<number>}} marks
 */
export function pointStyles(points, rgb, { dim, selected }) {
  const { m, kept } = points;
  const colour = new Uint8Array(4 * m);
  const kind = new Uint8Array(m);
  const words = new Uint32Array(colour.buffer);
  const little = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
  for (let r = 0; r < m; r++) {
    const t = kept[r];
    const c = t < rgb.length ? rgb[t] : 0x808080;
    const a = !dim || selected.has(t) ? 255 : 77;
    if (little) words[r] = (c & 0xffffff) | (a << 24);
    else colour.set([c & 255, (c >> 8) & 255, (c >> 16) & 255, a], 4 * r);
    kind[r] = isRing(points, r) ? 1 : 0;
  }
  return { colour, kind };
}

/**
 * The rows to ring: the search matches', then the selection's (drawn in that order, the selection on
 * top); `split` is where the selection's begin.
 * @param {Int32Array} tokenRow
 * @param {number} m
 * @param {Set<number>} matches
 * @param {Set<number>} selected
 */
export function markedRows(tokenRow, m, matches, selected) {
  /** @type {number[]} */
  const rows = [];
  const add = (/** @type {Set<number>} */ set) => {
    for (const t of set) {
      const r = t >= 0 && t < tokenRow.length ? tokenRow[t] : -1;
      if (r >= 0 && r < m) rows.push(r);
    }
  };
  add(matches);
  const split = rows.length;
  add(selected);
  return { rows: Uint32Array.from(rows), split };
}

/**
 * The WebGL2 point layer: `draw(c, scene)` draws the points into the 2D context `c` (its clip set to the
 * plot) and answers true, or false when it cannot; `kind()` what WebGL2 is here (the context is made at
 * the first call).
 */
export function createGlPoints() {
  /** @type {ReturnType<typeof glProgram> | null | undefined} undefined: not tried yet */
  let gl;
  let lost = false;
  /** @type {any[]} identities the uploaded styles were made from */
  let styleKey = [];
  /** @type {any[]} */
  let markKey = [];
  let marks = { rows: new Uint32Array(0), split: 0 };
  /** @type {{of: string[] | null, muted: string, rgb: Int32Array}} */
  const packed = { of: null, muted: "", rgb: new Int32Array(0) };

  function context() {
    if (gl !== undefined) return lost ? null : gl;
    const canvas = document.createElement("canvas");
    gl = glProgram(canvas, VERTEX, FRAGMENT);
    canvas.addEventListener("webglcontextlost", (event) => {
      event.preventDefault();
      lost = true;
    });
    canvas.addEventListener("webglcontextrestored", () => {
      [gl, lost, styleKey, markKey] = [undefined, false, [], []];
    });
    return gl;
  }

  /** Upload what changed: styles when their inputs did, the rings' rows, the positions always. */
  function upload(/** @type {NonNullable<typeof gl>} */ g, /** @type {GlScene} */ scene) {
    const { points, theme, dim, selected, matches } = scene;
    if (packed.of !== points.colours || packed.muted !== theme.muted) {
      Object.assign(packed, { of: points.colours, muted: theme.muted, rgb: packColours(points.colours, theme.muted) });
    }
    const sKey = [packed.rgb, points.kept, points.special, points.m, points.queryRows, dim, dim && selected];
    if (sKey.some((v, i) => v !== styleKey[i])) {
      const { colour, kind } = pointStyles(points, packed.rgb, { dim, selected });
      g.data("colour", colour);
      g.data("kind", kind);
      styleKey = sKey;
    }
    const mKey = [points.tokenRow, points.m, matches, selected];
    if (mKey.some((v, i) => v !== markKey[i])) {
      marks = markedRows(points.tokenRow, points.m, matches, selected);
      g.elements(marks.rows);
      markKey = mKey;
    }
    g.data("x", points.sx.subarray(0, points.m));
    g.data("y", points.sy.subarray(0, points.m));
  }

  return {
    /** What WebGL2 is here: "hardware", "software" (slower than the script raster) or "none". */
    kind() {
      const g = context();
      return !g ? "none" : g.software ? "software" : "hardware";
    },
    /**
     * @param {CanvasRenderingContext2D} c
     * @param {GlScene} scene
     */
    draw(c, scene) {
      const g = context();
      if (!g) return false;
      const { scale, box, points, theme } = scene;
      const pad = Math.ceil((MARK_R + STROKE) * scale + 2);
      const X0 = Math.floor(box.x0 * scale) - pad;
      const Y0 = Math.floor(box.y0 * scale) - pad;
      const W = Math.max(1, Math.ceil(box.x1 * scale) + pad - X0);
      const H = Math.max(1, Math.ceil(box.y1 * scale) + pad - Y0);
      if (!g.begin(W, H)) return false;
      upload(g, scene);
      const common = { u_origin: [X0, Y0], u_size: [W, H], u_scale: scale, u_stroke: STROKE * scale };
      // a disc reaches r + 0.5 device px, a ring r + STROKE / 2 CSS px + 0.5 device px
      const sprite = (/** @type {number} */ r) => Math.ceil(2 * ((r + STROKE / 2) * scale + 0.5) + 1);
      g.draw({ ...common, u_sprite: sprite(RADIUS), u_radius: RADIUS * scale, u_mark: 0 }, points.m);
      const rings = { ...common, u_sprite: sprite(MARK_R), u_radius: MARK_R * scale, u_mark: 1 };
      g.drawMarked({ ...rings, u_ring: glColour(theme.highlight) }, 0, marks.split);
      g.drawMarked({ ...rings, u_ring: glColour(theme.fg) }, marks.split, marks.rows.length - marks.split);
      c.save();
      c.setTransform(1, 0, 0, 1, 0, 0);
      c.drawImage(g.canvas, X0, Y0);
      c.restore();
      return true;
    },
  };
}

/** From this many points on the map draws its points with WebGL2 where it runs on the GPU. */
export const WEBGL_MIN_POINTS = 2048;

/**
 * Which backend draws `m` points: "webgl" from WEBGL_MIN_POINTS on where WebGL2 runs on the GPU, else
 * "canvas" (the script raster, js/paint/point-raster.js: in software WebGL2 paints 8192-65536 points 5-9 times
 * slower than it, benchmarks/scatter_webgl.py). `force` ("webgl" or "canvas": the canvas's
 * data-backend-force, which tests and benchmarks set) overrides the count and the kind, never the lack
 * of WebGL2.
 * @param {number} m
 * @param {string | undefined} force
 * @param {() => "hardware" | "software" | "none"} kind
 * @returns {"webgl" | "canvas"}
 */
export function chooseBackend(m, force, kind) {
  if (force === "canvas" || (force !== "webgl" && m < WEBGL_MIN_POINTS)) return "canvas";
  const k = kind();
  return k === "hardware" || (force === "webgl" && k === "software") ? "webgl" : "canvas";
}
