// Why a head attends (js/views/attribution/attribution.js): its lines, and the wiring with a fake model: a click on a
// point of the map pins its token, a click on one of its partners writes `attribution_request`, the answer's pairs
// are listed as text (never HTML), an error is shown; the composition button sends its control message and a link
// selects its head.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../../test-helpers/fake-dom.js";
import { TOKENS, attendsNext, clickAPoint, mount as mountOn } from "../../test-helpers/widget-fixture.js";
import { attributionNote, linkLine, pairLine } from "./attribution.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../../widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);
const n = TOKENS.length;
// token t attends to (t + 1) % n most (0.6), then (t + 2) % n (0.3)
const ATTENDS = attendsNext(n);

test("a pair's line names both sides and its share of the score; the note says what is going on", () => {
  const pair = { query: "embedding", key: "L0 H2", score: 0.6123, share: 0.61 };
  assert.equal(pairLine(pair), "key side: L0 H2 · query side: embedding · 61 % of the score (0.612)");
  assert.equal(pairLine({ ...pair, share: null }), "key side: L0 H2 · query side: embedding (0.612)");
  const a = { layer: 1, head: 2, i: 1, j: 2 };
  assert.match(attributionNote({ ...a, state: "running" }, TOKENS), /^L1 H2: "hello" #1 → "world" #2: attributing/);
  assert.equal(
    attributionNote({ ...a, state: "error", error: "no components" }, TOKENS).endsWith(": no components"),
    true,
  );
  assert.match(
    attributionNote({ ...a, state: "done", score: 1.5, n_pairs: 256, seconds: 0.25 }, TOKENS),
    /score 1\.500 = the sum of 256 pairs, 0\.25 s/,
  );
  assert.match(attributionNote(null, TOKENS), /click a token/);
  assert.equal(linkLine({ kind: "k", layer: 0, head: 1, score: 0.4213 }), "keys ← L0 H1 · 0.42");
});

test("a click on a point pins it, a partner asks why, and the answer's pairs are text", async () => {
  const { model, root, cleanup, clock } = mount({ attends_to: ATTENDS, layer: 1, head: 2 });
  await Promise.resolve();
  clock.advance(100); // the frame drawn
  const i = clickAPoint(root);
  const list = root.querySelector("[data-testid=headsne-attribution-partners]");
  const buttons = [...list.querySelectorAll("button.hs-why-partner")];
  assert.deepEqual(
    buttons.map((b) => Number(b.dataset.j)),
    [(i + 1) % n, (i + 2) % n],
  );
  model.calls.length = 0;
  buttons[1].click();
  assert.deepEqual(model.calls, [["set", "attribution_request", [1, 2, i, (i + 2) % n]], ["save_changes"]]);
  const request = { layer: 1, head: 2, i, j: (i + 2) % n };
  model.emit({ attribution: { ...request, state: "running" } });
  const result = root.querySelector("[data-testid=headsne-attribution-result]");
  assert.equal(result.dataset.state, "running");
  const evil = "<img src=x onerror=alert(1)>";
  model.emit({
    attribution: {
      ...request,
      state: "done",
      score: 2,
      n_pairs: 4,
      seconds: 0.1,
      pairs: [
        { query: "embedding", key: "L0 H2", score: 1.5, share: 0.75 },
        { query: evil, key: "L0 MLP", score: 0.5, share: 0.25 },
      ],
    },
  });
  const pairs = [...root.querySelectorAll("[data-testid=headsne-attribution-pairs] li")];
  assert.deepEqual(
    pairs.map((p) => [p.dataset.query, p.dataset.key, Number(p.dataset.score)]),
    [
      ["embedding", "L0 H2", 1.5],
      [evil, "L0 MLP", 0.5],
    ],
  );
  assert.equal(pairs[0].textContent, "key side: L0 H2 · query side: embedding · 75 % of the score (1.500)");
  assert.equal(root.querySelectorAll("img").length, 0, "a label is text, never HTML");
  model.emit({ attribution: { ...request, state: "error", error: "MemoryError: over the memory budget" } });
  assert.equal(result.dataset.state, "error");
  assert.equal(root.querySelectorAll("[data-testid=headsne-attribution-pairs] li").length, 0);
  assert.match(root.querySelector("[data-testid=headsne-attribution-note]").textContent, /over the memory budget/);
  cleanup();
});

test("the composition button asks once; a link selects its head", async () => {
  const { model, root, cleanup } = mount({ layer: 1, head: 0 });
  await Promise.resolve();
  const box = root.querySelector("[data-testid=headsne-composition]");
  model.calls.length = 0;
  box.querySelector("[data-testid=headsne-composition-ask]").click();
  assert.deepEqual(model.calls, [["send", { type: "control", action: "composition" }]]);
  model.emit({ composition: { state: "running", layer: 1, head: 0, links: [] } });
  assert.equal(box.querySelector("[data-testid=headsne-composition-ask]").disabled, true);
  model.emit({
    composition: {
      state: "done",
      layer: 1,
      head: 0,
      links: [
        { kind: "q", layer: 0, head: 2, score: 0.5 },
        { kind: "k", layer: 0, head: 1, score: 0.25 },
      ],
    },
  });
  const links = [...box.querySelectorAll("button.hs-composition")];
  assert.deepEqual(
    links.map((b) => b.textContent),
    ["queries ← L0 H2 · 0.50", "keys ← L0 H1 · 0.25"],
  );
  model.calls.length = 0;
  links[1].click();
  assert.deepEqual(model.calls, [["set", "layer", 0], ["set", "head", 1], ["save_changes"]]);
  model.emit({ composition: { state: "error", error: "this extraction holds no components", layer: 1, head: 0 } });
  assert.match(box.textContent, /holds no components/);
  cleanup();
});
