// The screen's points, rasterised in script: each filled point is an antialiased disc stamp (coverage
// precomputed at SUB x SUB sub-pixel offsets, kept as the list of its covered pixels) blended into an
// ImageData of the plot, put on an offscreen canvas and drawn with one drawImage. Chromium's software 2D
// canvas rasters an antialiased arc in 3-4 µs at its commit (2 ms for 512 points, 30-40 ms for 8192, in
// every drawn frame, none of it in the script's own paint time); this takes 0.2-0.5 ms for 512 and 4-6 ms
// for 8192 (node, on the shared 2-core machine). Special tokens (rings) and exports still use drawPoints
// (js/paint/scatter-paint.js).

import { color as parseColor } from "d3-color";
import { RADIUS, isRing } from "./scatter-paint.js";

const SUB = 4; // sub-pixel positions of a point stamp per device px and axis
const SAMPLES = 8; // coverage samples per device px and axis
// the raster writes whole pixels as 32-bit words, R in the low byte: little-endian only (else canvas arcs)
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * The covered pixels of the stamp at sub-pixel offset s: entries start[s] .. start[s + 1] - 1 of dx, dy
 * (from the centre pixel) and cover (0-1); `reach`: how far a stamp reaches from its centre pixel.
 * @typedef {{start: Int32Array, dx: Int32Array, dy: Int32Array, cover: Float32Array, reach: number}} Stamps
 * @typedef {{pixels: Int32Array, W: number, H: number}} Buffer the plot's pixels as words (Int32: V8 keeps
 *   them small integers), W x H device px
 */

/**
 * The share of device pixel (dx, dy) of a stamp of `size` px (centre `half`) that a disc of radius `r`
 * at sub-pixel offset (ox, oy) covers.
 * @param {{dx: number, dy: number, ox: number, oy: number}} at
 * @param {number} half
 * @param {number} r
 */
function coverage({ dx, dy, ox, oy }, half, r) {
  let cover = 0;
  for (let qy = 0; qy < SAMPLES; qy++) {
    // the sample's offset from the centre, half + 0.5 + (o + 0.5) / SUB stamp px from the corner
    const py = dy + (qy + 0.5) / SAMPLES - (half + 0.5 + (oy + 0.5) / SUB);
    for (let qx = 0; qx < SAMPLES; qx++) {
      const px = dx + (qx + 0.5) / SAMPLES - (half + 0.5 + (ox + 0.5) / SUB);
      if (px * px + py * py <= r * r) cover++;
    }
  }
  return cover / (SAMPLES * SAMPLES);
}

/**
 * The stamps of a point at `scale` device px per CSS px.
 * @param {number} scale
 * @returns {Stamps}
 */
function buildStamps(scale) {
  const r = RADIUS * scale;
  const size = 2 * Math.ceil(r + 1) + 1; // stamp side in device px
  const half = (size - 1) / 2;
  const start = [0];
  /** @type {number[][]} */
  const [dxs, dys, covers] = [[], [], []];
  for (let s = 0; s < SUB * SUB; s++) {
    const [ox, oy] = [s % SUB, Math.floor(s / SUB)];
    for (let p = 0; p < size * size; p++) {
      const [dx, dy] = [p % size, Math.floor(p / size)];
      const cover = coverage({ dx, dy, ox, oy }, half, r);
      if (cover === 0) continue;
      dxs.push(dx - half);
      dys.push(dy - half);
      covers.push(cover);
    }
    start.push(dxs.length);
  }
  const cover = Float32Array.from(covers);
  return { start: Int32Array.from(start), dx: Int32Array.from(dxs), dy: Int32Array.from(dys), cover, reach: half };
}

/**
 * Per token: r | g << 8 | b << 16 of its colour (`muted` without one).
 * @param {string[]} list
 * @param {string} muted
 */
export function packColours(list, muted) {
  const rgb = new Int32Array(list.length);
  /** @type {Map<string, number>} */
  const cache = new Map();
  const byte = (/** @type {number} */ x) => Math.max(0, Math.min(255, Math.round(x)));
  for (let t = 0; t < list.length; t++) {
    const css = list[t] || muted;
    let c = cache.get(css);
    if (c === undefined) {
      const parsed = parseColor(css);
      const v = parsed ? parsed.rgb() : { r: 128, g: 128, b: 128 };
      c = byte(v.r) | (byte(v.g) << 8) | (byte(v.b) << 16);
      cache.set(css, c);
    }
    rgb[t] = c;
  }
  return rgb;
}

/**
 * Colour `colour` (packed) at opacity `a` in (0, 1] over the pixel `d`: source over destination,
 * unpremultiplied (+ 0.5 | 0: rounded, all terms are positive).
 * @param {number} d
 * @param {number} a
 * @param {number} colour
 */
function over(d, a, colour) {
  const dA = d >>> 24;
  if (a >= 1) return colour | 0xff000000;
  if (dA === 0) return colour | (((255 * a + 0.5) | 0) << 24);
  const da = dA * (1 - a) * (1 / 255);
  const oa = a + da;
  const k = 1 / oa;
  const red = (((colour & 255) * a + (d & 255) * da) * k + 0.5) | 0;
  const green = ((((colour >>> 8) & 255) * a + ((d >>> 8) & 255) * da) * k + 0.5) | 0;
  const blue = ((((colour >>> 16) & 255) * a + ((d >>> 16) & 255) * da) * k + 0.5) | 0;
  return red | (green << 8) | (blue << 16) | (((255 * oa + 0.5) | 0) << 24);
}

/**
 * Blend one point's stamp into the buffer: its centre (cx, cy) in buffer px, its colour (packed) and
 * opacity `a0`.
 * @param {Buffer} buffer
 * @param {Stamps} stamps
 * @param {{cx: number, cy: number, colour: number, a0: number}} point
 */
function stamp({ pixels, W, H }, stamps, { cx, cy, colour, a0 }) {
  const { reach } = stamps;
  if (!(cx > -reach - 1 && cy > -reach - 1 && cx < W + reach && cy < H + reach)) return;
  const ix = Math.floor(cx);
  const iy = Math.floor(cy);
  const s = Math.min(SUB - 1, Math.floor((cy - iy) * SUB)) * SUB + Math.min(SUB - 1, Math.floor((cx - ix) * SUB));
  const inside = ix >= reach && iy >= reach && ix + reach < W && iy + reach < H;
  for (let j = stamps.start[s], end = stamps.start[s + 1]; j < end; j++) {
    const x = ix + stamps.dx[j];
    const y = iy + stamps.dy[j];
    if (!inside && (x < 0 || x >= W || y < 0 || y >= H)) continue;
    const a = a0 * stamps.cover[j];
    if (a > 0) pixels[y * W + x] = over(pixels[y * W + x], a, colour);
  }
}

/**
 * The point rasteriser of the screen: `draw` returns false when it cannot (no 2D context, or a
 * big-endian machine).
 */
export function createPointRaster() {
  /** @type {Stamps | null} */
  let stamps = null;
  let stampScale = 0;
  /** @type {{canvas: HTMLCanvasElement, ctx: CanvasRenderingContext2D, image: ImageData, buffer: Buffer} | null} */
  let off = null;
  /** @type {string[] | null} */
  let rgbOf = null; // the colour list the packed colours belong to
  let rgbMuted = "";
  let rgb = new Int32Array(0);

  /** The offscreen image of W x H device px (made anew when the size changes); null without a 2D context. */
  function offscreen(/** @type {number} */ W, /** @type {number} */ H) {
    if (off && off.canvas.width === W && off.canvas.height === H) return off;
    const canvas = document.createElement("canvas");
    canvas.width = W;
    canvas.height = H;
    const ctx = canvas.getContext("2d");
    if (!ctx || typeof ctx.createImageData !== "function") return (off = null);
    const image = ctx.createImageData(W, H);
    const pixels = new Int32Array(image.data.buffer, image.data.byteOffset, W * H);
    off = { canvas, ctx, image, buffer: { pixels, W, H } };
    return off;
  }

  return {
    /**
     * Draw the filled (non-special) points into `c` (whose transform is `scale` device px per CSS px),
     * clipped to the plot box {x0, y0, x1, y1} in CSS px; `alpha(tok)` is each point's opacity.
     * @param {CanvasRenderingContext2D} c
     * @param {{theme: {muted: string}, scale: number, box: {x0: number, y0: number, x1: number, y1: number},
     *   points: {sx: ArrayLike<number>, sy: ArrayLike<number>, m: number, kept: number[], colours: string[],
     *   special: boolean[], queryRows?: number}, alpha: (tok: number) => number}} scene
     */
    draw(c, { theme, scale, box, points, alpha }) {
      if (!LITTLE_ENDIAN) return false;
      if (!stamps || stampScale !== scale) [stamps, stampScale] = [buildStamps(scale), scale];
      if (rgbOf !== points.colours || rgbMuted !== theme.muted) {
        [rgb, rgbOf, rgbMuted] = [packColours(points.colours, theme.muted), points.colours, theme.muted];
      }
      const X0 = Math.floor(box.x0 * scale);
      const Y0 = Math.floor(box.y0 * scale);
      const target = offscreen(
        Math.max(1, Math.ceil(box.x1 * scale) - X0),
        Math.max(1, Math.ceil(box.y1 * scale) - Y0),
      );
      if (!target) return false;
      target.buffer.pixels.fill(0);
      const { sx, sy, m, kept } = points;
      for (let r = 0; r < m; r++) {
        const tok = kept[r];
        if (isRing(points, r)) continue;
        const colour = tok < rgb.length ? rgb[tok] : 0x808080;
        // the point's centre in buffer px
        const point = { cx: sx[r] * scale - X0 - 0.5, cy: sy[r] * scale - Y0 - 0.5, colour, a0: alpha(tok) };
        stamp(target.buffer, stamps, point);
      }
      target.ctx.putImageData(target.image, 0, 0);
      c.save();
      c.setTransform(1, 0, 0, 1, 0, 0);
      c.drawImage(target.canvas, X0, Y0);
      c.restore();
      return true;
    },
  };
}
