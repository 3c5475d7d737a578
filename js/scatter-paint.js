// Canvas painting of the scatter's parts, each a function of a 2D context and plain data: axes, edges
// to the hovered token's partners (undirected, or "attends to" / "attended by" drawn distinguishably),
// a point with a halo label, and the lasso. Used for the screen and for the 2x PNG export alike.

import { color as parseColor } from "d3-color";
import { format } from "d3-format";
import { quantileTicks } from "./rescaling.js";

export const MARGIN = { top: 10, right: 12, bottom: 24, left: 48 };
export const RADIUS = 3.6;
const tickLabel = format(".3~g");

/**
 * Ticks, grid lines, frame and tick labels of both axes.
 * @param {CanvasRenderingContext2D} c
 * @param {any} theme
 * @param {any} x d3 linear scale (data -> CSS px)
 * @param {any} y
 * @param {number} w plot width
 * @param {number} h plot height
 * @param {{x: any, y: any} | null} knots quantile knots when the axes are quantile-equidistant
 */
export function drawAxes(c, theme, x, y, w, h, knots) {
  let xt, yt;
  if (knots) {
    xt = quantileTicks(knots.x, ...x.domain(), 6).map((t) => ({ pos: x(t.t), text: tickLabel(t.value) }));
    yt = quantileTicks(knots.y, ...y.domain(), 6).map((t) => ({ pos: y(t.t), text: tickLabel(t.value) }));
  } else {
    const fx = x.tickFormat(6);
    const fy = y.tickFormat(6);
    xt = x.ticks(6).map((v) => ({ pos: x(v), text: fx(v) }));
    yt = y.ticks(6).map((v) => ({ pos: y(v), text: fy(v) }));
  }
  c.lineWidth = 1;
  c.strokeStyle = theme.border;
  c.globalAlpha = 0.55;
  c.beginPath();
  for (const t of xt) {
    c.moveTo(Math.round(t.pos) + 0.5, MARGIN.top);
    c.lineTo(Math.round(t.pos) + 0.5, MARGIN.top + h);
  }
  for (const t of yt) {
    c.moveTo(MARGIN.left, Math.round(t.pos) + 0.5);
    c.lineTo(MARGIN.left + w, Math.round(t.pos) + 0.5);
  }
  c.stroke();
  c.globalAlpha = 1;
  c.strokeRect(MARGIN.left + 0.5, MARGIN.top + 0.5, w - 1, h - 1);
  c.fillStyle = theme.muted;
  c.font = `10px ${theme.font}`;
  c.textAlign = "center";
  c.textBaseline = "top";
  for (const t of xt) c.fillText(t.text, t.pos, MARGIN.top + h + 5);
  c.textAlign = "right";
  c.textBaseline = "middle";
  for (const t of yt) c.fillText(t.text, MARGIN.left - 5, t.pos);
}

/** An arrowhead at (x1, y1) pointing away from (x0, y0). */
function arrowHead(c, x0, y0, x1, y1, size) {
  const a = Math.atan2(y1 - y0, x1 - x0);
  c.beginPath();
  c.moveTo(x1, y1);
  c.lineTo(x1 - size * Math.cos(a - 0.45), y1 - size * Math.sin(a - 0.45));
  c.lineTo(x1 - size * Math.cos(a + 0.45), y1 - size * Math.sin(a + 0.45));
  c.closePath();
  c.fill();
}

/**
 * Lines from the hovered point (hx, hy) to its partners' points.
 * @param {CanvasRenderingContext2D} c
 * @param {number} hx
 * @param {number} hy
 * @param {{x: number, y: number, weight: number}[]} partners
 * @param {{colour: string, dash?: number[], arrow?: "out" | "in" | null}} style out: arrow at the partner
 *   (the hovered token attends to it), in: arrow at the hovered token (the partner attends to it)
 */
export function drawEdges(c, hx, hy, partners, { colour, dash = [], arrow = null }) {
  if (!partners.length) return;
  const wmax = Math.max(...partners.map((p) => p.weight)) || 1;
  c.strokeStyle = colour;
  c.fillStyle = colour;
  c.lineCap = "round";
  c.setLineDash(dash);
  for (const p of partners) {
    const f = p.weight / wmax;
    c.globalAlpha = 0.35 + 0.65 * f;
    c.lineWidth = 0.75 + 3 * f;
    c.beginPath();
    c.moveTo(hx, hy);
    c.lineTo(p.x, p.y);
    c.stroke();
    if (arrow) {
      const len = Math.hypot(p.x - hx, p.y - hy);
      if (len > 14) {
        const back = (RADIUS + 3) / len;
        if (arrow === "out") arrowHead(c, hx, hy, p.x - (p.x - hx) * back, p.y - (p.y - hy) * back, 7 + 2 * f);
        else arrowHead(c, p.x, p.y, hx + (p.x - hx) * back, hy + (p.y - hy) * back, 7 + 2 * f);
      }
    }
  }
  c.setLineDash([]);
  c.globalAlpha = 1;
}

/**
 * A ring around a point; `main` for the hovered token, else a partner or selected token.
 * @param {CanvasRenderingContext2D} c
 */
export function ring(c, x, y, fill, stroke, main) {
  c.beginPath();
  c.arc(x, y, main ? RADIUS + 3 : RADIUS + 1.5, 0, 2 * Math.PI);
  c.fillStyle = fill;
  c.fill();
  c.strokeStyle = stroke;
  c.lineWidth = main ? 2 : 1.5;
  c.stroke();
}

/** The font of a halo label (hovered: larger and bold). */
export function haloFont(theme, main) {
  return `${main ? "700 12.5px" : "600 11px"} ${theme.font}`;
}

/**
 * Text with a background halo, its box's top-left corner at (x, y) and height h.
 * @param {CanvasRenderingContext2D} c
 */
export function haloText(c, theme, text, x, y, h, main) {
  c.font = haloFont(theme, main);
  c.textAlign = "left";
  c.textBaseline = "middle";
  c.lineJoin = "round";
  c.lineWidth = 3;
  c.strokeStyle = theme.panel;
  c.strokeText(text, x + 1, y + h / 2);
  c.fillStyle = theme.fg;
  c.fillText(text, x + 1, y + h / 2);
}

/**
 * The lasso or box being dragged.
 * @param {CanvasRenderingContext2D} c
 * @param {[number, number][]} polygon
 */
export function drawLasso(c, theme, polygon) {
  if (!polygon || polygon.length < 2) return;
  c.beginPath();
  polygon.forEach(([x, y], i) => (i ? c.lineTo(x, y) : c.moveTo(x, y)));
  c.closePath();
  c.globalAlpha = 0.12;
  c.fillStyle = theme.accent;
  c.fill();
  c.globalAlpha = 1;
  c.setLineDash([4, 3]);
  c.strokeStyle = theme.accent;
  c.lineWidth = 1.25;
  c.stroke();
  c.setLineDash([]);
}

/**
 * Every token's label rendered once into one offscreen canvas (drawImage per label is far cheaper than
 * fillText): {canvas, boxes: [x, y, w, h] per token in device px, dpr}.
 * @param {string[]} tokens
 * @param {number} dpr device px per CSS px
 * @param {number} lineHeight CSS px of a label's box
 */
export function labelAtlas(tokens, theme, dpr, lineHeight) {
  const font = `10.5px ${theme.font}`;
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = font;
  const lineH = Math.ceil(lineHeight * dpr);
  const maxW = 2048;
  const boxes = new Float32Array(4 * tokens.length);
  let x = 0;
  let y = 0;
  tokens.forEach((tok, i) => {
    const w = Math.ceil((measure.measureText(tok).width + 2) * dpr);
    if (x + w > maxW) {
      x = 0;
      y += lineH;
    }
    boxes.set([x, y, w, lineH], 4 * i);
    x += w;
  });
  const canvas = document.createElement("canvas");
  canvas.width = maxW;
  canvas.height = Math.max(1, y + lineH);
  const c = canvas.getContext("2d");
  c.scale(dpr, dpr);
  c.font = font;
  c.textBaseline = "middle";
  c.fillStyle = theme.fg;
  tokens.forEach((tok, i) => c.fillText(tok, boxes[4 * i] / dpr + 1, (boxes[4 * i + 1] + lineH / 2) / dpr));
  return { canvas, boxes, dpr };
}

/**
 * The points (special tokens as rings), dimmed outside the selection when `dim`; search matches ringed
 * in the highlight colour and selected tokens in the foreground colour.
 * @param {CanvasRenderingContext2D} c
 * @param {any} theme
 * @param {{sx: ArrayLike<number>, sy: ArrayLike<number>, m: number, kept: number[], tokenRow: Int32Array,
 *   colours: string[], special: boolean[]}} points
 * @param {{selected: Set<number>, matches: Set<number>, dim: boolean, filled?: boolean}} marks `filled`
 *   false leaves the filled points out (createPointRaster drew them)
 */
export function drawPoints(
  c,
  theme,
  { sx, sy, m, kept, tokenRow, colours, special },
  { selected, matches, dim, filled = true },
) {
  for (let r = 0; r < m; r++) {
    const tok = kept[r];
    if (!filled && !special[tok]) continue;
    c.globalAlpha = !dim || selected.has(tok) ? 1 : 0.3;
    c.beginPath();
    c.arc(sx[r], sy[r], RADIUS, 0, 2 * Math.PI);
    if (special[tok]) {
      c.strokeStyle = colours[tok] || theme.muted;
      c.lineWidth = 1.5;
      c.stroke();
    } else {
      c.fillStyle = colours[tok] || theme.muted;
      c.fill();
    }
  }
  c.globalAlpha = 1;
  for (const [set, stroke] of [
    [matches, theme.highlight],
    [selected, theme.fg],
  ]) {
    for (const tok of set) {
      const r = tokenRow[tok];
      if (r >= 0) ring(c, sx[r], sy[r], colours[tok] || theme.muted, stroke, false);
    }
  }
}

const SUB = 4; // sub-pixel positions of a point stamp per device px and axis
const SAMPLES = 8; // coverage samples per device px and axis
// the raster writes whole pixels as 32-bit words, R in the low byte: little-endian only (else canvas arcs)
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * The screen's points, rasterised in script: each filled point is an antialiased disc stamp (coverage
 * precomputed at SUB x SUB sub-pixel offsets, kept as the list of its covered pixels) blended into an
 * ImageData of the plot, put on an offscreen canvas and drawn with one drawImage. Chromium's software 2D
 * canvas rasters an antialiased arc in 3-4 µs at its commit (2 ms for 512 points, 30-40 ms for 8192, in
 * every drawn frame, none of it in the script's own paint time); this takes 0.2-0.5 ms for 512 and 4-6 ms
 * for 8192 (node, on the shared 2-core machine). Special tokens (rings) and exports still use drawPoints.
 * `draw` returns false when it cannot (no 2D context, or a big-endian machine).
 */
export function createPointRaster() {
  let stampScale = 0;
  // the covered pixels of the stamp at sub-pixel offset s: entries stampStart[s] .. stampStart[s + 1] - 1
  // of stampDx, stampDy (from the centre pixel) and stampCover (0-1)
  let stampStart = new Int32Array(0);
  let stampDx = new Int32Array(0);
  let stampDy = new Int32Array(0);
  let stampCover = new Float32Array(0);
  let reach = 0; // how far a stamp reaches from its centre pixel, in device px
  /** @type {HTMLCanvasElement | null} */
  let off = null;
  /** @type {CanvasRenderingContext2D | null} */
  let offCtx = null;
  /** @type {ImageData | null} */
  let image = null;
  let pixels = new Int32Array(0); // image.data as words (Int32: V8 keeps them small integers)
  /** @type {string[] | null} */
  let rgbOf = null; // the colour list the cached rgb belongs to
  let rgb = new Int32Array(0); // per token: r | g << 8 | b << 16
  let rgbMuted = "";

  function buildStamps(scale) {
    const r = RADIUS * scale;
    const size = 2 * Math.ceil(r + 1) + 1; // stamp side in device px
    const half = (size - 1) / 2;
    const start = [0];
    const dxs = [];
    const dys = [];
    const covers = [];
    for (let oy = 0; oy < SUB; oy++)
      for (let ox = 0; ox < SUB; ox++) {
        for (let dy = 0; dy < size; dy++)
          for (let dx = 0; dx < size; dx++) {
            let cover = 0;
            for (let qy = 0; qy < SAMPLES; qy++)
              for (let qx = 0; qx < SAMPLES; qx++) {
                // the sample's offset from the centre, half + 0.5 + (o + 0.5) / SUB stamp px from the corner
                const px = dx + (qx + 0.5) / SAMPLES - (half + 0.5 + (ox + 0.5) / SUB);
                const py = dy + (qy + 0.5) / SAMPLES - (half + 0.5 + (oy + 0.5) / SUB);
                if (px * px + py * py <= r * r) cover++;
              }
            if (cover === 0) continue;
            dxs.push(dx - half);
            dys.push(dy - half);
            covers.push(cover / (SAMPLES * SAMPLES));
          }
        start.push(dxs.length);
      }
    stampStart = Int32Array.from(start);
    stampDx = Int32Array.from(dxs);
    stampDy = Int32Array.from(dys);
    stampCover = Float32Array.from(covers);
    reach = half;
    stampScale = scale;
  }

  function colours(list, muted) {
    if (rgbOf === list && rgbMuted === muted) return;
    rgbOf = list;
    rgbMuted = muted;
    rgb = new Int32Array(list.length);
    const cache = new Map();
    for (let t = 0; t < list.length; t++) {
      const css = list[t] || muted;
      let c = cache.get(css);
      if (c === undefined) {
        const parsed = parseColor(css);
        const v = parsed ? parsed.rgb() : { r: 128, g: 128, b: 128 };
        const byte = (x) => Math.max(0, Math.min(255, Math.round(x)));
        c = byte(v.r) | (byte(v.g) << 8) | (byte(v.b) << 16);
        cache.set(css, c);
      }
      rgb[t] = c;
    }
  }

  return {
    /**
     * Draw the filled (non-special) points into `c` (whose transform is `scale` device px per CSS px),
     * clipped to the plot box {x0, y0, x1, y1} in CSS px; `alpha(tok)` is each point's opacity.
     * @param {CanvasRenderingContext2D} c
     */
    draw(c, theme, scale, box, { sx, sy, m, kept, colours: list, special }, alpha) {
      if (!LITTLE_ENDIAN) return false;
      if (stampScale !== scale) buildStamps(scale);
      colours(list, theme.muted);
      const X0 = Math.floor(box.x0 * scale);
      const Y0 = Math.floor(box.y0 * scale);
      const W = Math.max(1, Math.ceil(box.x1 * scale) - X0);
      const H = Math.max(1, Math.ceil(box.y1 * scale) - Y0);
      if (!off || off.width !== W || off.height !== H) {
        off = document.createElement("canvas");
        off.width = W;
        off.height = H;
        offCtx = off.getContext("2d");
        if (!offCtx || typeof offCtx.createImageData !== "function") return false;
        image = offCtx.createImageData(W, H);
        pixels = new Int32Array(image.data.buffer, image.data.byteOffset, W * H);
      }
      if (!offCtx || !image) return false;
      pixels.fill(0);
      const rgbCount = rgb.length;
      for (let r = 0; r < m; r++) {
        const tok = kept[r];
        if (special[tok]) continue;
        const a0 = alpha(tok);
        // the point's centre in buffer px; its pixel and sub-pixel offset
        const cx = sx[r] * scale - X0 - 0.5;
        const cy = sy[r] * scale - Y0 - 0.5;
        if (!(cx > -reach - 1 && cy > -reach - 1 && cx < W + reach && cy < H + reach)) continue;
        const ix = Math.floor(cx);
        const iy = Math.floor(cy);
        const ox = Math.min(SUB - 1, Math.floor((cx - ix) * SUB));
        const oy = Math.min(SUB - 1, Math.floor((cy - iy) * SUB));
        const s = oy * SUB + ox;
        const inside = ix >= reach && iy >= reach && ix + reach < W && iy + reach < H;
        const colour = tok < rgbCount ? rgb[tok] : 0x808080;
        const cr = colour & 255;
        const cg = (colour >>> 8) & 255;
        const cb = (colour >>> 16) & 255;
        const opaque = colour | 0xff000000;
        for (let j = stampStart[s], end = stampStart[s + 1]; j < end; j++) {
          const x = ix + stampDx[j];
          const y = iy + stampDy[j];
          if (!inside && (x < 0 || x >= W || y < 0 || y >= H)) continue;
          const o = y * W + x;
          const a = a0 * stampCover[j];
          if (a >= 1) {
            pixels[o] = opaque;
            continue;
          }
          if (a <= 0) continue;
          const d = pixels[o];
          const dA = d >>> 24;
          if (dA === 0) {
            pixels[o] = colour | (((255 * a + 0.5) | 0) << 24);
            continue;
          }
          // source over destination, unpremultiplied (+ 0.5 | 0: rounded, all terms are positive)
          const da = dA * (1 - a) * (1 / 255);
          const oa = a + da;
          const k = 1 / oa;
          const red = ((cr * a + (d & 255) * da) * k + 0.5) | 0;
          const green = ((cg * a + ((d >>> 8) & 255) * da) * k + 0.5) | 0;
          const blue = ((cb * a + ((d >>> 16) & 255) * da) * k + 0.5) | 0;
          pixels[o] = red | (green << 8) | (blue << 16) | (((255 * oa + 0.5) | 0) << 24);
        }
      }
      offCtx.putImageData(image, 0, 0);
      c.save();
      c.setTransform(1, 0, 0, 1, 0, 0);
      c.drawImage(off, X0, Y0);
      c.restore();
      return true;
    },
  };
}

/**
 * A mark around each outlier pinned to the plot's edge: a square outline, so that a pinned point is not
 * read as lying there.
 * @param {CanvasRenderingContext2D} c
 * @param {number[]} rows
 */
export function drawPinned(c, theme, rows, sx, sy) {
  if (!rows.length) return;
  c.strokeStyle = theme.fg;
  c.lineWidth = 1.25;
  c.setLineDash([2, 2]);
  for (const r of rows) c.strokeRect(sx[r] - RADIUS - 2, sy[r] - RADIUS - 2, 2 * RADIUS + 4, 2 * RADIUS + 4);
  c.setLineDash([]);
}
