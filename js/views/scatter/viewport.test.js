import { test } from "node:test";
import assert from "node:assert/strict";
import { frameExtent, fitDomains, approachDomains } from "./viewport.js";
import { close } from "../../test-helpers/testing.js";

test("frameExtent skips non-finite rows and returns null for none", () => {
  const data = new Float32Array([1, 2, NaN, 5, -3, 4, 0, -1]);
  assert.deepEqual(frameExtent(data, 4), [-3, 1, -1, 4]);
  assert.deepEqual(frameExtent(data, 1), [1, 1, 2, 2]);
  assert.equal(frameExtent(new Float32Array([NaN, 1]), 1), null);
  assert.equal(frameExtent(new Float32Array(0), 0), null);
});

test("fitDomains contains the extent with equal units per pixel and handles a single point", () => {
  const d = fitDomains([-1e-4, 3e-4, 0, 1e-4], 600, 300, 0.05);
  assert.ok(d.x[0] < -1e-4 && d.x[1] > 3e-4 && d.y[0] < 0 && d.y[1] > 1e-4);
  close((d.x[1] - d.x[0]) / 600, (d.y[1] - d.y[0]) / 300, 1e-18);
  const p = fitDomains([2, 2, 5, 5], 100, 100);
  assert.ok(p.x[1] > p.x[0] && p.y[1] > p.y[0]);
  close((p.x[0] + p.x[1]) / 2, 2);
  close((p.y[0] + p.y[1]) / 2, 5);
});

test("approachDomains approaches the target smoothly and settles on it", () => {
  const target = { x: [-50, 50], y: [-30, 30] };
  let cur = { x: [-1e-4, 1e-4], y: [-1e-4, 1e-4] };
  let settled = false;
  let steps = 0;
  let prevSpan = cur.x[1] - cur.x[0];
  while (!settled && steps < 1000) {
    [cur, settled] = approachDomains(cur, target, 0.25);
    const span = cur.x[1] - cur.x[0];
    assert.ok(span >= prevSpan, "zooms out monotonically");
    prevSpan = span;
    steps++;
  }
  assert.ok(settled);
  assert.ok(steps > 5 && steps < 200, `took ${steps} steps`);
  assert.deepEqual(cur, target);
  assert.deepEqual(approachDomains(null, target), [target, true]);
});

test("what the view zooms in on drifts to its middle, never into a corner", () => {
  // a cloud gathering into a point off the view's middle (a run's start under early exaggeration)
  let cur = { x: [-1, 1], y: [-1, 1] };
  const target = { x: [0.6 - 1e-10, 0.6 + 1e-10], y: [0.5 - 1e-10, 0.5 + 1e-10] };
  let offset = 1;
  for (let k = 0; k < 300; k++) {
    [cur] = approachDomains(cur, target, 0.12);
    const span = cur.x[1] - cur.x[0];
    const now = Math.max(Math.abs((cur.x[0] + cur.x[1]) / 2 - 0.6), Math.abs((cur.y[0] + cur.y[1]) / 2 - 0.5)) / span;
    assert.ok(now <= 0.3 + 1e-9 && now <= offset + 1e-12, `step ${k}: the point is ${now} of the view from its middle`);
    offset = now;
  }
});
