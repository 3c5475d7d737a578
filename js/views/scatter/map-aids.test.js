// The map's reading aids (js/views/scatter/map-aids.js): density contours from the points as drawn, and where the
// clusters' labels go; and the grid's column headers (js/paint/grid-paint.js headerStep), always whole.

import { test } from "node:test";
import assert from "node:assert/strict";
import { clusterPlaces, createMapAids, densityContours, withAids } from "./map-aids.js";
import { headerStep } from "../../paint/grid-paint.js";
import { gridGeometry } from "../../paint/grid-geometry.js";

/** Two blobs of 200 points each (a fixed pseudo-random scatter) round (100, 100) and (300, 200). */
function twoBlobs() {
  const m = 400;
  const sx = new Float32Array(m);
  const sy = new Float32Array(m);
  let seed = 7;
  const rand = () => ((seed = (seed * 16807) % 2147483647) / 2147483647 - 0.5) * 40;
  for (let r = 0; r < m; r++) {
    sx[r] = (r < 200 ? 100 : 300) + rand();
    sy[r] = (r < 200 ? 100 : 200) + rand();
  }
  return { sx, sy, m };
}

test("the density contours ring the dense parts of the map, in the canvas's px", () => {
  const points = twoBlobs();
  const plot = { x0: 20, y0: 10, x1: 420, y1: 310 };
  const levels = densityContours(
    { ...points, sx: points.sx.map((x) => x + 20), sy: points.sy.map((y) => y + 10) },
    plot,
  );
  assert.ok(levels.length >= 3, `${levels.length} levels`);
  const top = levels[levels.length - 1];
  const xs = top.coordinates.flat(3).filter((_, i) => i % 2 === 0);
  const ys = top.coordinates.flat(3).filter((_, i) => i % 2 === 1);
  // the densest level's rings lie round the blobs' centres (120, 110) and (320, 210), not in the empty middle
  const near = (x, y) => Math.min(Math.hypot(x - 120, y - 110), Math.hypot(x - 320, y - 210));
  assert.ok(
    xs.every((x, i) => near(x, ys[i]) < 60),
    "the densest ring round a blob",
  );
  assert.deepEqual(densityContours({ sx: [1], sy: [1], m: 1 }, plot), []);
  const aids = createMapAids();
  const a = aids.contours(points, plot);
  assert.equal(aids.contours(points, plot), a, "the same points on screen: the same contours, not computed again");
  assert.notEqual(aids.contours({ ...points, sx: points.sx.map((x) => x + 5) }, plot), a);
});

test("a cluster's label goes on its member nearest the members' centre, largest first", () => {
  const points = twoBlobs();
  const members = { data: Int32Array.from({ length: 400 }, (_, r) => (r < 200 ? 1 : r < 390 ? 0 : -1)), shape: [400] };
  const places = clusterPlaces({ labels: ["east", "west"], members }, points);
  assert.deepEqual(
    places.map((p) => [p.label, p.size]),
    [
      ["west", 200],
      ["east", 190],
    ],
  );
  const west = places[0];
  assert.ok(Math.hypot(west.x - 100, west.y - 100) < 10, "on a point near the blob's centre");
  const row = [...points.sx.keys()].find((r) => points.sx[r] === west.x && points.sy[r] === west.y);
  assert.ok(row !== undefined && row < 200, "a point of its own cluster");
  assert.deepEqual(
    clusterPlaces({ labels: ["a"], members: { data: new Int32Array(3), shape: [3] } }, points),
    [],
    "members of another frame",
  );
  assert.deepEqual(clusterPlaces(null, points), []);
});

test("the grid's column headers are whole: one every few columns where they are wider than one", () => {
  const ctx = /** @type {any} */ ({ measureText: (/** @type {string} */ t) => ({ width: 6 * t.length }) });
  const geom = gridGeometry(2, 2, 40, 46 + 8 + 40 * 16, { t0: 0, t1: 40 });
  assert.equal(geom.cellW, 16);
  assert.equal(headerStep(ctx, /** @type {any} */ ({ geom, header: (t) => `${t + 1}` })), 1, "'40' fits 16 px");
  assert.equal(headerStep(ctx, /** @type {any} */ ({ geom, header: () => "bank" })), 2, "'bank' takes two columns");
  assert.equal(headerStep(ctx, /** @type {any} */ ({ geom, header: () => "x".repeat(12) })), 8);
});

test("the scene takes the contours and the clusters' names the state asks for, none while a run streams", () => {
  const points = twoBlobs();
  const plot = { x0: 0, y0: 0, x1: 400, y1: 300 };
  const scene = /** @type {any} */ ({ points, plot });
  const clusterOf = { data: Int32Array.from({ length: 400 }, (_, r) => (r < 200 ? 0 : 1)), shape: [400] };
  const base = /** @type {any} */ ({ state: "done", contours: false, cluster_labels: true, cluster_names: [] });
  const aids = createMapAids();
  assert.equal(withAids(scene, base, aids), scene, "nothing asked: the scene as it is");
  const both = withAids(scene, { ...base, contours: true, cluster_names: ["west", "east"], clusterOf }, aids);
  assert.ok(both.contours.length >= 3);
  assert.deepEqual(
    both.clusters.map((c) => c.label),
    ["west", "east"],
  );
  const off = withAids(scene, { ...base, cluster_labels: false, cluster_names: ["west", "east"], clusterOf }, aids);
  assert.equal(off, scene, "cluster_labels off: no names");
  const running = { ...base, state: "running", contours: true, cluster_names: ["west", "east"], clusterOf };
  assert.equal(withAids(scene, running, aids), scene, "a run streams: neither");
});

test("Python's point labels, one a token, are what the map labels the points with", async () => {
  const { readDoc } = await import("../../model/sync.js");
  const { fakeModel } = await import("../../test-helpers/fake-dom.js");
  const traits = {
    text: "a b",
    tokens: ["a", "b"],
    offsets: [
      [0, 1],
      [2, 3],
    ],
    special: [false, false],
    word: "",
  };
  assert.deepEqual(readDoc(fakeModel({ ...traits, point_labels: ["river", "money"] })).labels, ["river", "money"]);
  assert.deepEqual(readDoc(fakeModel({ ...traits, point_labels: [] })).labels, ["a", "b"]);
});

test("the token clicked last is ringed on the map, while a run streams too", () => {
  const points = twoBlobs();
  const scene = /** @type {any} */ ({ points, plot: { x0: 0, y0: 0, x1: 400, y1: 300 } });
  const rows = { kept: [], tokenRow: Int32Array.from({ length: 400 }, (_, t) => (t === 5 ? -1 : t)) };
  const s = /** @type {any} */ ({ state: "running", pinned: 7, rows });
  assert.equal(withAids(scene, s, createMapAids()).pinnedRow, 7);
  assert.equal(withAids(scene, { ...s, pinned: 5 }, createMapAids()).pinnedRow, undefined, "no point: no ring");
  assert.equal(withAids(scene, { ...s, pinned: -1 }, createMapAids()), scene);
});
