// The decomposition panel's drawing (js/views/decomposition/decomposition.js) on 2D canvases already sized and
// scaled to CSS px: the hovered token's shares (a stack and one bar per term) and the heads x tokens share map.

import { TERMS, shareLimit, shareRgb, shareText, stackShares } from "./decomposition-parts.js";

export const ROW_H = 10; // CSS px of a head row of the share map
export const LABEL_W = 34; // CSS px of the head labels left of the map

/**
 * @typedef {import("../../lib/theme.js").Theme} Theme
 * @typedef {{data: Float32Array | Int32Array, shape: number[]}} Decoded
 */

/**
 * Size `canvas` to `width` x `height` CSS px at the screen's pixel ratio, its context `c` scaled to CSS px.
 * @param {HTMLCanvasElement} canvas
 * @param {CanvasRenderingContext2D} c
 * @param {number} width
 * @param {number} height
 */
export function sizeCanvas(canvas, c, width, height) {
  const dpr = window.devicePixelRatio || 1;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
}

/**
 * The token's four shares: their stack on the left (positive up from 0, negative down), then one bar per term with
 * its value and name, on one axis.
 * @param {CanvasRenderingContext2D} c
 * @param {Theme} theme
 * @param {number[]} shares
 * @param {{width: number, height: number}} size
 */
export function paintChart(c, theme, shares, { width, height }) {
  c.fillStyle = theme.panel;
  c.fillRect(0, 0, width, height);
  const { segments, low, high } = stackShares(shares);
  const top = Math.max(high, ...shares, 0.05);
  const bottom = Math.min(low, ...shares, 0);
  const pad = 14;
  const y = (/** @type {number} */ v) => pad + ((top - v) / (top - bottom || 1)) * (height - 2 * pad - 12);
  const stackX = 30;
  const barW = 26;
  for (const seg of segments) {
    c.fillStyle = TERMS[seg.term].colour;
    c.fillRect(stackX, y(seg.y1), barW, Math.max(0.5, y(seg.y0) - y(seg.y1)));
  }
  c.font = `10px ${theme.font}`;
  c.textBaseline = "middle";
  c.textAlign = "center";
  shares.forEach((v, k) => {
    const x = stackX + barW + 24 + k * 60;
    c.fillStyle = TERMS[k].colour;
    const [a, b] = v >= 0 ? [y(v), y(0)] : [y(0), y(v)];
    c.fillRect(x, a, barW, Math.max(0.5, b - a));
    c.fillStyle = theme.fg;
    c.fillText(shareText(v), x + barW / 2, v >= 0 ? a - 6 : b + 6);
    c.fillStyle = theme.muted;
    c.fillText(TERMS[k].label, x + barW / 2, height - 7);
  });
  c.strokeStyle = theme.border;
  c.beginPath();
  c.moveTo(stackX - 6, Math.round(y(0)) + 0.5);
  c.lineTo(width - 4, Math.round(y(0)) + 0.5);
  c.stroke();
  c.fillStyle = theme.muted;
  c.textAlign = "right";
  c.fillText("0", stackX - 8, y(0));
  if (top >= 1) c.fillText("1", stackX - 8, y(1));
}

/**
 * Every head's share of each token (rows = heads, ROW_H each, after LABEL_W of labels), on a diverging scale
 * symmetric about 0; the selected head's row and the shown token's column outlined. Returns the scale's limit.
 * @param {CanvasRenderingContext2D} c
 * @param {Theme} theme
 * @param {Decoded} heads (H, n)
 * @param {{width: number, selected: number, token: number}} options
 */
export function paintHeads(c, theme, heads, { width, selected, token }) {
  const [H, n] = heads.shape;
  const height = H * ROW_H;
  c.fillStyle = theme.panel;
  c.fillRect(0, 0, width, height);
  const limit = shareLimit(heads.data);
  /** @type {[number, number, number]} */
  const base = theme.dark ? [48, 48, 48] : [247, 247, 247];
  // one pixel per cell in an offscreen image, scaled up without smoothing
  const image = document.createElement("canvas");
  image.width = Math.max(1, n);
  image.height = Math.max(1, H);
  const ic = image.getContext("2d");
  const pixels = ic?.createImageData(image.width, image.height);
  if (ic && pixels) {
    for (let i = 0; i < H * n; i++) {
      const [r, g, b] = shareRgb(heads.data[i], limit, base);
      pixels.data.set([r, g, b, 255], 4 * i);
    }
    ic.putImageData(pixels, 0, 0);
    c.imageSmoothingEnabled = false;
    c.drawImage(image, LABEL_W, 0, width - LABEL_W, height);
  }
  c.font = `9px ${theme.font}`;
  c.textAlign = "right";
  c.textBaseline = "middle";
  c.fillStyle = theme.muted;
  for (let h = 0; h < H; h++) c.fillText(`H${h}`, LABEL_W - 4, h * ROW_H + ROW_H / 2);
  if (selected >= 0 && selected < H) {
    c.strokeStyle = theme.accent;
    c.lineWidth = 1.5;
    c.strokeRect(LABEL_W + 0.75, selected * ROW_H + 0.75, width - LABEL_W - 1.5, ROW_H - 1.5);
  }
  if (token >= 0 && token < n) {
    const cellW = (width - LABEL_W) / Math.max(1, n);
    c.strokeStyle = theme.fg;
    c.lineWidth = 1;
    c.strokeRect(LABEL_W + token * cellW, 0, Math.max(1, cellW), height);
  }
  return limit;
}
