// Word mode (HeadSNE.contexts: the points are the occurrences of a word across texts, `word` set, one sentence a
// line of `text`) against a fake model: the header and the grid say what the points are, the controls that need
// attention within one text are hidden, the tooltip shows the occurrence's whole sentence with the word in bold,
// the text strip shows only the sentences of the selected occurrences, a search selects the occurrences of the
// sentences it matches, and "play layers" steps through the layers as each run is done.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../test-helpers/fake-dom.js";
import { encodeArray } from "../model/codecs.js";
import { clickCell, mount as mountOn } from "../test-helpers/widget-fixture.js";
import { sentenceOf, sentencePieces } from "../lib/segments.js";
import { LAYER_HOLD_MS } from "../store/layer-play.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../widget.js")).default;
});

const SENTENCES = ["He sat on the bank.", "The Bank raised rates.", "A bank by the bank of the river."];
const TEXT = SENTENCES.join("\n");
/** every "bank" of the text, any case: the occurrences */
const OFFSETS = [...TEXT.matchAll(/bank/gi)].map((m) => [m.index, m.index + 4]);
const TOKENS = OFFSETS.map(([s, e]) => TEXT.slice(s, e));
const m = TOKENS.length;
const L = 3,
  H = 2;

/** The traits Python sends for HeadSNE.contexts("bank", SENTENCES): hidden mode, no head scores. */
function wordTraits(extra = {}) {
  return {
    text: TEXT,
    word: "bank",
    tokens: TOKENS,
    offsets: OFFSETS,
    special: new Array(m).fill(false),
    n_layers: L,
    n_heads: H,
    max_attention: encodeArray(
      Float32Array.from({ length: L * H * m }, (_, i) => (i % 5) / 5),
      [L, H, m],
    ),
    max_attention_above_uniform: null,
    scores: null,
    score_names: [],
    head_kinds: [],
    mode: "hidden",
    layer: L - 1,
    head: 0,
    frame: encodeArray(
      Float32Array.from({ length: 2 * m }, (_, i) => i),
      [m, 2],
    ),
    kept: TOKENS.map((_, i) => i),
    state: "done",
    run_id: 1,
    ...extra,
  };
}

const mount = (extra) => mountOn(widget, wordTraits(extra));
const q = (root, id) => root.querySelector(`[data-testid=${id}]`);
const writes = (model) => model.calls.filter(([what]) => what === "set");

test("the sentence of an occurrence: its whole line, the word as written", () => {
  const doc = { text: TEXT, tokens: TOKENS, offsets: OFFSETS };
  assert.deepEqual(sentenceOf(doc, 1), { before: "The ", word: "Bank", after: " raised rates.", line: 1 });
  assert.deepEqual(sentenceOf(doc, 3), { before: "A bank by the ", word: "bank", after: " of the river.", line: 2 });
  const text = (sel) =>
    sentencePieces(doc, new Set(sel))
      .pieces.map((p) => p.text)
      .join("");
  assert.equal(text([]), TEXT);
  assert.equal(text([1]), SENTENCES[1]);
  assert.equal(text([0, 3]), `${SENTENCES[0]}\n${SENTENCES[2]}`);
  const tokens = sentencePieces(doc, new Set([3])).pieces.filter((p) => p.token >= 0);
  assert.deepEqual(
    tokens.map((p) => [p.token, p.text]),
    [
      [2, "bank"],
      [3, "bank"],
    ],
  );
});

test("word mode: the header and the grid say what the points are; the one-text controls are hidden", () => {
  const { root, cleanup } = mount();
  assert.equal(root.querySelector(".hs-subtitle").textContent, "tiny · 'bank' across texts · 4 occurrences");
  assert.match(root.querySelector(".hs-caption").textContent, /^hidden-state t-SNE of 'bank' · layer 2/);
  assert.equal(root.querySelector(".hs-grid-what").textContent, "max attention to 'bank' · head × occurrence");
  const sort = q(root, "headsne-sort-heads").closest("label");
  const mode = q(root, "headsne-mode").closest("label");
  const play = q(root, "headsne-play-layers");
  assert.equal(sort.hidden, true, "no head scores to sort by");
  assert.equal(mode.hidden, true, "only the hidden states");
  assert.equal(play.hidden, false);
  assert.equal(play.textContent, "▶ play layers");
  for (const id of ["headsne-atlas", "headsne-head-map-panel", "headsne-attribution", "headsne-decomposition-panel"]) {
    assert.equal(q(root, id).hidden, true, `${id} hidden`);
  }
  const share = q(root, "headsne-color").querySelector("option[value=head_share]");
  assert.equal(share.hidden, true);
  assert.match(q(root, "headsne-text-panel").querySelector(".hs-text-title").textContent, /^sentences · 4 occurrences/);
  cleanup();

  // a widget of one text: all of them there, no play button
  const one = mountOn(widget);
  assert.equal(one.root.querySelector(".hs-grid-what").textContent, "max attention: click a head");
  assert.equal(q(one.root, "headsne-sort-heads").closest("label").hidden, false);
  assert.equal(q(one.root, "headsne-mode").closest("label").hidden, false);
  assert.equal(q(one.root, "headsne-play-layers").hidden, true);
  for (const id of ["headsne-atlas", "headsne-head-map-panel", "headsne-attribution", "headsne-decomposition-panel"]) {
    assert.equal(q(one.root, id).hidden, false, `${id} shown`);
  }
  one.cleanup();
});

test("word mode: hovering an occurrence shows its whole sentence, the word in bold, which occurrence", () => {
  const { root, cleanup } = mount();
  const span = q(root, "headsne-text").querySelector("[data-index='3']");
  span.dispatchEvent(new MouseEvent("mouseover", { bubbles: true, clientX: 10, clientY: 10 }));
  const tip = q(root, "headsne-tooltip");
  assert.equal(tip.hidden, false);
  const sentence = tip.querySelector("[data-testid=headsne-tip-sentence]");
  assert.equal(sentence.textContent, SENTENCES[2]);
  assert.equal(sentence.querySelector("b").textContent, "bank");
  assert.equal(sentence.querySelector("b").previousSibling.textContent, "A bank by the ", "the occurrence's own word");
  assert.match(tip.textContent, /#3 · occurrence 4 of 4/);
  cleanup();
});

test("word mode: the strip shows the sentences of the selected occurrences only, and selects occurrences", async () => {
  const { model, root, cleanup } = mount();
  const strip = q(root, "headsne-text");
  assert.equal(strip.textContent, TEXT);
  model.emit({ selected: [1] });
  assert.equal(strip.textContent, SENTENCES[1]);
  assert.equal(strip.querySelector("[data-index='1']").classList.contains("hs-selected"), true);
  model.emit({ selected: [0, 3] });
  assert.equal(strip.textContent, `${SENTENCES[0]}\n${SENTENCES[2]}`);
  assert.deepEqual(
    [...strip.querySelectorAll("[data-index]")].map((s) => s.dataset.index),
    ["0", "2", "3"],
  );
  assert.match(root.querySelector(".hs-text-title").textContent, /2 of 3 sentences shown/);
  model.calls.length = 0;
  strip.querySelector("[data-index='2']").click();
  assert.deepEqual(writes(model), [["set", "selected", [2]]]);
  assert.equal(strip.textContent, SENTENCES[2]);
  model.emit({ selected: [] });
  assert.equal(strip.textContent, TEXT);
  // a search matches the sentences: their occurrences
  const search = q(root, "headsne-search");
  search.value = "river";
  search.dispatchEvent(new Event("input"));
  assert.equal(root.dataset.matchCount, "2");
  search.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
  assert.deepEqual(writes(model).at(-1), ["set", "selected", [2, 3]]);
  cleanup();
});

test("word mode: a grid click selects the layer (the map) and the head (colour by max attention)", async () => {
  const { model, el, cleanup } = mount();
  await Promise.resolve();
  model.calls.length = 0;
  clickCell(el, 1, 1, 0);
  assert.deepEqual(model.calls, [["set", "layer", 1], ["set", "head", 1], ["save_changes"]]);
  cleanup();
});

test("play layers: layer 0, then the next layer each time its run is done, up to the last; a stop button meanwhile", () => {
  const { model, root, clock, cleanup } = mount();
  const play = q(root, "headsne-play-layers");
  model.calls.length = 0;
  play.click();
  assert.deepEqual(model.calls, [["set", "layer", 0], ["save_changes"]]);
  assert.equal(play.textContent, "■ stop layers");
  assert.equal(play.getAttribute("aria-pressed"), "true");
  // the old run's "done" (no new run yet) moves nothing
  model.emit({ layer: 0, state: "done" });
  clock.advance(2 * LAYER_HOLD_MS);
  assert.deepEqual(writes(model), [["set", "layer", 0]]);
  let run = 1;
  for (let layer = 0; layer < L; layer++) {
    model.emit({ run_id: ++run, state: "running" });
    clock.advance(2 * LAYER_HOLD_MS);
    assert.equal(writes(model).length, layer + 1, `nothing while layer ${layer} runs`);
    model.emit({ state: "done" });
    clock.advance(LAYER_HOLD_MS - 1);
    assert.equal(writes(model).length, layer + 1, "the finished map stays a moment");
    clock.advance(1);
    if (layer < L - 1) {
      assert.deepEqual(writes(model).at(-1), ["set", "layer", layer + 1]);
      model.emit({ layer: layer + 1 });
    }
  }
  assert.deepEqual(
    writes(model).map(([, name, value]) => [name, value]),
    [
      ["layer", 0],
      ["layer", 1],
      ["layer", 2],
    ],
    "it writes only the layer",
  );
  assert.equal(play.textContent, "▶ play layers", "done at the last layer");
  cleanup();
});

test("play layers stops on its stop button, or when the user chooses a layer or a mode", () => {
  const { model, root, clock, cleanup } = mount();
  const play = q(root, "headsne-play-layers");
  const afterDone = () => {
    model.emit({ run_id: model.get("run_id") + 1, state: "running" });
    model.emit({ state: "done" });
    clock.advance(2 * LAYER_HOLD_MS);
  };
  // the stop button
  play.click();
  model.emit({ layer: 0 });
  play.click();
  assert.equal(play.textContent, "▶ play layers");
  model.calls.length = 0;
  afterDone();
  assert.deepEqual(writes(model), [], "stopped: no next layer");
  // a layer chosen in the grid (another than the one played)
  play.click();
  assert.equal(play.textContent, "■ stop layers");
  model.emit({ layer: 2 });
  assert.equal(play.textContent, "▶ play layers");
  model.calls.length = 0;
  afterDone();
  assert.deepEqual(writes(model), []);
  // a mode
  play.click();
  model.emit({ layer: 0 });
  model.emit({ mode: "attention" });
  assert.equal(play.textContent, "▶ play layers");
  model.calls.length = 0;
  afterDone();
  assert.deepEqual(writes(model), []);
  cleanup();
});
