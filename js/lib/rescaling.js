// Quantile-equidistant rescaling, the mirror of headsne_widget/rescaling.py (pure maths, no DOM).

import { bisectRight, quantileSorted, ticks as niceTicks } from "d3-array";

// Thesis, Appendix A.3:
//   levels = linspace(0, 1, k);  q = quantile(x, levels) (linear interpolation, numpy's default);
//   equal quantiles (ties) merge into one knot at their mean level, levels renormalised to [0, 1]
//   (so phi stays invertible); a constant axis maps to 0.5;
//   phi(x) = interp(x, q, levels) clamped to [0, 1]; phi^-1(t) = interp(t, levels, q) for tick labels.

/**
 * @typedef {{q: Float64Array, levels: Float64Array}} Knots
 */

/** The most knots per axis (Python's MAX_QUANTILE_K): each costs a quantile of the frame, every frame. */
export const MAX_QUANTILE_K = 1000;

/**
 * The knots (q strictly increasing, levels in [0, 1]) of the per-axis rescaling map phi, from unsorted `values`.
 * @param {ArrayLike<number>} values
 * @param {number} [k]
 * @returns {Knots}
 */
export function quantileKnots(values, k = 100) {
  if (!(Number.isInteger(k) && k >= 2 && k <= MAX_QUANTILE_K)) {
    throw new RangeError(`quantile_k must be an integer in [2, ${MAX_QUANTILE_K}], got ${k}`);
  }
  if (values.length === 0) throw new RangeError("quantile rescaling needs at least one value");
  const sorted = Float64Array.from(values).sort();
  if (!Number.isFinite(sorted[0]) || !Number.isFinite(sorted[sorted.length - 1])) {
    throw new RangeError("quantile rescaling needs finite values");
  }
  const q = [];
  const levels = [];
  for (let i = 0; i < k;) {
    const value = /** @type {number} */ (quantileSorted(sorted, i / (k - 1)));
    let sum = 0,
      count = 0;
    for (; i < k && quantileSorted(sorted, i / (k - 1)) === value; i++, count++) sum += i / (k - 1);
    q.push(value);
    levels.push(sum / count);
  }
  if (q.length === 1) return { q: Float64Array.of(q[0]), levels: Float64Array.of(0.5) };
  const lo = levels[0],
    span = levels[levels.length - 1] - lo;
  return { q: Float64Array.from(q), levels: Float64Array.from(levels, (l) => (l - lo) / span) };
}

/**
 * Piecewise-linear interpolation with numpy.interp semantics (xs strictly increasing, clamped ends).
 * @param {number} x
 * @param {ArrayLike<number>} xs
 * @param {ArrayLike<number>} ys
 */
function interp(x, xs, ys) {
  const k = xs.length;
  if (x <= xs[0]) return ys[0];
  if (x >= xs[k - 1]) return ys[k - 1];
  const j = bisectRight(xs, x); // xs[j - 1] <= x < xs[j]
  const i = j - 1;
  return ys[i] + ((x - xs[i]) / (xs[j] - xs[i])) * (ys[j] - ys[i]);
}

/** phi(x): an original value -> its rescaled position in [0, 1]. */
/** @param {Knots} knots @param {number} x */
export function quantileForward({ q, levels }, x) {
  return interp(x, q, levels);
}

/** phi^-1(t): the original value at rescaled position t in [0, 1] (for tick labels). */
/** @param {Knots} knots @param {number} t */
export function quantileInverse({ q, levels }, t) {
  return q.length === 1 ? q[0] : interp(t, levels, q);
}

/**
 * Rescale one axis: phi applied to every value (the whole-array mirror of the Python function).
 * @param {ArrayLike<number>} values
 * @param {number} [k]
 */
export function quantileRescale(values, k = 100) {
  const knots = quantileKnots(values, k);
  return Float64Array.from(values, (x) => quantileForward(knots, x));
}

/**
 * Rescale the interleaved (m, 2) embedding `data` column by column into `out` (same layout), reusing
 * `out` to avoid per-frame allocation. Returns the per-axis knots for tick labels.
 * @param {ArrayLike<number>} data
 * @param {number} m
 * @param {number} k
 * @param {Float32Array} out
 * @returns {{x: Knots, y: Knots}}
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
 * @param {Knots} knots
 * @param {number} t0
 * @param {number} t1
 * @param {number} [count]
 */
export function quantileTicks(knots, t0, t1, count = 6) {
  const lo = Math.max(0, Math.min(t0, t1));
  const hi = Math.min(1, Math.max(t0, t1));
  if (!(hi > lo)) return [];
  return niceTicks(lo, hi, count).map((t) => ({ t, value: quantileInverse(knots, t) }));
}
