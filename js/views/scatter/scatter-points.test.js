import { test } from "node:test";
import assert from "node:assert/strict";
import { ScatterPoints } from "./scatter-points.js";
import { coverExtent, fitDomains, frameExtent } from "./viewport.js";
import { FRAME_MS, rng } from "../../test-helpers/testing.js";

const PLOT = { w: 500, h: 400 };

/** Whether `domains` hold every finite point of the first m rows of `data`. */
function holds(domains, data, m) {
  const [x0, x1, y0, y1] = frameExtent(data, m);
  return domains.x[0] <= x0 && domains.x[1] >= x1 && domains.y[0] <= y0 && domains.y[1] >= y1;
}

test("coverExtent keeps domains that show everything and grows the others to hold it", () => {
  const d = { x: [-1, 1], y: [-1, 1] };
  assert.deepEqual(coverExtent(d, [-0.5, 0.5, -0.5, 0.5], 100, 100), [d, false]);
  const [grown, did] = coverExtent(d, [-0.5, 3, -0.5, 0.5], 100, 100);
  assert.ok(did && grown.x[1] > 3 && grown.x[0] <= -1 + 1e-9 && grown.y[0] <= -1 && grown.y[1] >= 1);
  const target = fitDomains([-0.5, 3, -0.5, 0.5], 100, 100);
  assert.equal(coverExtent(target, [-0.5, 3, -0.5, 0.5], 100, 100, 0.04)[1], false, "the target is covered");
});

test("the view holds every point in every display frame of a run's chaotic start, then settles on the data", () => {
  const random = rng(3);
  const m = 120;
  const base = Float32Array.from({ length: 2 * m }, () => random() - 0.5);
  const points = new ScatterPoints();
  let now = 0;
  const frames = [];
  // shrinking 10x, then collapsing, drifting, a far point out and back, then growing to a settled map
  for (let k = 0; k < 30; k++) {
    const scale = k < 10 ? 0.3 * 10 ** -k : k < 20 ? 1e-10 : 1.5 * (k - 19);
    const data = Float32Array.from(base, (v, i) => v * scale + (i % 2 ? 0.2 : -0.1) * (k < 10 ? k : 1));
    if (k === 25) data.set([40 * scale, -3], 0);
    frames.push(data);
  }
  for (const [k, data] of frames.entries()) {
    points.enqueue({ data, count: m, animate: true, tag: 1 });
    for (let f = 0; f < 4; f++) {
      now += FRAME_MS;
      points.step({ frameTime: now, now, plot: PLOT, userZoomed: false });
      points.hasDrawnPoints = true;
      assert.ok(holds(points.domains, points.cur, m), `frame ${k}, display frame ${f}: a point is outside the view`);
    }
  }
  for (let f = 0; f < 600 && points.step({ frameTime: now, now, plot: PLOT, userZoomed: false }); f++) now += FRAME_MS;
  assert.deepEqual(points.domains, points.target, "the view settles on the data");
});

test("the view zooms in smoothly: never more than ZOOM_IN of the log-span per display frame", () => {
  const m = 50;
  const wide = Float32Array.from({ length: 2 * m }, (_, i) => (i % 7) - 3);
  const points = new ScatterPoints();
  points.enqueue({ data: wide, count: m, animate: false, tag: 1 });
  points.step({ frameTime: 0, now: 0, plot: PLOT, userZoomed: false });
  points.hasDrawnPoints = true;
  points.enqueue({ data: Float32Array.from(wide, (v) => v * 1e-3), count: m, animate: false, tag: 1 });
  let span = points.domains.x[1] - points.domains.x[0];
  const ratios = [];
  for (let f = 1; f < 40; f++) {
    points.step({ frameTime: f * FRAME_MS, now: f * FRAME_MS, plot: PLOT, userZoomed: false });
    const next = points.domains.x[1] - points.domains.x[0];
    ratios.push(next / span);
    span = next;
  }
  assert.ok(Math.min(...ratios) > 0.4, `a jump in: ${Math.min(...ratios)}`);
  assert.ok(span < 0.1, "and it gets there");
});
