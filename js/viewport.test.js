import { test } from "node:test";
import assert from "node:assert/strict";
import { frameExtent, fitDomains, easeDomains } from "./viewport.js";
import { close } from "./testing.js";

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

test("easeDomains approaches the target smoothly and settles on it", () => {
  const target = { x: [-50, 50], y: [-30, 30] };
  let cur = { x: [-1e-4, 1e-4], y: [-1e-4, 1e-4] };
  let settled = false;
  let steps = 0;
  let prevSpan = cur.x[1] - cur.x[0];
  while (!settled && steps < 1000) {
    [cur, settled] = easeDomains(cur, target, 0.25);
    const span = cur.x[1] - cur.x[0];
    assert.ok(span >= prevSpan, "zooms out monotonically");
    prevSpan = span;
    steps++;
  }
  assert.ok(settled);
  assert.ok(steps > 5 && steps < 200, `took ${steps} steps`);
  assert.deepEqual(cur, target);
  assert.deepEqual(easeDomains(null, target), [target, true]);
});
