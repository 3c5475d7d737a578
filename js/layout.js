// Pure layout maths of the widget: no DOM, no canvas. Everything here is unit-tested in layout.test.js.

import { bisectRight, quantileSorted, ticks as niceTicks } from "d3-array";

// ---------------------------------------------------------------------------------------------------------
// Quantile-equidistant rescaling (thesis, Appendix A.3), the mirror of headsne_widget/rescaling.py:
//   levels = linspace(0, 1, k);  q = quantile(x, levels) (linear interpolation, numpy's default);
//   equal quantiles (ties) merge into one knot at their mean level, levels renormalised to [0, 1]
//   (so phi stays invertible); a constant axis maps to 0.5;
//   phi(x) = interp(x, q, levels) clamped to [0, 1]; phi^-1(t) = interp(t, levels, q) for tick labels.

/** The knots (q strictly increasing, levels in [0, 1]) of the per-axis rescaling map phi, from unsorted `values`. */
export function quantileKnots(values, k = 100) {
  if (!(Number.isInteger(k) && k >= 2)) throw new RangeError(`quantile_k must be an integer >= 2, got ${k}`);
  if (values.length === 0) throw new RangeError("quantile rescaling needs at least one value");
  const sorted = Float64Array.from(values).sort();
  if (!Number.isFinite(sorted[0]) || !Number.isFinite(sorted[sorted.length - 1])) {
    throw new RangeError("quantile rescaling needs finite values");
  }
  const q = [];
  const levels = [];
  for (let i = 0; i < k; ) {
    const value = quantileSorted(sorted, i / (k - 1));
    let sum = 0, count = 0;
    for (; i < k && quantileSorted(sorted, i / (k - 1)) === value; i++, count++) sum += i / (k - 1);
    q.push(value);
    levels.push(sum / count);
  }
  if (q.length === 1) return { q: Float64Array.of(q[0]), levels: Float64Array.of(0.5) };
  const lo = levels[0], span = levels[levels.length - 1] - lo;
  return { q: Float64Array.from(q), levels: Float64Array.from(levels, (l) => (l - lo) / span) };
}

/** Piecewise-linear interpolation with numpy.interp semantics (xs strictly increasing, clamped ends). */
function interp(x, xs, ys) {
  const k = xs.length;
  if (x <= xs[0]) return ys[0];
  if (x >= xs[k - 1]) return ys[k - 1];
  const j = bisectRight(xs, x); // xs[j - 1] <= x < xs[j]
  const i = j - 1;
  return ys[i] + ((x - xs[i]) / (xs[j] - xs[i])) * (ys[j] - ys[i]);
}

/** phi(x): an original value -> its rescaled position in [0, 1]. */
export function quantileForward({ q, levels }, x) {
  return interp(x, q, levels);
}

/** phi^-1(t): the original value at rescaled position t in [0, 1] (for tick labels). */
export function quantileInverse({ q, levels }, t) {
  return q.length === 1 ? q[0] : interp(t, levels, q);
}

/** Rescale one axis: phi applied to every value (the whole-array mirror of the Python function). */
export function quantileRescale(values, k = 100) {
  const knots = quantileKnots(values, k);
  return Float64Array.from(values, (x) => quantileForward(knots, x));
}

/**
 * Rescale the interleaved (m, 2) embedding `data` column by column into `out` (same layout), reusing
 * `out` to avoid per-frame allocation. Returns the per-axis knots for tick labels.
 */
export function quantileRescaleFrame(data, m, k, out) {
  const xs = new Float64Array(m);
  const ys = new Float64Array(m);
  for (let r = 0; r < m; r++) {
    xs[r] = data[2 * r];
    ys[r] = data[2 * r + 1];
  }
  const kx = quantileKnots(xs, k);
  const ky = quantileKnots(ys, k);
  for (let r = 0; r < m; r++) {
    out[2 * r] = quantileForward(kx, xs[r]);
    out[2 * r + 1] = quantileForward(ky, ys[r]);
  }
  return { x: kx, y: ky };
}

/**
 * Equidistant ticks in rescaled space inside the visible domain [t0, t1], labelled with the original
 * values phi^-1(t): [{t, value}].
 */
export function quantileTicks(knots, t0, t1, count = 6) {
  const lo = Math.max(0, Math.min(t0, t1));
  const hi = Math.min(1, Math.max(t0, t1));
  if (!(hi > lo)) return [];
  return niceTicks(lo, hi, count).map((t) => ({ t, value: quantileInverse(knots, t) }));
}

// ---------------------------------------------------------------------------------------------------------
// Frame autoscaling

/** Bounding box [xmin, xmax, ymin, ymax] of the first m rows of interleaved (m, 2) data; null if none finite. */
export function frameExtent(data, m) {
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (let r = 0; r < m; r++) {
    const x = data[2 * r], y = data[2 * r + 1];
    if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
    if (x < x0) x0 = x;
    if (x > x1) x1 = x;
    if (y < y0) y0 = y;
    if (y > y1) y1 = y;
  }
  return x0 <= x1 ? [x0, x1, y0, y1] : null;
}

/**
 * Data domains {x: [a, b], y: [c, d]} that show `extent` in a width x height plot with equal units per
 * pixel on both axes (distances in a t-SNE map are isotropic) and a relative margin `pad`.
 */
export function fitDomains(extent, width, height, pad = 0.06) {
  const [x0, x1, y0, y1] = extent;
  const cx = (x0 + x1) / 2;
  const cy = (y0 + y1) / 2;
  const eps = 1e-9 * Math.max(1, Math.abs(cx), Math.abs(cy));
  const w = Math.max(width, 1);
  const h = Math.max(height, 1);
  // data units per pixel so that both spans fit, the same on both axes
  const upp = Math.max(Math.max(x1 - x0, eps) / w, Math.max(y1 - y0, eps) / h) * (1 + 2 * pad);
  return { x: [cx - (upp * w) / 2, cx + (upp * w) / 2], y: [cy - (upp * h) / 2, cy + (upp * h) / 2] };
}

/**
 * One animation step of the displayed domains towards the target: exponential approach in log-span and
 * linear in centre, so that a t-SNE run that grows by orders of magnitude zooms out smoothly.
 * Returns [next, settled].
 */
export function easeDomains(current, target, alpha = 0.25) {
  if (!current) return [target, true];
  const step = (c, t) => {
    const cc = (c[0] + c[1]) / 2, tc = (t[0] + t[1]) / 2;
    const cs = c[1] - c[0], ts = t[1] - t[0];
    const s = Math.exp(Math.log(cs) + alpha * (Math.log(ts) - Math.log(cs)));
    const m = cc + alpha * (tc - cc);
    return [m - s / 2, m + s / 2];
  };
  const x = step(current.x, target.x);
  const y = step(current.y, target.y);
  const close = (a, b) => {
    const span = b[1] - b[0];
    return Math.abs(a[0] - b[0]) < 1e-3 * span && Math.abs(a[1] - b[1]) < 1e-3 * span;
  };
  const settled = close(x, target.x) && close(y, target.y);
  return settled ? [target, true] : [{ x, y }, false];
}

// ---------------------------------------------------------------------------------------------------------
// Edges, hit testing, text context

/**
 * The strongest attention partners of `token` from the `edges` trait (indices/weights (n, K)), at most
 * `k`, strongest first, leaving out the token itself, non-positive weights and tokens without a point
 * (tokenRow[j] < 0). Returns [{token, weight}].
 */
export function topEdges(edges, token, k, tokenRow = null) {
  if (!edges || token < 0 || token >= edges.n || k <= 0) return [];
  const out = [];
  const base = token * edges.k;
  for (let c = 0; c < edges.k; c++) {
    const j = edges.indices[base + c];
    const w = edges.weights[base + c];
    if (j === token || j < 0 || j >= edges.n || !(w > 0)) continue;
    if (tokenRow && !(tokenRow[j] >= 0)) continue;
    out.push({ token: j, weight: w });
  }
  out.sort((a, b) => b.weight - a.weight);
  return out.slice(0, k);
}

/** Index of the point (screen coordinates sx, sy of m points) nearest to (px, py) within maxDist; -1 if none. */
export function nearestPoint(sx, sy, m, px, py, maxDist) {
  let best = -1;
  let bestD = maxDist * maxDist;
  for (let r = 0; r < m; r++) {
    const dx = sx[r] - px, dy = sy[r] - py;
    const d = dx * dx + dy * dy;
    if (d <= bestD) {
      bestD = d;
      best = r;
    }
  }
  return best;
}

/** Map token index -> frame row (-1 when the token has no point) from the `kept` trait. */
export function tokenRows(kept, n) {
  const rows = new Int32Array(Math.max(n, 0)).fill(-1);
  (kept || []).forEach((t, r) => {
    if (t >= 0 && t < n) rows[t] = r;
  });
  return rows;
}

/**
 * Pieces of the text strip: [{text, token}] where token is the token index of a span or -1 for the text
 * between tokens. Built from `text` + `offsets`; tokens without an offset (special tokens) become their
 * own pieces at their place in the sequence. Without offsets: tokens joined by spaces.
 */
export function textSegments(text, tokens, offsets) {
  const pieces = [];
  if (!offsets || offsets.length !== tokens.length) {
    tokens.forEach((tok, i) => {
      if (i > 0) pieces.push({ text: " ", token: -1 });
      pieces.push({ text: String(tok), token: i });
    });
    return pieces;
  }
  let cursor = 0;
  tokens.forEach((tok, i) => {
    const span = offsets[i];
    if (!span || span[1] <= span[0]) {
      pieces.push({ text: String(tok), token: i, special: true });
      return;
    }
    const start = Math.max(span[0], cursor);
    const end = Math.max(span[1], start);
    if (start > cursor) pieces.push({ text: text.slice(cursor, start), token: -1 });
    pieces.push({ text: end > start ? text.slice(start, end) : String(tok), token: i });
    cursor = end;
  });
  if (cursor < text.length) pieces.push({ text: text.slice(cursor), token: -1 });
  return pieces;
}

/**
 * The hovered token with its surrounding words: {before, token, after}, about `words` words each side,
 * cut at word boundaries and marked with an ellipsis where the text goes on.
 */
export function tokenContext(text, tokens, offsets, i, words = 6) {
  const span = offsets && offsets.length === tokens.length ? offsets[i] : null;
  if (!span || span[1] <= span[0] || !text) {
    const lo = Math.max(0, i - words), hi = Math.min(tokens.length, i + words + 1);
    return {
      before: (lo > 0 ? "… " : "") + tokens.slice(lo, i).join(" ") + (i > lo ? " " : ""),
      token: String(tokens[i] ?? ""),
      after: (hi > i + 1 ? " " : "") + tokens.slice(i + 1, hi).join(" ") + (hi < tokens.length ? " …" : ""),
    };
  }
  const [s, e] = span;
  const before = text.slice(Math.max(0, s - 200), s).match(new RegExp(`(?:\\S+\\s*){0,${words}}$`))[0];
  const after = text.slice(e, e + 200).match(new RegExp(`^(?:\\s*\\S+){0,${words}}`))[0];
  return {
    before: (before.length < s ? "…" : "") + before,
    token: text.slice(s, e),
    after: after + (after.length < text.length - e ? "…" : ""),
  };
}

// ---------------------------------------------------------------------------------------------------------
// Maximum-attention grid geometry (CSS pixels)

/**
 * Geometry of the stacked per-layer heat maps: a layer title band of `gap` px above each h x n block,
 * `labelW` px of head labels on the left. Cells are cellW x cellH (cellW may be fractional).
 */
export function gridGeometry(L, H, n, width, { labelW = 46, rightPad = 8, gap = 18, maxCellW = 28 } = {}) {
  const rows = L * H;
  const cellH = Math.max(4, Math.min(10, Math.floor(440 / Math.max(rows, 1))));
  const cellW = Math.min(maxCellW, Math.max(0.25, (width - labelW - rightPad) / Math.max(n, 1)));
  const blockH = H * cellH;
  const height = L * (gap + blockH) + 4;
  return { L, H, n, labelW, cellW, cellH, gap, blockH, height, width: labelW + n * cellW + rightPad };
}

/** Top (CSS px) of layer l's heat map in the grid canvas. */
export function layerTop(g, l) {
  return l * (g.gap + g.blockH) + g.gap;
}

/** {layer, head, token} under the point (x, y) in CSS px, or null outside every cell. */
export function gridHit(g, x, y) {
  const col = Math.floor((x - g.labelW) / g.cellW);
  if (x < g.labelW || col < 0 || col >= g.n) return null;
  const l = Math.floor(y / (g.gap + g.blockH));
  if (l < 0 || l >= g.L) return null;
  const inBlock = y - layerTop(g, l);
  if (inBlock < 0 || inBlock >= g.blockH) return null;
  return { layer: l, head: Math.floor(inBlock / g.cellH), token: col };
}

// ---------------------------------------------------------------------------------------------------------
// Recorded frames

/** Index of the recorded frame to show: the newest while following, else the scrubbed one (clamped). */
export function shownFrameIndex(count, scrub, following) {
  if (count === 0) return -1;
  if (following || scrub == null) return count - 1;
  return Math.max(0, Math.min(count - 1, scrub));
}
