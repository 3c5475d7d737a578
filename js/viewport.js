// Frame autoscaling of the scatter: the data domains to show and their animation (pure maths).

/** Bounding box [xmin, xmax, ymin, ymax] of the first m rows of interleaved (m, 2) data; null if none finite. */
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
  const close = (a, b) => {
    const span = b[1] - b[0];
    return Math.abs(a[0] - b[0]) < 1e-3 * span && Math.abs(a[1] - b[1]) < 1e-3 * span;
  };
  const settled = close(x, target.x) && close(y, target.y);
  return settled ? [target, true] : [{ x, y }, false];
}

/**
 * The extent to autoscale to, robust to a few far outliers: when at most `share` of the points lie
 * beyond the core box (the central 1 - 2 * tail quantiles, widened by half their span each side) and the
 * full extent is over `ratio` times the core's on an axis, the extent of the points inside the core (the
 * others are pinned to the plot's edge and marked); else the full extent. Returns {extent, clipped}.
 */
export function robustExtent(data, m, { tail = 0.02, ratio = 4, share = 0.05 } = {}) {
  const full = frameExtent(data, m);
  if (!full || m < 20) return { extent: full, clipped: false };
  const xs = [];
  const ys = [];
  for (let r = 0; r < m; r++) {
    if (Number.isFinite(data[2 * r]) && Number.isFinite(data[2 * r + 1])) {
      xs.push(data[2 * r]);
      ys.push(data[2 * r + 1]);
    }
  }
  const sorted = (a) => Float64Array.from(a).sort();
  const [sxs, sys] = [sorted(xs), sorted(ys)];
  const at = (a, p) => a[Math.min(a.length - 1, Math.max(0, Math.round(p * (a.length - 1))))];
  const [x0, x1, y0, y1] = [at(sxs, tail), at(sxs, 1 - tail), at(sys, tail), at(sys, 1 - tail)];
  const [wx, wy] = [Math.max(x1 - x0, 1e-12), Math.max(y1 - y0, 1e-12)];
  const core = [x0 - wx / 2, x1 + wx / 2, y0 - wy / 2, y1 + wy / 2];
  const far = full[1] - full[0] > ratio * (core[1] - core[0]) || full[3] - full[2] > ratio * (core[3] - core[2]);
  const inside = new Float32Array(2 * xs.length);
  let k = 0;
  for (let i = 0; i < xs.length; i++) {
    if (xs[i] >= core[0] && xs[i] <= core[1] && ys[i] >= core[2] && ys[i] <= core[3]) {
      inside[2 * k] = xs[i];
      inside[2 * k + 1] = ys[i];
      k++;
    }
  }
  const outside = xs.length - k;
  if (!far || outside === 0 || outside > share * xs.length) return { extent: full, clipped: false };
  return { extent: frameExtent(inside, k), clipped: true };
}
