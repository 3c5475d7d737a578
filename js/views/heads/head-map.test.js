// The head map and the related heads (js/views/heads/head-map.js, js/views/heads/head-kinds.js): the pure parts, and the wiring
// with a fake model: every head drawn, hover says which head, a click or a related head selects it.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../../test-helpers/fake-dom.js";
import { encodeArray } from "../../model/codecs.js";
import { H, L, mount as mountOn } from "../../test-helpers/widget-fixture.js";
import {
  headLine,
  headPlaces,
  kindColour,
  kindLegend,
  relatedHeads,
  relationLegend,
  topScores,
  KINDS,
} from "./head-kinds.js";
import { categorical } from "../../lib/colors.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../../widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);
const N = L * H;
const NAMES = ["sink", "previous", "entropy"];
const KINDS_OF = ["sink", "previous", "broad", "focused", "local", "broad"];
// head i at x = -1 + 0.4 i, y = 0: well apart on the canvas
const MAP = Float32Array.from({ length: 2 * N }, (_, k) => (k % 2 ? 0 : -1 + 0.4 * (k / 2)));
const SCORES = Float32Array.from({ length: N * 3 }, (_, k) => [0.9, 0.1, -1, 0.2, 0.8, 0.3, 0.05, 0.6, 0.4][k % 9]);

function headTraits(extra = {}) {
  return {
    head_kinds: KINDS_OF,
    head_map: encodeArray(MAP, [N, 2]),
    scores: encodeArray(SCORES, [L, H, 3]),
    score_names: NAMES,
    related: [],
    ...extra,
  };
}

/** A mouse event of `type` on the head map at head i's published place. */
function atHead(root, type, i) {
  const canvas = root.querySelector("[data-testid=headsne-head-map]");
  const [x, y] = JSON.parse(canvas.dataset.positions)[i];
  canvas.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true }));
}

test("kinds have fixed colours and a legend in the rules' order", () => {
  assert.equal(kindColour("sink"), kindColour("sink", ["x"]));
  assert.notEqual(kindColour("sink"), kindColour("previous"));
  assert.equal(new Set(KINDS.map((k) => kindColour(k))).size, KINDS.length);
  assert.deepEqual(
    kindLegend(["broad", "sink", "broad", "odd"]).map(({ kind, count }) => [kind, count]),
    [
      ["sink", 1],
      ["broad", 2],
      ["odd", 1],
    ],
  );
});

test("heads are placed in the box, y up, and their line names the top scores", () => {
  const { sx, sy } = headPlaces([-1, -1, 1, 1, 0, 0], 3, { width: 200, height: 100, pad: 10 });
  assert.deepEqual(Array.from(sx), [60, 140, 100]);
  assert.deepEqual(Array.from(sy), [90, 10, 50]);
  const top = topScores({ data: SCORES, shape: [L, H, 3] }, NAMES, 0);
  assert.deepEqual(
    top.map((t) => t.name),
    ["sink", "previous"],
    "undefined scores (-1) are left out",
  );
  assert.equal(headLine({ layer: 1, head: 2, kind: "sink", top }), "L1 H2 · sink · sink 0.90, previous 0.10");
  assert.deepEqual(relatedHeads([{ layer: 1, head: 2, similarity: 0.5 }, { layer: 9, head: 0 }, null], L, H), [
    { layer: 1, head: 2, similarity: 0.5 },
  ]);
});

test("the head map draws every head and waits for its job", async () => {
  const { model, root, cleanup } = mount(headTraits({ head_map: null }));
  await Promise.resolve();
  const canvas = root.querySelector("[data-testid=headsne-head-map]");
  assert.equal(canvas.dataset.state, "waiting");
  assert.match(root.querySelector("[data-testid=headsne-head-map-note]").textContent, /comes once/);
  model.emit({ head_map: encodeArray(MAP, [N, 2]) });
  assert.equal(canvas.dataset.state, "drawn");
  assert.equal(canvas.dataset.heads, String(N));
  assert.equal(JSON.parse(canvas.dataset.positions).length, N);
  const legend = [...root.querySelectorAll("[data-testid=headsne-head-kinds] .hs-legend-entry")];
  assert.deepEqual(
    legend.map((e) => e.dataset.kind),
    ["sink", "previous", "local", "broad", "focused"],
  );
  cleanup();
});

test("hovering a head says which, and a click selects it in one write", async () => {
  const { model, root, cleanup } = mount(headTraits());
  await Promise.resolve();
  const tip = root.querySelector("[data-testid=headsne-head-tip]");
  atHead(root, "mousemove", 5); // layer 1, head 2
  assert.equal(tip.hidden, false);
  assert.equal(tip.textContent, "L1 H2 · broad · previous 0.60, entropy 0.40, sink 0.05");
  model.calls.length = 0;
  atHead(root, "click", 5);
  assert.deepEqual(model.calls, [["set", "layer", 1], ["set", "head", 2], ["save_changes"]]);
  model.emit({ layer: 1, head: 2 });
  assert.equal(root.querySelector("[data-testid=headsne-head-map]").dataset.selected, "5");
  cleanup();
});

test("a related head's button selects it; kinds are text, never HTML", async () => {
  const evil = "<img src=x onerror=alert(1)>";
  const { model, root, cleanup } = mount(headTraits({ head_kinds: KINDS_OF.map((k, i) => (i === 5 ? evil : k)) }));
  await Promise.resolve();
  const list = root.querySelector("[data-testid=headsne-related]");
  assert.equal(list.hidden, true);
  model.emit({
    related: [
      { layer: 1, head: 2, similarity: 0.91 },
      { layer: 0, head: 1, similarity: 0.5 },
    ],
  });
  const buttons = [...list.querySelectorAll("button.hs-related")];
  assert.deepEqual(
    buttons.map((b) => b.textContent),
    ["L1 H2 · 0.91", "L0 H1 · 0.50"],
  );
  model.calls.length = 0;
  buttons[0].click();
  assert.deepEqual(model.calls, [["set", "layer", 1], ["set", "head", 2], ["save_changes"]]);
  atHead(root, "mousemove", 5);
  assert.match(root.querySelector("[data-testid=headsne-head-tip]").textContent, /<img src=x/);
  assert.equal(root.querySelectorAll("img").length, 0);
  cleanup();
});

test("the head map's legend of relations: most heads first, the heads that track none last and muted", () => {
  const relations = ["det", "(none)", "amod", "det", "(none)", "nsubj", "amod", "det"];
  assert.deepEqual(relationLegend(relations, "grey"), [
    { kind: "det", colour: categorical(0), count: 3 },
    { kind: "amod", colour: categorical(1), count: 2 },
    { kind: "nsubj", colour: categorical(2), count: 1 },
    { kind: "(none)", colour: "grey", count: 2 },
  ]);
  assert.deepEqual(relationLegend(["det"], "grey"), [{ kind: "det", colour: categorical(0), count: 1 }]);
});
