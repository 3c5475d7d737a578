// One screen (issue 52) against a fake model: the inspector shows the answer to the last click (a point: the token
// tab; a partner: the edge tab; a grid row: the heads tab), its tabs move with the arrows and word mode hides the ones
// of one text; an error shows whole over the map and the status line opens whole on a click; the atlas's caption
// names its layer and says when the map shows another; the map draws no collapsed dot while a run goes.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../test-helpers/fake-dom.js";
import { encodeArray } from "../model/codecs.js";
import { TOKENS, attendsNext, clickAPoint, clickCell, mount as mountOn } from "../test-helpers/widget-fixture.js";
import { atlasCaption } from "./heads/atlas.js";
import { MIN_SPREAD, gatheredOrNot, pointSpread } from "./scatter/scatter-draw.js";
import { shownTab } from "./inspector.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);
const $ = (root, id) => root.querySelector(`[data-testid=${id}]`);
const n = TOKENS.length;
const ATTENDS = attendsNext(n);
const shown = (root) => root.querySelector("[data-testid=headsne-inspector]").dataset.tab;

test("the inspector shows the answer to the last click: a point, a partner, a grid row", async () => {
  const { model, root, el, cleanup, clock } = mount({ attends_to: ATTENDS, layer: 1, head: 2 });
  await Promise.resolve();
  clock.advance(100);
  assert.equal(shown(root), "heads", "the heads tab at first");
  assert.equal($(root, "headsne-pane-heads").hidden, false);
  assert.equal($(root, "headsne-pane-token").hidden, true);
  clickAPoint(root);
  assert.equal(shown(root), "token", "a point: its partners and what wrote it");
  assert.equal($(root, "headsne-pane-token").hidden, false);
  assert.equal($(root, "headsne-pane-heads").hidden, true);
  assert.equal($(root, "headsne-tab-token").getAttribute("aria-selected"), "true");
  const partner = $(root, "headsne-attribution-partners").querySelector("button.hs-why-partner");
  partner.click();
  assert.equal(shown(root), "edge", "a partner: why the head attends");
  assert.equal($(root, "headsne-attribution").closest("[hidden]"), null, "the answer's box is on view");
  clickCell(el, 0, 1, 2);
  assert.deepEqual(model.traits.layer, 0);
  assert.equal(shown(root), "heads", "a grid row: the related heads and what feeds it");
  // the arrows move along the tabs, as in any tab list
  $(root, "headsne-tab-heads").dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true }));
  assert.equal(shown(root), "atlas");
  $(root, "headsne-tab-atlas").dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowLeft", bubbles: true }));
  assert.equal(shown(root), "heads");
  cleanup();
});

test("word mode hides the tabs of one text and shows a clicked occurrence in its sentence, as text", () => {
  assert.equal(shownTab(/** @type {any} */ ({ tab: "heads", doc: { word: "bank" } })), "token");
  assert.equal(shownTab(/** @type {any} */ ({ tab: "settings", doc: { word: "bank" } })), "settings");
  const text = "He sat on the <b>bank</b>.\nThe bank raised rates.";
  const offsets = [...text.matchAll(/bank/g)].map((m) => [m.index, m.index + 4]);
  const { root, cleanup, clock } = mount({
    text,
    word: "bank",
    tokens: offsets.map(() => "bank"),
    offsets,
    special: [false, false],
    max_attention: encodeArray(new Float32Array(2 * 3 * 2), [2, 3, 2]),
    frame: encodeArray(Float32Array.from([0, 0, 1, 1]), [2, 2]),
    kept: [0, 1],
    mode: "hidden",
  });
  clock.advance(100);
  assert.equal(shown(root), "token");
  for (const tab of ["edge", "heads", "atlas"]) assert.equal($(root, `headsne-tab-${tab}`).hidden, true, tab);
  assert.equal($(root, "headsne-settings").hidden, false);
  clickAPoint(root);
  const query = $(root, "headsne-attribution-query");
  assert.match(query.textContent, /occurrence \d of 2/);
  assert.equal(query.querySelectorAll("b").length, 1, "the word in bold, the rest text");
  assert.equal(query.querySelectorAll("img, b b").length, 0);
  cleanup();
});

test("an error shows whole over the map; the status line keeps one line and opens whole on a click", async () => {
  const { model, root, cleanup } = mount();
  const box = $(root, "headsne-map-message");
  assert.equal(box.hidden, true);
  const error =
    "value-weighted layer 0 head 0: this extraction holds no components: extract it with " +
    "extract(text, model, components=True), or pass the model that made it";
  model.emit({ state: "error", status: error });
  assert.equal(box.hidden, false);
  assert.ok(box.textContent.endsWith(error), box.textContent);
  await Promise.resolve(); // the status line's observer runs a microtask later
  const status = $(root, "headsne-status");
  const full = $(root, "headsne-status-full");
  assert.equal(status.title, error, "the line's title holds the whole text");
  assert.equal(full.hidden, true);
  status.click();
  assert.equal(full.hidden, false);
  assert.equal(full.textContent, error);
  status.click();
  assert.equal(full.hidden, true);
  model.emit({ state: "running", status: "running layer 0 head 0" });
  assert.equal(box.hidden, true, "the next run clears it");
  cleanup();
});

test("the atlas's caption names its layer, says when the map shows another, and offers to compute it", () => {
  const base = { doc: { word: "" }, mode: "attention", atlas: "x", atlas_state: "done" };
  assert.deepEqual(atlasCaption(/** @type {any} */ ({ ...base, layer: 2, atlas_layer: 2 })), {
    text: "head atlas of layer 2, the map's layer",
    stale: false,
  });
  assert.deepEqual(atlasCaption(/** @type {any} */ ({ ...base, layer: 1, atlas_layer: 2 })), {
    text: "head atlas of layer 2; the map shows layer 1",
    stale: true,
  });
  assert.match(
    atlasCaption(/** @type {any} */ ({ ...base, atlas: null, atlas_state: "idle", layer: 3 })).text,
    /layer 3/,
  );
  const H = 3;
  const { model, root, cleanup } = mount({
    atlas: encodeArray(new Float32Array(H * n * 2), [H, n, 2]),
    atlas_kl: encodeArray(new Float32Array(H), [H]),
    atlas_heads: [0, 1, 2],
    atlas_layer: 0,
    atlas_state: "done",
    layer: 0,
  });
  const caption = $(root, "headsne-atlas-caption");
  assert.equal(caption.textContent, "head atlas of layer 0, the map's layer");
  model.emit({ layer: 1 });
  assert.equal(caption.textContent, "head atlas of layer 0; the map shows layer 1");
  assert.equal(caption.dataset.stale, "true");
  const run = $(root, "headsne-atlas-run");
  assert.equal(run.textContent, "▦ compute layer 1");
  model.calls.length = 0;
  run.click();
  assert.deepEqual(model.calls, [["send", { type: "control", action: "atlas" }]]);
  cleanup();
});

test("a frame whose points sit in one dot is not drawn while its run goes; its run's last one is", () => {
  const plot = { x0: 0, y0: 0, x1: 400, y1: 300 };
  const m = 100;
  // 97 points within a pixel, 3 far out: the extent is the plot's, the spread a dot's
  const sx = Float32Array.from({ length: m }, (_, r) => (r < 97 ? 200 + (r % 3) * 0.1 : [0, 400, 10][r - 97]));
  const sy = Float32Array.from({ length: m }, (_, r) => (r < 97 ? 150 : [0, 300, 290][r - 97]));
  const dot = { sx, sy, m };
  assert.ok(pointSpread(dot, plot) < 0.001);
  const spread = {
    sx: Float32Array.from({ length: m }, (_, r) => (r * 4) % 400),
    sy: Float32Array.from({ length: m }, (_, r) => (r * 37) % 300),
    m,
  };
  assert.ok(pointSpread(spread, plot) > 0.2);
  const scene = (/** @type {any} */ points) => /** @type {any} */ ({ points, plot, message: "" });
  const [hidden, s1] = gatheredOrNot(scene(dot), { running: true, iteration: 120 });
  assert.equal(hidden.points, null);
  assert.match(hidden.message, /iteration 120: the points gather under the early exaggeration/);
  assert.ok(s1 < MIN_SPREAD);
  assert.equal(gatheredOrNot(scene(dot), { running: false, iteration: 300 })[0].points, dot, "a run's end is drawn");
  assert.equal(gatheredOrNot(scene(spread), { running: true, iteration: 300 })[0].points, spread);
});
