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
 * One animation step of the displayed domains towards the target, zooming in log-span (a run that shrinks
 * or grows by orders of magnitude is followed smoothly) while the target's offset from the middle of the view,
 * in view widths, shrinks by (1 - alpha): what the view zooms in on drifts to its middle and never into a
 * corner (a centre moving linearly while the span shrinks geometrically left a collapsing cloud at the edge).
 * Returns [next, settled].
 * @param {{x: number[], y: number[]} | null} current
 * @param {{x: number[], y: number[]}} target
 * @param {number} [alpha]
 * @returns {[{x: number[], y: number[]}, boolean]}
 */
export function approachDomains(current, target, alpha = 0.12) {
  if (!current) return [target, true];
  /** @type {(c: number[], t: number[]) => number[]} */
  const step = (c, t) => {
    const cc = (c[0] + c[1]) / 2,
      tc = (t[0] + t[1]) / 2;
    const cs = c[1] - c[0],
      ts = t[1] - t[0];
    const s = Math.exp(Math.log(cs) + alpha * (Math.log(ts) - Math.log(cs)));
    const m = tc + (1 - alpha) * (cc - tc) * (s / cs);
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

/**
 * `domains` grown, when they must, to show every point of `extent` [xmin, xmax, ymin, ymax] with the
 * relative margin `pad` in a width x height plot (equal units per pixel on both axes, as fitDomains):
 * the box of both, fitted; `domains` themselves when they already show everything. Returns [domains,
 * grown]. The view zooms out as fast as the points spread (none ever leaves the plot, none is pinned to
 * its edge) and in only as fast as approachDomains takes it.
 * @param {{x: number[], y: number[]}} domains
 * @param {number[] | null} extent
 * @param {number} width
 * @param {number} height
 * @param {number} [pad]
 * @returns {[{x: number[], y: number[]}, boolean]}
 */
export function coverExtent(domains, extent, width, height, pad = 0.06) {
  if (!extent) return [domains, false];
  const [x0, x1, y0, y1] = extent;
  const px = pad * Math.max(x1 - x0, 0) + 1e-12 * Math.max(1, Math.abs(x0), Math.abs(x1));
  const py = pad * Math.max(y1 - y0, 0) + 1e-12 * Math.max(1, Math.abs(y0), Math.abs(y1));
  const { x, y } = domains;
  if (x[0] <= x0 - px && x[1] >= x1 + px && y[0] <= y0 - py && y[1] >= y1 + py) return [domains, false];
  const box = [Math.min(x[0], x0 - px), Math.max(x[1], x1 + px), Math.min(y[0], y0 - py), Math.max(y[1], y1 + py)];
  return [fitDomains(box, width, height, 0), true];
}
