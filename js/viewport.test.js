import { test } from "node:test";
import assert from "node:assert/strict";
import { frameExtent, fitDomains, easeDomains, robustExtent } from "./viewport.js";
import { close, rng } from "./testing.js";

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

test("robustExtent leaves out a few far outliers, and nothing from ordinary data", () => {
  const random = rng(11);
  const blob = Array.from({ length: 200 }, () => [random() * 10, random() * 10]);
  const plain = robustExtent(Float32Array.from(blob.flat()), 200);
  assert.equal(plain.clipped, false);
  const far = [...blob, [700, 5], [-700, 2], [5, 690], [3, -710]];
  const robust = robustExtent(Float32Array.from(far.flat()), far.length);
  assert.equal(robust.clipped, true);
  assert.ok(robust.extent[0] > -1 && robust.extent[1] < 11 && robust.extent[2] > -1 && robust.extent[3] < 11);
  const spread = [...blob, ...Array.from({ length: 40 }, (_, i) => [700 * Math.cos(i), 700 * Math.sin(i)])];
  assert.equal(robustExtent(Float32Array.from(spread.flat()), spread.length).clipped, false, "not a few");
});

test("robustExtent at 65536 rows: quantiles from a sample, the extent and the outliers from every row", () => {
  const random = rng(12);
  const m = 65536;
  const data = new Float32Array(2 * m);
  for (let i = 0; i < 2 * m; i++) data[i] = random() * 10;
  const outliers = [3, 40000, 65535]; // off the sample's stride and on it
  for (const r of outliers) data[2 * r] = 900 + r / 1000;
  data[2 * 123] = 10.25; // the blob's edge, seen by no sample: the extent still reaches it
  const robust = robustExtent(data, m);
  assert.equal(robust.clipped, true);
  assert.equal(robust.extent[1], 10.25);
  assert.ok(robust.extent[0] >= 0 && robust.extent[0] < 0.01 && robust.extent[3] < 10);
  for (let i = 0; i < 2 * m; i += 2) data[i] = i < m ? 700 * random() : random(); // half far away: not a few
  assert.equal(robustExtent(data, m).clipped, false);
});
