import { test } from "node:test";
import assert from "node:assert/strict";
import { nearestPoint, gridHit, pointsInPolygon, boxPolygon } from "./hittest.js";
import { tokenRows } from "../../lib/tokens.js";
import { gridGeometry, layerTop, binColumns, zoomRange, kvGroup, columnsNote } from "../../paint/grid-geometry.js";

test("tokenRows and nearestPoint", () => {
  assert.deepEqual(Array.from(tokenRows([1, 2, 4], 5)), [-1, 0, 1, -1, 2]);
  const sx = Float32Array.from([0, 10, 20]);
  const sy = Float32Array.from([0, 0, 0]);
  assert.equal(nearestPoint({ sx, sy, m: 3 }, [11, 2], 5), 1);
  assert.equal(nearestPoint({ sx, sy, m: 3 }, [50, 50], 5), -1);
  assert.equal(nearestPoint({ sx, sy, m: 2 }, [20, 0], 5), -1, "only the first m points count");
});

test("gridHit inverts gridGeometry cell by cell, answers head labels, misses gaps", () => {
  const g = gridGeometry(6, 12, 200, 420);
  assert.equal(g.L, 6);
  assert.ok(g.cellW > 1.5 && g.cellW < 2);
  for (const [l, h, j] of [
    [0, 0, 0],
    [2, 5, 17],
    [5, 11, 199],
  ]) {
    const x = g.labelW + (j + 0.5) * g.cellW;
    const y = layerTop(g, l) + (h + 0.5) * g.cellH;
    assert.deepEqual(gridHit(g, x, y), { layer: l, head: h, token: j });
  }
  assert.deepEqual(gridHit(g, 10, layerTop(g, 3) + 2.5 * g.cellH), { layer: 3, head: 2, token: -1 }, "head label");
  assert.equal(gridHit(g, g.labelW + 1, layerTop(g, 1) - 2), null, "layer title band");
  assert.equal(gridHit(g, g.labelW + 201 * g.cellW, layerTop(g, 0) + 1), null);
  assert.ok(g.height >= layerTop(g, 5) + g.blockH);
  const big = gridGeometry(12, 12, 512, 420);
  assert.equal(big.cellH, 8, "every head row is tall enough for its label");
});

test("a zoomed grid maps columns to the tokens of its range; a long text is binned", () => {
  const g = gridGeometry(2, 4, 1000, 500, { t0: 300, t1: 340 });
  assert.equal(g.count, 40);
  assert.ok(!g.binned);
  const x = g.labelW + 7.5 * g.cellW;
  assert.deepEqual(gridHit(g, x, layerTop(g, 1) + 0.5 * g.cellH), { layer: 1, head: 0, token: 307 });
  const long = gridGeometry(2, 4, 8192, 500);
  assert.ok(long.binned && long.columns <= 500 - long.labelW);
});

test("pointsInPolygon: a lasso and a box select the points inside", () => {
  const sx = [1, 5, 9, 5];
  const sy = [1, 5, 9, 1];
  const triangle = [
    [0, 0],
    [10, 0],
    [10, 8],
  ];
  assert.deepEqual(pointsInPolygon(sx, sy, 4, triangle), [3]);
  assert.deepEqual(pointsInPolygon(sx, sy, 4, boxPolygon([0, 0], [6, 6])), [0, 1, 3]);
  assert.deepEqual(pointsInPolygon(sx, sy, 4, boxPolygon([6, 6], [0, 0])), [0, 1, 3]);
  assert.deepEqual(
    pointsInPolygon(sx, sy, 4, [
      [0, 0],
      [1, 1],
    ]),
    [],
  );
});

test("binColumns takes each bin's maximum; zoomRange keeps the pointer's token in place", () => {
  const values = [1, 5, 2, 0, 3, 9, 4, 4, 7, 1, 0, 2]; // 2 rows x 6 tokens
  assert.deepEqual(Array.from(binColumns(values, { rows: 2, n: 6, t0: 0, t1: 6, columns: 3 })), [5, 2, 9, 4, 7, 2]);
  assert.deepEqual(
    Array.from(binColumns(values, { rows: 2, n: 6, t0: 1, t1: 5, columns: 4 })),
    [5, 2, 0, 3, 4, 7, 1, 0],
  );
  assert.deepEqual(zoomRange(0, 100, 100, 0.5, 50), [25, 75]);
  assert.deepEqual(zoomRange(0, 100, 100, 0.5, 0), [0, 50]);
  assert.deepEqual(zoomRange(25, 75, 100, 4, 50), [0, 100]);
  assert.equal(kvGroup(5, 12, 4), 1); // 4 query heads per key/value head: heads 4-7 share group 1
  assert.equal(kvGroup(11, 12, 4), 2);
  assert.equal(kvGroup(5, 12, 1), -1);
});

test("the tooltip stays inside the part of the widget the user sees", async () => {
  const { tooltipAt } = await import("../tooltip.js");
  const box = { left: 100, top: 50, right: 900, bottom: 700 };
  const size = { w: 300, h: 120 };
  const inside = (at) =>
    at.x >= box.left && at.x + size.w <= box.right && at.y >= box.top && at.y + size.h <= box.bottom;
  for (const pointer of [
    { x: 500, y: 300 },
    { x: 890, y: 690 }, // the bottom right corner: flipped up and left
    { x: 105, y: 55 },
    { x: 700, y: 650 }, // the text strip at the bottom of the visible part
  ]) {
    assert.ok(inside(tooltipAt(pointer, size, box)), JSON.stringify(pointer));
  }
  assert.deepEqual(tooltipAt({ x: 500, y: 300 }, size, box), { x: 514, y: 314 }, "below right of the pointer");
});

test("every head row is at least 8 px, labelled; a grid taller than its box scrolls, a huge one thins", () => {
  // MiniLM (6 x 12 heads) in a 465 px box: rows of 8 px, every one labelled, the box scrolls (issue 52)
  const g = gridGeometry(6, 12, 271, 420, { height: 465 });
  assert.equal(g.cellH, 8);
  assert.equal(g.labelEvery, 1);
  assert.ok(g.height > 465, `height ${g.height}: taller than the box`);
  const roomy = gridGeometry(6, 12, 271, 420, { height: 1200 });
  assert.ok(roomy.height <= 1200 && roomy.cellH > 8 && roomy.cellH <= 14, `rows grow to fill: ${roomy.cellH}`);
  // 80 layers of 64 heads: 8 px rows would make a canvas no browser draws; thinner rows, a label every few
  const huge = gridGeometry(80, 64, 512, 420, { height: 465 });
  assert.ok(huge.height <= 12000 && huge.cellH < 8 && huge.labelEvery * huge.cellH >= 8, JSON.stringify(huge));
});

test("the columns' note says in plain words what a column holds", () => {
  const binned = gridGeometry(6, 12, 271, 200);
  assert.match(columnsNote(binned), /^271 tokens in 146 pixel columns: a column shows the largest of 1 or 2 /);
  assert.equal(columnsNote(gridGeometry(2, 2, 20, 600)), "", "a token a column: nothing to say");
  const zoomed = gridGeometry(2, 2, 1000, 600, { t0: 100, t1: 140 });
  assert.match(columnsNote(zoomed), /^tokens 100–139 of 1000 \(double-click shows all\)$/);
});
