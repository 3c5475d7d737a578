// Wiring of the grid view (js/views/grid/grid.js) against a fake model: a click selects a head in one write (with a
// pending hover), ctrl + wheel zooms the token axis, and resting on a row reports it where the mode's P pays.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../../test-helpers/fake-dom.js";
import { encodeArray } from "../../model/codecs.js";
import { H, L, TOKENS, clickCell, gridEvent, longTraits, mount as mountOn } from "../../test-helpers/widget-fixture.js";
import { DOUBLE_CLICK_MS } from "./grid.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../../widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);

test("a grid click writes layer and head in one save_changes", async () => {
  const { model, el, cleanup } = mount();
  await Promise.resolve();
  model.calls.length = 0;
  clickCell(el, 1, 2, 3);
  assert.deepEqual(model.calls, [["set", "layer", 1], ["set", "head", 2], ["save_changes"]]);
  cleanup();
});

test("a grid click right after a hover sends the hover with layer and head, in one message", async () => {
  // the host keeps one update per model in flight: a hover written on its own just before the click would
  // hold the click's write back until the kernel answered it
  const { model, el, cleanup, clock } = mount();
  await Promise.resolve();
  model.calls.length = 0;
  gridEvent(el, "mousemove", 1, 2, 3);
  assert.deepEqual(model.calls, [], "a hover is written at the end of its 50 ms window, not at once");
  clickCell(el, 1, 2, 3);
  assert.deepEqual(model.calls, [["set", "hovered", 3], ["set", "layer", 1], ["set", "head", 2], ["save_changes"]]);
  clock.advance(80);
  assert.equal(model.calls.filter(([what]) => what === "save_changes").length, 1, "the hover is not sent again");
  cleanup();
});

test("ctrl + wheel zooms the grid's token axis and double-click resets it", () => {
  const n = 40;
  const grid = Float32Array.from({ length: L * H * n }, (_, i) => (i % 5) / 5);
  const big = mount({
    tokens: Array.from({ length: n }, (_, i) => `t${i}`),
    offsets: [],
    special: new Array(n).fill(false),
    max_attention: encodeArray(grid, [L, H, n]),
    kept: [],
    frame: null,
  });
  const canvas = big.root.querySelector("[data-testid=headsne-grid]");
  assert.equal(canvas.dataset.tokenEnd, String(n));
  const y = Number(canvas.dataset.gap) + 1;
  for (let k = 0; k < 3; k++) {
    canvas.dispatchEvent(
      new WheelEvent("wheel", { deltaY: -100, ctrlKey: true, clientX: 100, clientY: y, bubbles: true }),
    );
  }
  const span = Number(canvas.dataset.tokenEnd) - Number(canvas.dataset.tokenStart);
  assert.ok(span < n / 1.5, `zoomed to ${span} tokens`);
  canvas.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
  assert.equal(canvas.dataset.tokenStart, "0");
  assert.equal(canvas.dataset.tokenEnd, String(n));
  big.cleanup();
});

test("a double-click on the zoomed grid resets the zoom and selects nothing; a click there selects after the pause", async () => {
  const n = 40;
  const grid = Float32Array.from({ length: L * H * n }, (_, i) => (i % 5) / 5);
  const { model, root, cleanup, clock } = mount({
    tokens: Array.from({ length: n }, (_, i) => `t${i}`),
    offsets: [],
    special: new Array(n).fill(false),
    max_attention: encodeArray(grid, [L, H, n]),
    kept: [],
    frame: null,
  });
  await Promise.resolve();
  const canvas = root.querySelector("[data-testid=headsne-grid]");
  const y = Number(canvas.dataset.gap) + 1;
  canvas.dispatchEvent(
    new WheelEvent("wheel", { deltaY: -100, ctrlKey: true, clientX: 100, clientY: y, bubbles: true }),
  );
  assert.notEqual(canvas.dataset.tokenEnd, String(n), "zoomed");
  model.calls.length = 0;
  // a double-click as the browser sends it: click (detail 1), click (detail 2), dblclick
  const at = { clientX: 100, clientY: y + 2 * Number(canvas.dataset.cellH), bubbles: true };
  canvas.dispatchEvent(new MouseEvent("click", { ...at, detail: 1 }));
  clock.advance(120);
  canvas.dispatchEvent(new MouseEvent("click", { ...at, detail: 2 }));
  canvas.dispatchEvent(new MouseEvent("dblclick", { ...at, detail: 2 }));
  clock.advance(1000);
  assert.equal(canvas.dataset.tokenStart, "0");
  assert.equal(canvas.dataset.tokenEnd, String(n));
  assert.deepEqual(model.calls, [], "nothing was selected");
  // zoomed again, a single click selects its head once the pause is over
  canvas.dispatchEvent(
    new WheelEvent("wheel", { deltaY: -100, ctrlKey: true, clientX: 100, clientY: y, bubbles: true }),
  );
  canvas.dispatchEvent(new MouseEvent("click", { ...at, detail: 1 }));
  assert.deepEqual(model.calls, []);
  clock.advance(DOUBLE_CLICK_MS + 1);
  assert.deepEqual(model.calls, [["set", "layer", 0], ["set", "head", 2], ["save_changes"]]);
  cleanup();
});

test("resting on a grid row writes hovered_head where the mode's P pays; sweeping or the selected head writes nothing", async () => {
  const rest = (el, clock, moves) => {
    for (const [layer, head] of moves) {
      gridEvent(el, "mousemove", layer, head, 2);
      clock.advance(40);
    }
    clock.advance(160);
  };
  const written = (model) => model.calls.filter(([, name]) => name === "hovered_head").map(([, , value]) => value);
  // the protocol's SOURCES: a head matrix's P from 2048 tokens, a source of points' from 256 until it turns sparse
  for (const [mode, n, expected] of [
    ["attention", 2048, [[1, 2]]],
    ["attention", 512, []],
    ["attention", TOKENS.length, []],
    ["head-output", 512, [[1, 2]]],
    ["head-output", 256, [[1, 2]]],
    ["head-output", 255, []],
    ["head-output", 4096, []],
    ["hidden", 512, [[1, 2]]],
    ["query-key", 2048, []],
  ]) {
    const { model, el, cleanup, clock } = mount({ mode, ...(n === TOKENS.length ? {} : longTraits(n)) });
    await Promise.resolve();
    rest(el, clock, [
      [1, 0],
      [0, 1],
      [1, 1],
      [1, 2],
    ]); // 40 ms on each row, then rests on (1, 2)
    const label = `${mode}, ${n} tokens`;
    assert.deepEqual(written(model), expected, label);
    rest(el, clock, [[0, 0]]); // the selected head
    assert.deepEqual(written(model), expected, `${label}, the selected head`);
    rest(el, clock, [[0, 2]]); // another head of the selected layer: the same P in hidden mode (layer only)
    const sameLayer = mode === "hidden" ? [] : expected.length ? [[0, 2]] : [];
    assert.deepEqual(written(model), [...expected, ...sameLayer], `${label}, the selected layer`);
    cleanup();
  }
});
