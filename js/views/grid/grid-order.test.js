// The grid's rows sorted by a score (js/views/grid/grid-order.js, js/views/grid/grid-bar.js): the order Python sends, the rows a
// click, a hover and the keyboard mean, and the bar's selects and the note on what the colour means.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../../test-helpers/fake-dom.js";
import { encodeArray } from "../../model/codecs.js";
import { H, L, TOKENS, clickCell, mount as mountOn } from "../../test-helpers/widget-fixture.js";
import { mapRow, rowOrder, rowsInOrder } from "./grid-order.js";
import { gridCaveat, gridMeaning, sortOptions } from "./grid-bar.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../../widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);
// layer 0 sorted: rows show heads 2, 0, 1; layer 1 in the model's order
const ORDER = encodeArray(Int32Array.from([2, 0, 1, 0, 1, 2]), [L, H]);

test("rowOrder maps rows to heads and back, and refuses what is no permutation", () => {
  const order = rowOrder({ data: [2, 0, 1, 0, 1, 2], shape: [2, 3] }, 2, 3);
  assert.equal(order.sorted, true);
  assert.deepEqual(order.layers, [
    [2, 0, 1],
    [0, 1, 2],
  ]);
  assert.deepEqual(
    [0, 1, 2].map((k) => order.headAt(0, k)),
    [2, 0, 1],
  );
  assert.deepEqual(
    [0, 1, 2].map((h) => order.rowOf(0, h)),
    [1, 2, 0],
  );
  assert.deepEqual(mapRow(order, { layer: 0, head: 2, token: 4 }, "toRow"), { layer: 0, head: 0, token: 4 });
  for (const bad of [null, { data: [0, 0, 1, 0, 1, 2], shape: [2, 3] }, { data: [0, 1, 2], shape: [1, 3] }]) {
    const identity = rowOrder(bad, 2, 3);
    assert.equal(identity.sorted, false);
    assert.deepEqual(identity.layers, [
      [0, 1, 2],
      [0, 1, 2],
    ]);
  }
  const values = Float32Array.from({ length: 2 * 3 * 2 }, (_, i) => i);
  assert.deepEqual(
    Array.from(rowsInOrder(values, order, { L: 2, H: 3, n: 2 })),
    [4, 5, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11],
  );
  assert.equal(rowsInOrder(values, rowOrder(null, 2, 3), { L: 2, H: 3, n: 2 }), values);
});

test("a click on a sorted row selects the head that row shows", async () => {
  const { model, el, root, cleanup } = mount({ head_order: ORDER, sort_heads: "sink", score_names: ["sink"] });
  await Promise.resolve();
  const canvas = root.querySelector("[data-testid=headsne-grid]");
  assert.equal(
    canvas.dataset.order,
    JSON.stringify([
      [2, 0, 1],
      [0, 1, 2],
    ]),
  );
  model.calls.length = 0;
  clickCell(el, 0, 0, 1); // the first row of layer 0: head 2
  assert.deepEqual(model.calls, [["set", "layer", 0], ["set", "head", 2], ["save_changes"]]);
  model.calls.length = 0;
  clickCell(el, 1, 0, 1); // layer 1 is in the model's order
  assert.deepEqual(model.calls, [["set", "layer", 1], ["set", "head", 0], ["save_changes"]]);
  cleanup();
});

test("the rows follow head_order when Python changes it, and the keyboard moves over the rows shown", async () => {
  const { model, root, cleanup } = mount({ layer: 0, head: 0 });
  await Promise.resolve();
  const canvas = root.querySelector("[data-testid=headsne-grid]");
  assert.equal(
    canvas.dataset.order,
    JSON.stringify([
      [0, 1, 2],
      [0, 1, 2],
    ]),
  );
  model.emit({ head_order: ORDER });
  assert.equal(
    canvas.dataset.order,
    JSON.stringify([
      [2, 0, 1],
      [0, 1, 2],
    ]),
  );
  model.calls.length = 0;
  canvas.focus();
  const key = (k) => canvas.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true }));
  key("ArrowUp"); // head 0 is row 1 of layer 0: up is row 0, head 2
  key("Enter");
  assert.deepEqual(model.calls, [["set", "layer", 0], ["set", "head", 2], ["save_changes"]]);
  model.emit({ head: 2 });
  model.calls.length = 0;
  key("ArrowDown");
  key("ArrowDown");
  key("Enter"); // rows 1, 2: heads 0, 1
  assert.deepEqual(model.calls, [["set", "layer", 0], ["set", "head", 1], ["save_changes"]]);
  cleanup();
});

test("the bar writes sort_heads and grid_norm, and the grid drawn follows grid_norm", async () => {
  const n = TOKENS.length;
  const above = encodeArray(new Float32Array(L * H * n).fill(0.25), [L, H, n]);
  const { model, root, cleanup } = mount({
    score_names: ["sink", "previous"],
    sort_heads: "",
    grid_norm: "raw",
    max_attention_above_uniform: above,
  });
  await Promise.resolve();
  const sort = root.querySelector("[data-testid=headsne-sort-heads]");
  assert.deepEqual(
    [...sort.options].map((o) => o.value),
    ["", "sink", "previous"],
  );
  model.calls.length = 0;
  sort.value = "previous";
  sort.dispatchEvent(new Event("change"));
  assert.deepEqual(model.calls, [["set", "sort_heads", "previous"], ["save_changes"]]);
  const norm = root.querySelector("[data-testid=headsne-grid-norm]");
  const note = root.querySelector("[data-testid=headsne-grid-note]");
  const canvas = root.querySelector("[data-testid=headsne-grid]");
  assert.equal(canvas.dataset.norm, "raw");
  assert.match(note.textContent, /max attention/);
  model.calls.length = 0;
  norm.value = "above_uniform";
  norm.dispatchEvent(new Event("change"));
  assert.deepEqual(model.calls, [["set", "grid_norm", "above_uniform"], ["save_changes"]]);
  model.emit({ grid_norm: "above_uniform" }); // Python's echo
  assert.equal(canvas.dataset.norm, "above_uniform");
  assert.match(note.textContent, /above uniform/);
  assert.equal(norm.value, "above_uniform");
  cleanup();
});

test("the colour's meaning names each grid, and the sort offers the model's order first", () => {
  assert.match(gridMeaning("raw"), /largest attention any query/);
  assert.match(gridMeaning("above_uniform"), /0 = no query attends/);
  assert.deepEqual(sortOptions(["sink"]), [
    ["", "model order"],
    ["sink", "sink"],
  ]);
  assert.deepEqual(sortOptions(["sink"], "sink"), sortOptions(["sink"]));
  assert.deepEqual(sortOptions(["sink"], "det"), [
    ["", "model order"],
    ["sink", "sink"],
    ["det", "relation det"],
  ]);
});

test("in value-weighted mode the grid's note says plainly that it shows the raw weights", () => {
  assert.equal(gridCaveat("attention", "raw"), "");
  assert.match(gridCaveat("norm", "raw"), /value-weighted; this grid is the raw attention weights/);
  assert.match(gridCaveat("norm", "above_uniform"), /raw attention weights/);
  assert.equal(gridCaveat("norm", "norm"), "", "a grid of the mode's own says nothing more");
});
