import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../test-helpers/fake-dom.js";
import { createLabelAtlas, shelfPacker } from "./label-atlas.js";

before(() => installDom());

test("shelves: boxes left to right, then the next row, none when full", () => {
  const packer = shelfPacker(100, 30, 10);
  assert.deepEqual(packer.place(60), [0, 0]);
  assert.deepEqual(packer.place(50), [0, 10]); // does not fit the first row's rest
  assert.deepEqual(packer.place(40), [50, 10]);
  assert.deepEqual(packer.place(100), [0, 20]);
  assert.equal(packer.place(1), null);
  assert.equal(packer.place(101), null);
  packer.reset();
  assert.deepEqual(packer.place(1), [0, 0]);
});

test("a label is rendered once however often it is drawn, and only when first drawn", () => {
  const theme = /** @type {any} */ ({ font: "sans-serif", fg: "#000" });
  const atlas = createLabelAtlas(theme, 2, 14);
  const drawn = [];
  const target = /** @type {any} */ ({ drawImage: (...args) => drawn.push(args) });
  assert.equal(atlas.width("abc"), Math.ceil((6 * 3 + 2) * 2) / 2); // the fake DOM measures 6 px a character
  assert.equal(atlas.renders, 0, "measuring renders nothing");
  for (let i = 0; i < 3; i++) atlas.draw(target, "abc", { x: 5, y: 6, w: 10, h: 14 });
  atlas.draw(target, "de", { x: 0, y: 0, w: 7, h: 14 });
  assert.equal(atlas.renders, 2);
  assert.deepEqual(drawn[0].slice(1, 5), [0, 0, 40, 28]);
  assert.deepEqual(drawn[3].slice(1, 5), [40, 0, 28, 28]);
});

test("65536 distinct labels fit a canvas of fixed size: it starts over when full", () => {
  const atlas = createLabelAtlas(/** @type {any} */ ({ font: "sans-serif", fg: "#000" }), 1, 14);
  let right = 0;
  let bottom = 0;
  const target = /** @type {any} */ ({
    drawImage: (_c, x, y, w, h) => ([right, bottom] = [Math.max(right, x + w), Math.max(bottom, y + h)]),
  });
  for (let t = 0; t < 65536; t++) atlas.draw(target, `token${t}`, { x: 0, y: 0, w: 1, h: 14 });
  assert.equal(atlas.renders, 65536);
  assert.ok(right <= 2048 && bottom <= 1024, `drawn from up to ${right} x ${bottom} px`);
  atlas.draw(target, "token65535", { x: 0, y: 0, w: 1, h: 14 });
  assert.equal(atlas.renders, 65536, "the last label is still there");
});
