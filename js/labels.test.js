import { test } from "node:test";
import assert from "node:assert/strict";
import { placeLabels, labelPriority, labelBudget } from "./labels.js";
import { rng } from "./testing.js";

const overlap = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

test("placed labels never overlap and stay inside the bounds, even for dense points", () => {
  const random = rng(5);
  const items = Array.from({ length: 600 }, (_, key) => ({
    x: 200 + 40 * (random() - 0.5),
    y: 150 + 40 * (random() - 0.5),
    w: 10 + 40 * random(),
    h: 14,
    key,
  }));
  const bounds = { x0: 0, y0: 0, x1: 400, y1: 300 };
  const placed = placeLabels(items, bounds);
  assert.ok(placed.length > 10 && placed.length < 600, `placed ${placed.length}`);
  for (let i = 0; i < placed.length; i++) {
    const a = placed[i];
    assert.ok(a.x >= 0 && a.y >= 0 && a.x + a.w <= 400 && a.y + a.h <= 300);
    for (let j = 0; j < i; j++) assert.ok(!overlap(a, placed[j]), `labels ${a.key} and ${placed[j].key} overlap`);
  }
});

test("spread-out points (zoomed in) all get labels; the first item always wins its spot", () => {
  const items = Array.from({ length: 50 }, (_, key) => ({
    x: 20 + (key % 10) * 90,
    y: 20 + Math.floor(key / 10) * 40,
    w: 30,
    h: 12,
    key,
  }));
  assert.equal(placeLabels(items, { x0: 0, y0: 0, x1: 1000, y1: 300 }).length, 50);
  const crowded = [7, 3, 9].map((key) => ({ x: 100, y: 100, w: 60, h: 12, key }));
  assert.equal(placeLabels(crowded, { x0: 0, y0: 0, x1: 300, y1: 300 })[0].key, 7);
  assert.equal(placeLabels(crowded, { x0: 0, y0: 0, x1: 300, y1: 300 }, { max: 2 }).length, 2);
});

test("label priority: hovered, selected, partners, matches, word starts, pieces; each once", () => {
  const order = labelPriority({
    hovered: 4,
    selected: [2, 9],
    partners: [1, 2],
    matches: [6],
    tokens: [0, 1, 2, 3, 4, 5, 6, 7],
    subword: (t) => t === 0 || t === 3,
  });
  assert.deepEqual(order, [4, 2, 1, 6, 5, 7, 0, 3]);
});

test("label budget: none at 0, all at 1, growing in between", () => {
  assert.equal(labelBudget(0, 1e5, 100), 0);
  assert.equal(labelBudget(1, 1e5, 100), Infinity);
  assert.ok(labelBudget(0.3, 1e5, 100) < labelBudget(0.6, 1e5, 100));
});
