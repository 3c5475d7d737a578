import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../../test-helpers/fake-dom.js";
import { blockOf, blockWindow, textBlocks } from "./text-blocks.js";
import { textSegments } from "../../lib/segments.js";
import { longTraits, mount as mountOn } from "../../test-helpers/widget-fixture.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../../widget.js")).default;
});

/** A text of n tokens "w<i>", a line break after every `line` of them. */
function pieces(n, line) {
  const tokens = Array.from({ length: n }, (_, i) => `w${i}`);
  let text = "";
  const offsets = tokens.map((tok, i) => {
    const start = text.length;
    text += tok + ((i + 1) % line === 0 ? "\n" : " ");
    return [start, start + tok.length];
  });
  return textSegments(text, tokens, offsets);
}

test("blocks end at a line break from 128 tokens on, else between words from 256, and hold every piece once", () => {
  const lines = textBlocks(pieces(2000, 100));
  assert.deepEqual(
    lines.slice(0, 3).map((b) => [b.first, b.last]),
    [
      [0, 200],
      [200, 400],
      [400, 600],
    ],
  );
  const flat = textBlocks(pieces(2000, 1e9)); // no line break at all: between words at 256
  assert.deepEqual(flat[0], { start: 0, end: 512, first: 0, last: 256, chars: flat[0].chars });
  for (const blocks of [lines, flat]) {
    assert.equal(blocks[0].start, 0);
    blocks.forEach((b, i) => i > 0 && assert.equal(b.start, blocks[i - 1].end));
    assert.equal(blocks.at(-1).last, 2000);
  }
  const glued = textBlocks(textSegments("", ["a", "b", "c", "d", "e"], null), { min: 1, max: 2 });
  assert.deepEqual(
    glued.map((b) => [b.first, b.last]),
    [
      [0, 2],
      [2, 4],
      [4, 5],
    ],
  );
});

test("the window: the blocks that meet the view widened by the overscan", () => {
  const tops = [0, 100, 200, 300, 400, 500]; // five blocks of 100 px
  assert.deepEqual(blockWindow(tops, 0, 150, 0), [0, 2]);
  assert.deepEqual(blockWindow(tops, 0, 150, 150), [0, 3]);
  assert.deepEqual(blockWindow(tops, 250, 100, 0), [2, 4]);
  assert.deepEqual(blockWindow(tops, 250, 100, 60), [1, 5]);
  assert.deepEqual(blockWindow(tops, 5000, 100, 0), [4, 5], "scrolled past the end: the last block");
  assert.deepEqual(blockWindow([0, 0], 0, 150, 150), [0, 1]);
});

test("the block of a token", () => {
  const blocks = textBlocks(pieces(3000, 100));
  for (const t of [0, 199, 200, 1234, 2999]) {
    const b = blocks[blockOf(blocks, t)];
    assert.ok(t >= b.first && t < b.last, `token ${t}`);
  }
  assert.equal(blockOf(blocks, 3000), -1);
  assert.equal(blockOf(blocks, -1), -1);
});

test("a text of up to 4096 tokens has every span in the strip", () => {
  const { el, cleanup } = mountOn(widget, { ...longTraits(4096), text: "" });
  const strip = el.querySelector("[data-testid=headsne-text]");
  assert.equal(strip.querySelectorAll(".hs-tok").length, 4096);
  cleanup();
});

test("65536 tokens: the strip holds the spans of a few blocks, and a search far down brings its block", () => {
  const n = 65536;
  const { el, model, cleanup } = mountOn(widget, { ...longTraits(n), text: "" });
  const strip = el.querySelector("[data-testid=headsne-text]");
  const spans = () => strip.querySelectorAll(".hs-tok").length;
  assert.ok(spans() > 0 && spans() <= 1536, `${spans()} spans`); // three blocks at most
  assert.ok(strip.querySelectorAll("*").length < 1500, `${strip.querySelectorAll("*").length} elements`);
  assert.ok(strip.querySelector("[data-index='0']"));
  // a search far down the text brings its first match's block, marked, and lets the first go
  const box = el.querySelector("[data-testid=headsne-search]");
  box.value = "/^t4000[0-9]$/";
  box.dispatchEvent(new Event("input"));
  const hit = strip.querySelector("[data-index='40000']");
  assert.ok(hit && hit.classList.contains("hs-match"), "the first match's span, marked");
  assert.equal(strip.querySelector("[data-index='0']"), null);
  assert.ok(spans() <= 1536, `${spans()} spans`);
  // Python selects a token whose span is not in the DOM: it is marked when its block comes
  model.emit({ selected: [3] });
  box.value = "";
  box.dispatchEvent(new Event("input"));
  strip.scrollTop = 0;
  strip.dispatchEvent(new Event("scroll"));
  assert.ok(strip.querySelector("[data-index='3']").classList.contains("hs-selected"));
  assert.equal(strip.querySelector("[data-index='40000']"), null);
  cleanup();
});
