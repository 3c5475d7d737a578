// Query-key mode in the browser: the keys (frame rows from query_rows on) are drawn as rings and the
// queries filled, whatever the backend (js/paint/scatter-paint.js isRing, js/paint/point-gl.js pointStyles); the map's
// legend row says which is which; the mode select offers the mode Python allows.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "./test-helpers/fake-dom.js";
import { encodeArray } from "./model/codecs.js";
import { TOKENS, mount as mountOn } from "./test-helpers/widget-fixture.js";
import { pointStyles } from "./paint/point-gl.js";
import { edgeEnds, isRing } from "./paint/scatter-paint.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("./widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);

test("keys are rings and queries filled in query-key mode; special tokens are rings otherwise", () => {
  const kept = [0, 1, 2, 0, 1, 2];
  const special = [true, false, false];
  const qk = { kept, special, queryRows: 3 };
  assert.deepEqual(
    kept.map((_, r) => isRing(qk, r)),
    [false, false, false, true, true, true],
  );
  assert.deepEqual(
    kept.map((_, r) => isRing({ kept, special }, r)),
    [true, false, false, true, false, false],
  );
  const rgb = new Int32Array(3);
  const { kind } = pointStyles({ ...qk, m: 6 }, rgb, { dim: false, selected: new Set() });
  assert.deepEqual(Array.from(kind), [0, 0, 0, 1, 1, 1]);
});

test("the query / key legend shows in query-key mode only, and the mode select offers it", async () => {
  const n = TOKENS.length;
  const { model, root, cleanup } = mount();
  await Promise.resolve();
  const key = root.querySelector("[data-testid=headsne-qk-key]");
  assert.equal(key.hidden, true);
  const mode = root.querySelector("[data-testid=headsne-mode]");
  assert.ok([...mode.options].some((o) => o.value === "query-key"));
  model.calls.length = 0;
  mode.value = "query-key";
  mode.dispatchEvent(new Event("change"));
  assert.deepEqual(model.calls, [["set", "mode", "query-key"], ["save_changes"]]);
  const kept = [...TOKENS.keys(), ...TOKENS.keys()];
  model.emit({
    mode: "query-key",
    query_rows: n,
    kept,
    frame: encodeArray(new Float32Array(4 * n), [2 * n, 2]),
    run_id: 2,
  });
  assert.equal(key.hidden, false);
  assert.deepEqual(
    [...key.querySelectorAll(".hs-legend-entry")].map((e) => e.dataset.style),
    ["query", "key"],
  );
  model.emit({ mode: "attention", query_rows: 0 });
  assert.equal(key.hidden, true);
  cleanup();
});

test("the map reports 2n points and n rings in query-key mode; a hovered query joins its keys, its key the queries", async () => {
  const n = TOKENS.length;
  const kept = [...TOKENS.keys(), ...TOKENS.keys()];
  const xy = Float32Array.from({ length: 4 * n }, (_, i) => (i * 7919) % 13);
  const { model, root, cleanup, clock } = mount({
    mode: "query-key",
    query_rows: n,
    kept,
    frame: encodeArray(xy, [2 * n, 2]),
  });
  await Promise.resolve();
  const canvas = root.querySelector("[data-testid=headsne-scatter]");
  clock.advance(100);
  assert.equal(canvas.dataset.points, String(2 * n));
  assert.equal(canvas.dataset.rings, String(n));
  model.emit({
    mode: "attention",
    query_rows: 0,
    kept: [...TOKENS.keys()],
    frame: encodeArray(xy.slice(0, 2 * n), [n, 2]),
  });
  await Promise.resolve();
  clock.advance(100);
  assert.equal(canvas.dataset.points, String(n));
  assert.equal(canvas.dataset.rings, "2", "the special tokens [CLS] and [SEP]");
  cleanup();
});

test("edge ends: in query-key mode the query attends to keys and the key is attended by queries", () => {
  const tokenRow = Int32Array.of(3, 4, 5); // keys: rows 3..5, queries 0..2
  const p = (token) => ({ token, weight: 1 });
  const scene = /** @type {any} */ ({
    hover: 1,
    hoverRow: 4,
    points: { tokenRow, queryRows: 3 },
    shown: { to: [p(0), p(2)], from: [p(2)], near: [] },
  });
  const ends = edgeEnds(scene);
  assert.deepEqual(ends.origin, { to: 1, from: 4, near: 1 });
  assert.deepEqual(
    ends.to.map((e) => e.row),
    [3, 5],
  );
  assert.deepEqual(
    ends.from.map((e) => e.row),
    [2],
  );
  const plain = edgeEnds({ ...scene, hoverRow: 1, points: { tokenRow: Int32Array.of(0, 1, 2) } });
  assert.deepEqual(plain.origin, { to: 1, from: 1, near: 1 });
  assert.deepEqual(
    plain.from.map((e) => e.row),
    [2],
  );
});
