// Wiring of js/widget.js against a fake model (lonboard's pattern): DOM events become the right trait
// writes, trait changes from Python reach the DOM, and closing the view removes every listener. Time is
// a fake clock (js/testing.js): timers and animation frames run only when a test advances it.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom, fakeModel } from "./fake-dom.js";
import { encodeArray } from "./codecs.js";
import { fakeClock } from "./testing.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("./widget.js")).default;
});

const L = 2,
  H = 3;
const TOKENS = ["[CLS]", "hello", "world", ".", "[SEP]"];

function traits(extra = {}) {
  const n = TOKENS.length;
  const grid = Float32Array.from({ length: L * H * n }, (_, i) => (i % 7) / 7);
  return {
    text: "hello world.",
    tokens: TOKENS,
    offsets: [null, [0, 5], [6, 11], [11, 12], null],
    special: [true, false, false, false, true],
    model_name: "tiny",
    n_layers: L,
    n_heads: H,
    max_attention: encodeArray(grid, [L, H, n]),
    layer: 0,
    head: 0,
    mode: "attention",
    perplexity: 20,
    learning_rate: null,
    n_iter: 1000,
    seed: 0,
    restarts: 1,
    exclude_special: false,
    quantile: false,
    quantile_k: 100,
    speed: 250,
    edge_k: 5,
    frame: encodeArray(
      Float32Array.from({ length: 2 * n }, (_, i) => i),
      [n, 2],
    ),
    kept: [0, 1, 2, 3, 4],
    iteration: 10,
    kl: 1.5,
    run_id: 1,
    status: "running",
    state: "running",
    edges: null,
    ...extra,
  };
}

function mount(extra) {
  const model = fakeModel(traits(extra));
  const el = document.createElement("div");
  document.body.appendChild(el);
  const clock = fakeClock();
  const cleanup = widget.render({ model, el, clock });
  return { model, el, cleanup, clock, root: el.querySelector(".hs-root") };
}

/** A mouse event of `type` on the grid canvas at cell (layer, head, token), from its published layout. */
function gridEvent(el, type, layer, head, token) {
  const canvas = el.querySelector("[data-testid=headsne-grid]");
  const g = Object.fromEntries(Object.entries(canvas.dataset).map(([k, v]) => [k, Number(v)]));
  const x = g.labelW + (token + 0.5) * g.cellW;
  const y = layer * (g.gap + g.heads * g.cellH) + g.gap + (head + 0.5) * g.cellH;
  canvas.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true }));
}

const clickCell = (el, layer, head, token) => gridEvent(el, "click", layer, head, token);

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
  box.value = "/^(hello|world)$/";
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

test("the head atlas: a request, thumbnails sorted by KL, and a click selects the head", () => {
  const n = TOKENS.length;
  const { model, root, cleanup } = mount();
  const atlas = root.querySelector("[data-testid=headsne-atlas]");
  model.calls.length = 0;
  atlas.querySelector("[data-testid=headsne-atlas-run]").click();
  assert.deepEqual(model.calls, [["send", { type: "control", action: "atlas" }]]);
  const embedding = Float32Array.from({ length: H * n * 2 }, (_, i) => Math.sin(i));
  model.emit({
    atlas: encodeArray(embedding, [H, n, 2]),
    atlas_kl: encodeArray(Float32Array.of(0.9, 0.2, 0.5), [H]),
    atlas_state: "done",
  });
  assert.equal(atlas.dataset.thumbnails, String(H));
  const sort = atlas.querySelector("[data-testid=headsne-atlas-sort]");
  sort.value = "kl";
  sort.dispatchEvent(new Event("change"));
  assert.deepEqual(
    [...atlas.querySelectorAll(".hs-thumb")].map((b) => b.dataset.head),
    ["1", "2", "0"],
  );
  model.calls.length = 0;
  atlas.querySelector(".hs-thumb[data-head='2']").click();
  assert.deepEqual(model.calls, [["set", "head", 2], ["save_changes"]]);
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

test("a few far outliers are pinned to the plot's edge and counted", () => {
  const n = 40;
  const xy = Float32Array.from({ length: 2 * n }, (_, i) => (i * 7919) % 13);
  xy.set([700, 3, -690, 5], 0); // tokens 0 and 1 far out
  const { root, cleanup, clock } = mount({
    tokens: Array.from({ length: n }, (_, i) => `t${i}`),
    offsets: [],
    special: new Array(n).fill(false),
    max_attention: null,
    frame: encodeArray(xy, [n, 2]),
    kept: Array.from({ length: n }, (_, i) => i),
  });
  clock.advance(100);
  assert.equal(root.querySelector("[data-testid=headsne-scatter]").dataset.pinned, "2");
  cleanup();
});

/** The traits of a text of `n` tokens (the fake model's text repeated). */
function longTraits(n) {
  const grid = Float32Array.from({ length: L * H * n }, (_, i) => (i % 7) / 7);
  return {
    tokens: Array.from({ length: n }, (_, i) => `t${i}`),
    offsets: Array.from({ length: n }, () => null),
    special: Array.from({ length: n }, () => false),
    max_attention: encodeArray(grid, [L, H, n]),
    frame: encodeArray(new Float32Array(2 * n), [n, 2]),
    kept: Array.from({ length: n }, (_, i) => i),
  };
}

test("resting on a grid row writes hovered_head on long texts only; sweeping or the selected head writes nothing", async () => {
  const rest = (el, clock, moves) => {
    for (const [layer, head] of moves) {
      gridEvent(el, "mousemove", layer, head, 2);
      clock.advance(40);
    }
    clock.advance(160);
  };
  const written = (model) => model.calls.filter(([, name]) => name === "hovered_head").map(([, , value]) => value);
  for (const [n, expected] of [
    [2048, [[1, 2]]],
    [TOKENS.length, []],
  ]) {
    const { model, el, cleanup, clock } = mount(n === TOKENS.length ? {} : longTraits(n));
    await Promise.resolve();
    rest(el, clock, [
      [1, 0],
      [0, 1],
      [1, 1],
      [1, 2],
    ]); // 40 ms on each row, then rests on (1, 2)
    assert.deepEqual(written(model), expected, `${n} tokens`);
    rest(el, clock, [[0, 0]]); // the selected head
    assert.deepEqual(written(model), expected, `${n} tokens, the selected head`);
    cleanup();
  }
});
