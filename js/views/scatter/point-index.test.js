import { test } from "node:test";
import assert from "node:assert/strict";
import { buildGrid, createPointIndex, nearestInGrid } from "./point-index.js";
import { nearestPoint } from "./hittest.js";
import { rng } from "../../test-helpers/testing.js";

/** m points in a w x h box, some stacked on the same pixel, some outside and one NaN. */
function cloud(m, w, h, seed) {
  const random = rng(seed);
  const sx = new Float32Array(m);
  const sy = new Float32Array(m);
  for (let r = 0; r < m; r++) {
    sx[r] = Math.round(random() * w * 4) / 4;
    sy[r] = Math.round(random() * h * 4) / 4;
  }
  sx[7] = sx[3]; // two points on one spot: the later row wins
  sy[7] = sy[3];
  sx[11] = -500;
  sy[12] = NaN;
  return { sx, sy, m };
}

test("the grid answers what a scan of every point answers, ties and misses included", () => {
  const points = cloud(4000, 600, 500, 3);
  const box = { x0: -10, y0: -10, x1: 610, y1: 510 };
  const random = rng(9);
  for (const cell of [4, 10, 16, 50]) {
    const grid = buildGrid(points, box, cell);
    const probes = [
      [points.sx[3], points.sy[3]],
      [-500, points.sy[11]],
      [2000, 2000],
    ];
    for (let k = 0; k < 400; k++) probes.push([random() * 620 - 10, random() * 520 - 10]);
    for (const at of probes) {
      for (const r of [3, 10]) {
        const want = nearestPoint(points, /** @type {[number, number]} */ (at), r);
        const at2 = /** @type {[number, number]} */ (at);
        // a point outside the box is never hit (the pointer is on the canvas), else the same row
        const expected = want >= 0 && (points.sx[want] < -10 || points.sx[want] > 610) ? -1 : want;
        assert.equal(nearestInGrid(grid, points, at2, r).row, expected, `cell ${cell} at ${at} within ${r}`);
      }
    }
  }
  assert.equal(nearestInGrid(buildGrid(points, box, 10), points, [points.sx[3], points.sy[3]], 3).row, 7);
});

test("a pointer move looks at a few points of 65536, not all of them", () => {
  const points = cloud(65536, 600, 500, 4);
  const grid = buildGrid(points, { x0: 0, y0: 0, x1: 600, y1: 500 }, 10);
  const random = rng(1);
  let most = 0;
  for (let k = 0; k < 200; k++) {
    const { visited } = nearestInGrid(grid, points, [random() * 600, random() * 500], 10);
    most = Math.max(most, visited);
  }
  // 65536 points over 300000 px^2: about 2 in 10 x 10 px, 3 x 3 cells around the pointer
  assert.ok(most < 300, `visited up to ${most} points`);
});

test("a far zoom (a box of millions of px) gets coarser cells, never millions of them", () => {
  const points = cloud(1000, 600, 500, 5);
  const grid = buildGrid(points, { x0: -1e7, y0: -1e7, x1: 1e7, y1: 1e7 }, 10);
  assert.ok(grid.cols * grid.rowsN <= (1 << 20) + 2 * grid.cols + 1, `${grid.cols} x ${grid.rowsN}`);
  assert.equal(nearestInGrid(grid, points, [points.sx[20], points.sy[20]], 0.01).row, 20);
});

test("the index is built once per drawn frame, at the first pointer move after it", () => {
  const points = cloud(1000, 600, 500, 6);
  const index = createPointIndex({ box: () => ({ x0: 0, y0: 0, x1: 600, y1: 500 }) });
  assert.equal(index.nearest(points, [points.sx[5], points.sy[5]], 10), 5);
  index.nearest(points, [1, 1], 10);
  assert.equal(index.builds, 1);
  points.sx[5] = 300;
  points.sy[5] = 250;
  index.invalidate(); // a paint moved the points
  assert.equal(index.nearest(points, [300, 250], 0.5), 5);
  assert.equal(index.builds, 2);
});
