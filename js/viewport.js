// Frame autoscaling of the scatter: the data domains to show and their animation (pure maths).

/** Bounding box [xmin, xmax, ymin, ymax] of the first m rows of interleaved (m, 2) data; null if none finite. */
/**
 * @param {ArrayLike<number>} data
 * @param {number} m
 * @returns {[number, number, number, number] | null}
 */
export function frameExtent(data, m) {
  let x0 = Infinity,
    x1 = -Infinity,
    y0 = Infinity,
    y1 = -Infinity;
  for (let r = 0; r < m; r++) {
    const x = data[2 * r],
      y = data[2 * r + 1];
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
/**
 * @param {number[]} extent [xmin, xmax, ymin, ymax]
 * @param {number} width
 * @param {number} height
 * @param {number} [pad]
 * @returns {{x: number[], y: number[]}}
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
/**
 * @param {{x: number[], y: number[]} | null} current
 * @param {{x: number[], y: number[]}} target
 * @param {number} [alpha]
 * @returns {[{x: number[], y: number[]}, boolean]}
 */
export function easeDomains(current, target, alpha = 0.25) {
  if (!current) return [target, true];
  /** @type {(c: number[], t: number[]) => number[]} */
  const step = (c, t) => {
    const cc = (c[0] + c[1]) / 2,
      tc = (t[0] + t[1]) / 2;
    const cs = c[1] - c[0],
      ts = t[1] - t[0];
    const s = Math.exp(Math.log(cs) + alpha * (Math.log(ts) - Math.log(cs)));
    const m = cc + alpha * (tc - cc);
    return [m - s / 2, m + s / 2];
  };
  const x = step(current.x, target.x);
  const y = step(current.y, target.y);
  const close = (/** @type {number[]} */ a, /** @type {number[]} */ b) => {
    const span = b[1] - b[0];
    return Math.abs(a[0] - b[0]) < 1e-3 * span && Math.abs(a[1] - b[1]) < 1e-3 * span;
  };
  const settled = close(x, target.x) && close(y, target.y);
  return settled ? [target, true] : [{ x, y }, false];
}

// Above this many rows the core box's quantiles come from an evenly strided sample of about this many
// (sorting 2 x 65536 values took 10-25 ms a frame; the 2% quantiles of 8192 rows are within 0.2% of them)
const QUANTILE_SAMPLE = 8192;

/**
 * The finite points of every `step`-th of the first m rows of interleaved (m, 2) data, as x and y lists.
 * @param {ArrayLike<number>} data
 * @param {number} m
 * @param {number} step
 */
function finitePoints(data, m, step) {
  /** @type {number[]} */
  const xs = [];
  /** @type {number[]} */
  const ys = [];
  for (let r = 0; r < m; r += step) {
    if (!Number.isFinite(data[2 * r]) || !Number.isFinite(data[2 * r + 1])) continue;
    xs.push(data[2 * r]);
    ys.push(data[2 * r + 1]);
  }
  return { xs, ys };
}

/**
 * The core box [x0, x1, y0, y1] of the points: the central 1 - 2 * tail quantiles on each axis, widened
 * by half their span each side.
 * @param {number[]} xs
 * @param {number[]} ys
 * @param {number} tail
 */
function coreBox(xs, ys, tail) {
  const core = [];
  for (const values of [xs, ys]) {
    const a = Float64Array.from(values).sort();
    const at = (/** @type {number} */ p) => a[Math.min(a.length - 1, Math.max(0, Math.round(p * (a.length - 1))))];
    const [lo, hi] = [at(tail), at(1 - tail)];
    const w = Math.max(hi - lo, 1e-12);
    core.push(lo - w / 2, hi + w / 2);
  }
  return core;
}

/**
 * The finite rows of the first m rows of `data` outside `box` [x0, x1, y0, y1], the finite rows, and the
 * extent of those inside.
 * @param {ArrayLike<number>} data
 * @param {number} m
 * @param {number[]} box
 */
function splitByBox(data, m, [x0, x1, y0, y1]) {
  let outside = 0;
  let finite = 0;
  const ext = [Infinity, -Infinity, Infinity, -Infinity];
  for (let r = 0; r < m; r++) {
    const x = data[2 * r];
    const y = data[2 * r + 1];
    if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
    finite++;
    if (x < x0 || x > x1 || y < y0 || y > y1) {
      outside++;
      continue;
    }
    ext[0] = Math.min(ext[0], x);
    ext[1] = Math.max(ext[1], x);
    ext[2] = Math.min(ext[2], y);
    ext[3] = Math.max(ext[3], y);
  }
  return { outside, finite, extent: ext[0] <= ext[1] ? ext : null };
}

/**
 * The extent to autoscale to, robust to a few far outliers: when at most `share` of the points lie
 * beyond the core box (the central 1 - 2 * tail quantiles, widened by half their span each side) and the
 * full extent is over `ratio` times the core's on an axis, the extent of the points inside the core (the
 * others are pinned to the plot's edge and marked); else the full extent. Returns {extent, clipped}.
 * @param {ArrayLike<number>} data
 * @param {number} m
 * @param {{tail?: number, ratio?: number, share?: number}} [options]
 */
export function robustExtent(data, m, { tail = 0.02, ratio = 4, share = 0.05 } = {}) {
  const full = frameExtent(data, m);
  if (!full || m < 20) return { extent: full, clipped: false };
  const { xs, ys } = finitePoints(data, m, Math.max(1, Math.floor(m / QUANTILE_SAMPLE)));
  const core = coreBox(xs, ys, tail);
  const far = full[1] - full[0] > ratio * (core[1] - core[0]) || full[3] - full[2] > ratio * (core[3] - core[2]);
  const { outside, finite, extent } = splitByBox(data, m, core);
  if (!far || outside === 0 || outside > share * finite || !extent) return { extent: full, clipped: false };
  return { extent, clipped: true };
}
