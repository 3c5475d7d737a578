// Wiring of js/widget.js against a fake model (lonboard's pattern): DOM events become the right trait
// writes, trait changes from Python reach the DOM, and closing the view removes every listener. Time is
// a fake clock (js/test-helpers/testing.js): timers and animation frames run only when a test advances it. The grid's
// wiring is in js/views/grid/grid.test.js.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "./test-helpers/fake-dom.js";
import { encodeArray } from "./model/codecs.js";
import { H, TOKENS, mount as mountOn } from "./test-helpers/widget-fixture.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("./widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);

test("trait changes from Python reach the DOM", async () => {
  const { model, root, cleanup } = mount();
  assert.equal(root.dataset.state, "running");
  model.emit({ state: "done", status: "done layer 0 head 0", run_id: 4 });
  assert.equal(root.dataset.state, "done");
  assert.equal(root.dataset.runId, "4");
  assert.equal(root.querySelector("[data-testid=headsne-status]").textContent, "done layer 0 head 0");
  const n = TOKENS.length;
  model.emit({ frame: encodeArray(new Float32Array(2 * n), [n, 2]), iteration: 777 });
  await Promise.resolve();
  assert.equal(root.querySelector("[data-testid=headsne-iteration]").textContent, "777");
  cleanup();
});

test("the controls send control messages and parameter writes", () => {
  const { model, root, cleanup } = mount();
  model.calls.length = 0;
  root.querySelector("[data-testid=headsne-play]").click();
  assert.deepEqual(model.calls, [["send", { type: "control", action: "pause" }]]);
  model.calls.length = 0;
  const mode = root.querySelector("[data-testid=headsne-mode]");
  mode.value = "hidden";
  mode.dispatchEvent(new Event("change"));
  assert.deepEqual(model.calls, [["set", "mode", "hidden"], ["save_changes"]]);
  cleanup();
});

test("token text is rendered as text, never HTML", () => {
  const { root, cleanup } = mount({
    text: "<img src=x onerror=alert(1)>",
    tokens: ["<img src=x onerror=alert(1)>"],
    offsets: [[0, 28]],
    special: [false],
    max_attention: null,
    frame: null,
    kept: [0],
  });
  assert.equal(root.querySelectorAll("img").length, 0);
  assert.match(root.querySelector("[data-testid=headsne-text]").textContent, /<img src=x/);
  cleanup();
});

test("closing the view removes every model listener and the DOM", () => {
  const { model, el, cleanup } = mount();
  assert.ok(model.listenerCount() > 10);
  cleanup();
  assert.equal(model.listenerCount(), 0);
  assert.equal(el.children.length, 0);
});

test("keys pressed inside the widget do not reach the notebook", () => {
  const { root, cleanup } = mount();
  let seen = 0;
  const count = () => seen++;
  document.addEventListener("keydown", count);
  root.querySelector("input").dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowLeft", bubbles: true }));
  document.body.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowLeft", bubbles: true }));
  document.removeEventListener("keydown", count);
  assert.equal(seen, 1);
  cleanup();
});

test("text click and shift-click select tokens in one write; Python's selection marks the spans", () => {
  const { model, root, cleanup } = mount();
  const span = (i) => root.querySelector(`[data-testid=headsne-text] [data-index='${i}']`);
  model.calls.length = 0;
  span(1).dispatchEvent(new MouseEvent("click", { bubbles: true }));
  span(3).dispatchEvent(new MouseEvent("click", { bubbles: true, shiftKey: true }));
  assert.deepEqual(model.calls, [
    ["set", "selected", [1]],
    ["save_changes"],
    ["set", "selected", [1, 2, 3]],
    ["save_changes"],
  ]);
  assert.equal(root.dataset.selectedCount, "3");
  model.emit({ selected: [0, 4] });
  assert.equal(root.dataset.selectedCount, "2");
  assert.ok(span(4).classList.contains("hs-selected") && !span(2).classList.contains("hs-selected"));
  cleanup();
});

test("search highlights matches and Enter turns them into the selection", () => {
  const { model, root, cleanup } = mount();
  const box = root.querySelector("[data-testid=headsne-search]");
  box.value = "/\\b(hello|world)\\b/";
  box.dispatchEvent(new Event("input"));
  assert.equal(root.dataset.matchCount, "2");
  assert.ok(root.querySelector("[data-index='2']").classList.contains("hs-match"));
  model.calls.length = 0;
  box.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
  assert.deepEqual(model.calls, [["set", "selected", [1, 2]], ["save_changes"]]);
  cleanup();
});

test("hovering writes `hovered` at most every 50 ms, the latest value, and null on leave", () => {
  const { model, root, cleanup, clock } = mount();
  const span = (i) => root.querySelector(`[data-testid=headsne-text] [data-index='${i}']`);
  const times = [];
  const set = model.set;
  model.set = (name, value) => {
    if (name === "hovered") times.push([clock.now(), value]);
    set(name, value);
  };
  for (let k = 0; k < 30; k++) {
    span(1 + (k % 3)).dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    clock.advance(5);
  }
  // a token not hovered before: whenever the windows ended under load, it makes one more write
  span(4).dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
  clock.advance(120);
  assert.ok(times.length >= 2 && times.length < 31, `${times.length} writes for 31 hovers`);
  for (let k = 1; k < times.length; k++) assert.ok(times[k][0] - times[k - 1][0] >= 45, "writes 50 ms apart");
  assert.equal(times[times.length - 1][1], 4, "the last hovered token is written");
  root.querySelector("[data-testid=headsne-text]").dispatchEvent(new MouseEvent("mouseleave"));
  clock.advance(120);
  assert.equal(times[times.length - 1][1], null);
  cleanup();
});

test("colour by writes color_mode and the legend follows the trait", () => {
  const { model, root, cleanup } = mount();
  const legend = root.querySelector("[data-testid=headsne-legend]");
  assert.equal(legend.dataset.kind, "sequential");
  const select = root.querySelector("[data-testid=headsne-color]");
  model.calls.length = 0;
  select.value = "kind";
  select.dispatchEvent(new Event("change"));
  assert.deepEqual(model.calls.slice(0, 2), [["set", "color_mode", "kind"], ["save_changes"]]);
  model.emit({ color_mode: "kind" });
  return Promise.resolve().then(() => {
    assert.equal(legend.dataset.kind, "categorical");
    assert.deepEqual(
      [...legend.querySelectorAll(".hs-legend-entry")].map((e) => e.textContent),
      ["special", "word start", "word piece"],
    );
    cleanup();
  });
});

test("the head atlas: a request, thumbnails sorted by KL (missing heads last), a click selects its layer and head", () => {
  const n = TOKENS.length;
  const { model, root, cleanup } = mount();
  const atlas = root.querySelector("[data-testid=headsne-atlas]");
  model.calls.length = 0;
  atlas.querySelector("[data-testid=headsne-atlas-run]").click();
  assert.deepEqual(model.calls, [["send", { type: "control", action: "atlas" }]]);
  const embedding = Float32Array.from({ length: H * n * 2 }, (_, i) => Math.sin(i));
  model.emit({
    atlas: encodeArray(embedding, [H, n, 2]),
    atlas_kl: encodeArray(Float32Array.of(0.9, 0.2, 0), [H]),
    atlas_heads: [0, 1], // head 2 not done (stopped): missing, never a KL of 0
    atlas_layer: 1,
    atlas_state: "idle",
  });
  assert.equal(atlas.dataset.thumbnails, String(H));
  assert.match(atlas.textContent, /layer 1/);
  const sort = atlas.querySelector("[data-testid=headsne-atlas-sort]");
  sort.value = "kl";
  sort.dispatchEvent(new Event("change"));
  const thumbs = [...atlas.querySelectorAll(".hs-thumb")];
  assert.deepEqual(
    thumbs.map((b) => [b.dataset.head, b.dataset.done]),
    [
      ["1", "true"],
      ["0", "true"],
      ["2", "false"],
    ],
  );
  assert.doesNotMatch(thumbs[2].textContent, /KL/);
  model.calls.length = 0;
  atlas.querySelector(".hs-thumb[data-head='0']").click();
  assert.deepEqual(model.calls, [["set", "layer", 1], ["set", "head", 0], ["save_changes"]]);
  cleanup();
});

test("a run far above the best of restarts shows a hint; a good one does not", () => {
  const { model, root, cleanup } = mount();
  const hint = root.querySelector("[data-testid=headsne-kl-hint]");
  model.emit({ state: "done", kl: 1.825, best_kl: 1.128 });
  assert.equal(hint.hidden, false);
  assert.match(hint.textContent, /1\.6× the best of restarts/);
  model.emit({ kl: 1.2 });
  assert.equal(hint.hidden, true);
  cleanup();
});

test("from the first frame on, every point is inside the plot: far outliers and frames that move fast", async () => {
  const n = 40;
  const xy = Float32Array.from({ length: 2 * n }, (_, i) => (i * 7919) % 13);
  xy.set([700, 3, -690, 5], 0); // tokens 0 and 1 far out
  const { model, root, cleanup, clock } = mount({
    tokens: Array.from({ length: n }, (_, i) => `t${i}`),
    offsets: [],
    special: new Array(n).fill(false),
    max_attention: null,
    frame: encodeArray(xy, [n, 2]),
    kept: Array.from({ length: n }, (_, i) => i),
  });
  const canvas = root.querySelector("[data-testid=headsne-scatter]");
  clock.advance(100);
  assert.equal(canvas.dataset.outside, "0");
  // a new run's first frames: 10x smaller every frame and drifting away by far more than their size
  const seen = [];
  for (let k = 1; k <= 12; k++) {
    const next = Float32Array.from(xy, (v, i) => (i % 2 ? 5 : 3) * k + v * 10 ** -k);
    model.emit({ frame: encodeArray(next, [n, 2]), iteration: 4 * k, run_id: 2 });
    await Promise.resolve(); // the frame's traits are read a microtask later (js/model/sync.js)
    for (let f = 0; f < 3; f++) {
      clock.advance(17);
      seen.push(canvas.dataset.outside);
    }
  }
  assert.deepEqual([...new Set(seen)], ["0"], "no point ever left the plot");
  cleanup();
});

test("the browser refuses to write a trait only Python sets", async () => {
  const { write, preview } = await import("./model/model.js");
  const { model, cleanup } = mount();
  model.calls.length = 0;
  assert.throws(() => write(model, { status: "hacked" }), /may not write status/);
  assert.throws(() => preview(model, { frame: null }), /may not write frame/);
  assert.deepEqual(model.calls, [], "nothing was set or sent");
  write(model, { head: 2 });
  assert.deepEqual(model.calls, [["set", "head", 2], ["save_changes"]]);
  cleanup();
});
