// A saved page (js/model/static-page.js, headsne_widget/export) against the real widget: it says it is
// static, a click on a head whose map it holds (the atlas's layer, the map's: a saved page holds one layer) shows
// that map and the atlas's caption names the map's layer, any other head is refused with a word why and changes
// nothing, and what needs the kernel is off.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../test-helpers/fake-dom.js";
import { decodeArray, encodeArray } from "./codecs.js";
import { H, TOKENS, clickCell, traits } from "../test-helpers/widget-fixture.js";
import { fakeClock } from "../test-helpers/testing.js";

let renderStatic;
before(async () => {
  installDom();
  renderStatic = (await import("../widget.js")).renderStatic;
});

const n = TOKENS.length;
/** The atlas of layer 1, the exported map's layer: head h's map is every point at (h, row). */
const atlas = Float32Array.from({ length: H * n * 2 }, (_, i) =>
  i % 2 ? Math.floor(i / 2) % n : Math.floor(i / (2 * n)),
);

function page() {
  const state = {
    ...traits({
      layer: 1,
      state: "done",
      status: "done layer 1 head 0 - KL 1.5000 after 1000 iterations",
      best_kl: 0.5,
    }),
    atlas: encodeArray(atlas, [H, n, 2]),
    atlas_kl: encodeArray(Float32Array.of(1.7, 1.8, 1.9), [H]),
    atlas_heads: [0, 1, 2],
    atlas_layer: 1,
    atlas_state: "done",
    atlas_n_iter: 300,
    atlas_seed: 0,
    color_mode: "position",
  };
  const offline = {
    label: "static export of layer 1 head 0",
    heads: [
      [1, 0],
      [1, 1],
      [1, 2],
    ],
    atlas_kept: [0, 1, 2, 3, 4],
  };
  const el = document.createElement("div");
  document.body.appendChild(el);
  const clock = fakeClock();
  const cleanup = renderStatic({ state, offline, el, clock });
  return { el, state, clock, cleanup, root: el.querySelector(".hs-root") };
}

const text = (root, id) => root.querySelector(`[data-testid=${id}]`).textContent;

test("a saved page says it is static and switches the map to a head it holds", async () => {
  const { el, state, root, clock, cleanup } = page();
  await Promise.resolve();
  assert.match(text(root, "headsne-static"), /static export of layer 1 head 0/);
  assert.equal(text(root, "headsne-atlas-caption"), "head atlas of layer 1, the map's layer");
  assert.equal(root.querySelector("[data-testid=headsne-play]").disabled, true, "no kernel to run");
  assert.equal(root.querySelector("[data-testid=headsne-atlas-run]").disabled, true);
  clickCell(el, 1, 2, 1);
  await Promise.resolve();
  clock.advance(50);
  assert.deepEqual([state.layer, state.head], [1, 2]);
  assert.deepEqual(Array.from(decodeArray(state.frame).data.filter((_, i) => i % 2 === 0)), [2, 2, 2, 2, 2]);
  assert.match(text(root, "headsne-status"), /layer 1 head 2 from the head atlas \(300 iterations/);
  assert.match(root.textContent, /layer 1 · head 2/, "the caption follows");
  assert.equal(text(root, "headsne-iteration"), "300");
  assert.equal(root.querySelector("[data-testid=headsne-kl-hint]").hidden, true, "no hint from the export's best KL");
  assert.equal(text(root, "headsne-atlas-caption"), "head atlas of layer 1, the map's layer", "one layer shown");
  cleanup();
});

test("a head the saved page holds no map of is refused, with a word why; nothing changes", async () => {
  const { el, state, root, clock, cleanup } = page();
  await Promise.resolve();
  const frame = state.frame;
  clickCell(el, 0, 2, 1);
  await Promise.resolve();
  clock.advance(50);
  assert.deepEqual([state.layer, state.head], [1, 0]);
  assert.equal(state.frame, frame);
  assert.match(
    text(root, "headsne-status"),
    /static export of layer 1 head 0: this page holds no map of layer 0 head 2/,
  );
  assert.match(root.textContent, /layer 1 · head 0/);
  assert.equal(text(root, "headsne-atlas-caption"), "head atlas of layer 1, the map's layer");
  cleanup();
});
