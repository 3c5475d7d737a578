// The KL sparkline of the run panel: the KL of the recorded frames over the iterations, thinned to what a
// line of that width shows, with a marker at the shown frame.

const SPARK_W = 110;
const SPARK_H = 24; // CSS px of the KL sparkline

/**
 * The iteration and KL ranges of the frames with a finite KL, and their number.
 * @param {{iteration: number, kl: number | null}[]} frames
 */
function klExtent(frames) {
  let [i0, i1, k0, k1, n] = [Infinity, -Infinity, Infinity, -Infinity, 0];
  for (const f of frames) {
    if (f.kl == null || !Number.isFinite(f.kl)) continue;
    n++;
    [i0, i1] = [Math.min(i0, f.iteration), Math.max(i1, f.iteration)];
    [k0, k1] = [Math.min(k0, f.kl), Math.max(k1, f.kl)];
  }
  return { i0, i1, k0, k1, n };
}

/**
 * The KL sparkline of `frames` in a `w` x `h` box: vertices (x, y interleaved) and the marker at frame
 * `shown`, or null with fewer than two finite KLs. A long run is thinned to the first, lowest, highest
 * and last point of each pixel column (what the line looks like at that width), so drawing it costs the
 * same at 100 frames and at 30000.
 * @param {{iteration: number, kl: number | null}[]} frames
 * @param {number} shown
 * @param {number} w
 * @param {number} h
 * @returns {{xy: number[], marker: [number, number] | null} | null}
 */
export function sparkLine(frames, shown, w, h) {
  const { i0, i1, k0, k1, n } = klExtent(frames);
  if (n < 2) return null;
  // the scales of d3's scaleLinear(extent, range): a flat extent maps to the range's middle
  /** @type {(a: number, b: number, r0: number, r1: number) => (v: number) => number} */
  const lin = (a, b, r0, r1) => (v) => (b > a ? r0 + ((v - a) / (b - a)) * (r1 - r0) : (r0 + r1) / 2);
  const x = lin(i0, i1, 2, w - 2);
  const y = lin(k0, k1, h - 3, 3);
  /** @type {number[]} */
  const xy = [];
  let col = NaN,
    px = 0,
    first = 0,
    top = 0,
    bottom = 0,
    last = 0;
  const close = () => {
    for (const v of [first, top, bottom, last]) if (xy[xy.length - 1] !== v || xy[xy.length - 2] !== px) xy.push(px, v);
  };
  for (const f of frames) {
    if (f.kl == null || !Number.isFinite(f.kl)) continue;
    const fx = x(f.iteration);
    const fy = y(f.kl);
    if (Math.floor(fx) !== col) {
      if (!Number.isNaN(col)) close();
      col = Math.floor(fx);
      px = fx;
      first = top = bottom = last = fy;
    } else {
      top = Math.min(top, fy);
      bottom = Math.max(bottom, fy);
      last = fy;
    }
  }
  close();
  const f = frames[shown];
  const marker =
    f && f.kl != null && Number.isFinite(f.kl) ? /** @type {[number, number]} */ ([x(f.iteration), y(f.kl)]) : null;
  return { xy, marker };
}

/**
 * Draw the KL sparkline of `frames` with a marker at frame `shown` on the canvas `spark`.
 * @param {HTMLCanvasElement} spark
 * @param {{iteration: number, kl: number | null}[]} frames
 * @param {number} shown
 * @param {import("../../lib/theme.js").Theme | null} theme
 */
export function drawSpark(spark, frames, shown, theme) {
  const dpr = window.devicePixelRatio || 1;
  if (spark.width !== SPARK_W * dpr) {
    spark.width = SPARK_W * dpr;
    spark.height = SPARK_H * dpr;
  }
  const c = /** @type {CanvasRenderingContext2D} */ (spark.getContext("2d"));
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.clearRect(0, 0, SPARK_W, SPARK_H);
  const line = sparkLine(frames, shown, SPARK_W, SPARK_H);
  if (!line || !theme) return;
  c.strokeStyle = theme.accent;
  c.lineWidth = 1.25;
  c.beginPath();
  for (let i = 0; i < line.xy.length; i += 2) {
    if (i) c.lineTo(line.xy[i], line.xy[i + 1]);
    else c.moveTo(line.xy[i], line.xy[i + 1]);
  }
  c.stroke();
  if (line.marker) {
    c.fillStyle = theme.highlight;
    c.beginPath();
    c.arc(line.marker[0], line.marker[1], 2.5, 0, 2 * Math.PI);
    c.fill();
  }
}
