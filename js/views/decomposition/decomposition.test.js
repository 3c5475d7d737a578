// What wrote it (js/views/decomposition/, the inspector's token tab): the pure parts, and the wiring with a fake
// model: showing the token tab asks Python once, the chart follows the hovered token (and the clicked one once the
// pointer leaves) with the shares Python sent, the heads x tokens map draws and a click on a head row selects that
// head in one write; token text is text, never HTML.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../../test-helpers/fake-dom.js";
import { encodeArray } from "../../model/codecs.js";
import { H, TOKENS, clickAPoint, mount as mountOn } from "../../test-helpers/widget-fixture.js";
import { rowAt, shareRgb, shareText, stackShares, tokenShares, TERMS } from "./decomposition-parts.js";
import { decompositionNote } from "./decomposition.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../../widget.js")).default;
});

const n = TOKENS.length;
// token t's shares: input 0.1 t, attention 0.5, feed-forward 0.6 - 0.1 t, correction -0.1 (sum 1)
const TERM_DATA = Float32Array.from({ length: 4 * n }, (_, i) => {
  const [k, t] = [Math.floor(i / n), i % n];
  return [0.1 * t, 0.5, 0.6 - 0.1 * t, -0.1][k];
});
const HEAD_DATA = Float32Array.from({ length: H * n }, (_, i) => (i % 5) / 10 - 0.1);

const decomposed = (layer = 0) => ({
  decomposition_state: "done",
  decomposition_layer: layer,
  decomposition_terms: encodeArray(TERM_DATA, [4, n]),
  decomposition_heads: encodeArray(HEAD_DATA, [H, n]),
});

const $ = (root, id) => root.querySelector(`[data-testid=${id}]`);
const openTab = (root) => $(root, "headsne-tab-token").click();
const otherTab = (root) => $(root, "headsne-tab-heads").click();

test("a token's shares, their stack, the diverging colour and the head rows", () => {
  const terms = { data: TERM_DATA, shape: [4, n] };
  assert.deepEqual(
    tokenShares(terms, 2).map((v) => Number(v.toFixed(6))),
    [0.2, 0.5, 0.4, -0.1],
  );
  assert.equal(tokenShares(terms, n), null);
  assert.equal(tokenShares({ data: TERM_DATA, shape: [2, 2 * n] }, 0), null);
  const { segments, low, high } = stackShares([0.2, 0.5, 0.4, -0.1]);
  assert.deepEqual(
    segments.map((s) => [s.term, Number(s.y0.toFixed(6)), Number(s.y1.toFixed(6))]),
    [
      [0, 0, 0.2],
      [1, 0.2, 0.7],
      [2, 0.7, 1.1],
      [3, -0.1, 0],
    ],
  );
  assert.equal(Number(high.toFixed(6)), 1.1);
  assert.equal(low, -0.1);
  assert.deepEqual(shareRgb(0, 1, [247, 247, 247]), [247, 247, 247]);
  assert.deepEqual(shareRgb(2, 1, [247, 247, 247]), [202, 0, 32]);
  assert.deepEqual(shareRgb(-1, 1, [247, 247, 247]), [5, 113, 176]);
  assert.equal(rowAt(25, 3, 10), 2);
  assert.equal(rowAt(35, 3, 10), -1);
  assert.equal(shareText(-0.0314), "−0.031");
  assert.equal(TERMS.map((t) => t.label).join(), "input,attention,feed-forward,correction");
  assert.match(
    decompositionNote(/** @type {any} */ ({ layer: 2 })),
    /open this tab to split each token's state at layer 2/,
  );
  assert.equal(decompositionNote(/** @type {any} */ ({ layer: 2, decomposition_state: "error", status: "no" })), "no");
});

test("showing the token tab asks Python once; nothing is asked while another tab is shown", async () => {
  const { model, root, cleanup } = mount({ decomposition_state: "idle" });
  await Promise.resolve();
  const sends = () => model.calls.filter(([kind]) => kind === "send").map(([, m]) => m);
  assert.deepEqual(sends(), []);
  assert.equal($(root, "headsne-pane-token").hidden, true, "the heads tab is shown at first");
  openTab(root);
  assert.equal($(root, "headsne-pane-token").hidden, false);
  assert.deepEqual(sends(), [{ type: "control", action: "decomposition" }]);
  model.emit({ decomposition_state: "running" });
  assert.match($(root, "headsne-decomposition-note").textContent, /splitting each token's state at layer 0/);
  otherTab(root); // away and back while it runs: no second request
  openTab(root);
  assert.equal(sends().length, 1);
  cleanup();
});

test("a click on a point shows its shares once the pointer leaves, whatever was hovered on the way", async () => {
  const { model, root, cleanup, clock } = mount(decomposed(0));
  await Promise.resolve();
  clock.advance(100); // the frame drawn
  const clicked = clickAPoint(root);
  assert.ok(clicked >= 0, "a point answered");
  assert.equal($(root, "headsne-pane-token").hidden, false, "the click opened the token tab");
  const chart = $(root, "headsne-decomposition-chart");
  const other = (clicked + 1) % n;
  model.emit({ hovered: other }); // on the way to the inspector
  assert.equal(chart.dataset.token, String(other), "the hovered token while the pointer is on it");
  model.emit({ hovered: null });
  assert.equal(chart.dataset.token, String(clicked), "then the clicked one");
  cleanup();
});

test("the chart follows the hovered token; a head row's click selects the head", async () => {
  const { model, root, cleanup } = mount({ ...decomposed(0), tokens: ["[CLS]", "<b>x</b>", "world", ".", "[SEP]"] });
  await Promise.resolve();
  openTab(root);
  const chart = $(root, "headsne-decomposition-chart");
  assert.equal(chart.dataset.state, "waiting", "no token hovered yet");
  model.emit({ hovered: 1 });
  assert.equal(chart.dataset.state, "drawn");
  assert.equal(chart.dataset.token, "1");
  assert.deepEqual(
    JSON.parse(chart.dataset.shares).map((v) => Number(v.toFixed(6))),
    [0.1, 0.5, 0.5, -0.1],
  );
  assert.match($(root, "headsne-decomposition-token").textContent, /token #1 "<b>x<\/b>" · layer 0/);
  assert.equal($(root, "headsne-decomposition-panel").querySelectorAll("b").length, 0, "token text is text");
  model.emit({ hovered: 3 });
  assert.equal(chart.dataset.token, "3");
  model.emit({ hovered: null }); // the pointer left: the last token stays
  assert.equal(chart.dataset.token, "3");

  const heads = $(root, "headsne-decomposition-heads");
  assert.equal(heads.dataset.state, "drawn");
  assert.equal(heads.dataset.heads, String(H));
  const rowH = Number(heads.dataset.rowHeight);
  model.calls.length = 0;
  heads.dispatchEvent(new MouseEvent("click", { clientX: 60, clientY: 2.5 * rowH, bubbles: true }));
  assert.deepEqual(model.calls, [["set", "layer", 0], ["set", "head", 2], ["save_changes"]]);
  model.emit({ head: 2 });
  assert.equal(heads.dataset.selected, "2");

  model.emit({ layer: 1 }); // another layer: the arrays shown are layer 0's, so nothing is drawn until Python's come
  assert.equal(chart.dataset.state, "waiting");
  assert.equal(heads.dataset.state, "waiting");
  model.emit(decomposed(1));
  assert.equal(chart.dataset.state, "drawn");
  assert.equal(chart.dataset.layer, "1");
  cleanup();
});

test("a refusal is shown as Python words it", async () => {
  const { model, root, cleanup } = mount({ decomposition_state: "idle" });
  await Promise.resolve();
  openTab(root);
  model.emit({ decomposition_state: "error", status: "cannot decompose layer 0: beyond the memory budget" });
  assert.match($(root, "headsne-decomposition-note").textContent, /memory budget/);
  assert.equal($(root, "headsne-decomposition-chart").dataset.state, "waiting");
  cleanup();
});

const mount = (extra) => mountOn(widget, extra);

test("colouring by the head's share: Python's values on the scale, its legend says what they are", async () => {
  const { model, root, cleanup } = mount({ color_mode: "head_share", color_values: null, layer: 1, head: 2 });
  await Promise.resolve();
  const legend = $(root, "headsne-legend");
  assert.match(legend.textContent, /no head's share \(the decomposition is computed\) yet/);
  model.emit({ color_values: encodeArray(Float32Array.from([0.1, -0.2, 0.3, 0.0, 0.05]), [n]) });
  await Promise.resolve();
  assert.equal(legend.dataset.mode, "head_share");
  assert.match(legend.textContent, /the head's share t·e\/‖e‖² of the token's state · layer 1 head 2/);
  assert.match(legend.textContent, /−0\.2|-0\.2/);
  cleanup();
});
