// The atlas's thumbnails (js/views/heads/atlas-thumb.js, js/views/heads/atlas.js) show the structure of every head: a few far tokens do not set the
// scale (the rest spread over most of the thumbnail, the far ones drawn on the edge as rings), tokens on one
// spot are one stacked mark, and a t-SNE that never left 1e-13 is spread as one of size 10.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../../test-helpers/fake-dom.js";
import { encodeArray } from "../../model/codecs.js";
import { TOKENS, mount } from "../../test-helpers/widget-fixture.js";
import { paintThumb, thumbMarks } from "./atlas-thumb.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../../widget.js")).default;
});

const SIZE = 92;

/** 97 tokens on a 10 x 10 lattice of [0, 1]^2 (some missing) and 3 far away. */
function withOutliers() {
  const data = [];
  for (let i = 0; i < 97; i++) data.push((i % 10) / 9, Math.floor(i / 10) / 9);
  data.push(1000, 1000, -800, 5, 3, 900);
  return Float32Array.from(data);
}

/** The span of a set of numbers. @param {number[]} v */
const span = (v) => Math.max(...v) - Math.min(...v);

test("three far tokens leave the other 97 spread over most of the thumbnail, the far ones on its edge", () => {
  const data = withOutliers();
  const { marks, outside } = thumbMarks(data, 100, SIZE);
  assert.equal(outside, 3);
  const inside = marks.filter((k) => !k.outside);
  assert.equal(
    inside.reduce((a, k) => a + k.rows.length, 0),
    97,
  );
  assert.ok(span(inside.map((k) => k.x)) > 0.75 * SIZE, `x spans ${span(inside.map((k) => k.x))} px`);
  assert.ok(span(inside.map((k) => k.y)) > 0.75 * SIZE, `y spans ${span(inside.map((k) => k.y))} px`);
  assert.equal(new Set(inside.map((k) => `${k.x},${k.y}`)).size, 97, "every lattice token a mark of its own");
  for (const k of marks.filter((k) => k.outside)) {
    assert.ok(k.x >= 0 && k.x <= SIZE && k.y >= 0 && k.y <= SIZE, "an off-scale token is drawn inside");
    assert.ok(Math.min(k.x, k.y, SIZE - k.x, SIZE - k.y) <= 5, "on the edge");
  }
});

test("a thumbnail with no far tokens shows them all, on its full extent", () => {
  const data = Float32Array.from({ length: 40 }, (_, i) => (i % 2 ? Math.sin(i) : Math.cos(i)));
  const { marks, outside } = thumbMarks(data, 20, SIZE);
  assert.equal(outside, 0);
  assert.ok(Math.max(span(marks.map((k) => k.x)), span(marks.map((k) => k.y))) > 0.8 * SIZE);
});

test("tokens on one spot are one stacked mark; a spread of 1e-13 is spread like one of 10", () => {
  const data = [];
  for (let i = 0; i < 30; i++) data.push(0.5e-13, 0.5e-13); // 30 tokens on one spot
  for (let i = 0; i < 20; i++) data.push((i % 5) * 1e-13, Math.floor(i / 5) * 1e-13);
  const tiny = thumbMarks(Float32Array.from(data), 50, SIZE);
  assert.equal(tiny.stacked, 30);
  const stack = tiny.marks.find((k) => k.rows.length === 30);
  assert.ok(stack && stack.rows.every((r) => r < 30));
  assert.ok(span(tiny.marks.map((k) => k.x)) > 0.75 * SIZE, "the tiny spread fills the thumbnail");
  const large = thumbMarks(
    Float32Array.from(data, (v) => v * 1e14),
    50,
    SIZE,
  );
  assert.deepEqual(
    large.marks.map((k) => k.rows.length),
    tiny.marks.map((k) => k.rows.length),
  );
  // every token on one spot: one mark in the middle
  const one = thumbMarks(new Float32Array(20).fill(3), 10, SIZE);
  assert.deepEqual(one, {
    marks: [{ x: SIZE / 2, y: SIZE / 2, rows: [...Array(10).keys()], outside: 0 > 1 }],
    outside: 0,
    stacked: 10,
  });
});

/** A 2D context that records the calls that draw. */
function recorder() {
  const calls = [];
  const record =
    (name) =>
    (...args) =>
      calls.push([name, ...args]);
  return {
    calls,
    context: new Proxy(
      {},
      {
        get: (target, name) => (name in target ? target[name] : record(String(name))),
        set: (target, name, value) => ((target[name] = value), true),
      },
    ),
  };
}

test("the painted thumbnail draws singles as squares, a stack as a ringed disc with its count, far tokens as rings", () => {
  const data = [...withOutliers()];
  for (let i = 0; i < 20; i++) data.push(0.5, 0.5); // a stack of 20 in the middle
  const m = data.length / 2;
  const { calls, context } = recorder();
  const theme = { panel: "#fff", muted: "#777", fg: "#111", font: "sans-serif" };
  const drawn = paintThumb(/** @type {any} */ (context), {
    data: Float32Array.from(data),
    m,
    dpr: 1,
    kept: [...Array(m).keys()],
    colours: [],
    theme: /** @type {any} */ (theme),
  });
  assert.equal(drawn.outside, 3);
  assert.equal(drawn.stacked, 20);
  const squares = calls.filter((c) => c[0] === "fillRect").length - 1; // less the background
  const arcs = calls.filter((c) => c[0] === "arc");
  assert.equal(squares, drawn.marks.filter((k) => k.rows.length === 1 && !k.outside).length);
  const far = drawn.marks.filter((k) => k.outside);
  assert.equal(
    far.reduce((a, k) => a + k.rows.length, 0),
    3,
  );
  assert.equal(arcs.length, 1 + far.length, "one stacked disc and a ring for each spot of far tokens");
  assert.ok(arcs[0][3] > 3, "the stack is larger than a token");
  assert.ok(calls.some((c) => c[0] === "fillText" && c[1] === `×${drawn.stacked}`));
});

test("a thumbnail's button tells how many tokens are off its scale and the largest stack", () => {
  const n = TOKENS.length;
  // heads 0 and 1: spread; head 2: every token on one spot
  const atlas = Float32Array.of(
    0,
    0,
    1,
    0,
    0,
    1,
    1,
    1,
    2,
    2,
    0,
    0,
    1,
    0,
    2,
    0,
    3,
    1,
    4,
    2,
    ...new Array(2 * n).fill(7),
  );
  const { el } = mount(widget, {
    atlas: encodeArray(atlas, [3, n, 2]),
    atlas_kl: encodeArray(Float32Array.of(1, 2, 3), [3]),
    atlas_heads: [0, 1, 2],
    atlas_layer: 0,
    atlas_state: "done",
    atlas_n_iter: 300,
    atlas_seed: 0,
  });
  const buttons = [...el.querySelectorAll("button.hs-thumb")];
  assert.equal(buttons.length, 3);
  const hooks = buttons.map((b) => [b.dataset.head, b.dataset.outside, b.dataset.stacked]);
  assert.deepEqual(hooks, [
    ["0", "0", "1"],
    ["1", "0", "1"],
    ["2", "0", String(n)],
  ]);
  assert.match(buttons[2].title, /several tokens on one spot \(up to 5\)/);
});
