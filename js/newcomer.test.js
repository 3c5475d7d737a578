// What a newcomer meets (issue 22), against a fake model: the widget before its data (what is being done,
// an error in full), controls that say what they are ("your values" only once there are values, distinct
// names, the hover edges' key), and numeric settings that never send what Python would refuse (issue 23).

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "./test-helpers/fake-dom.js";
import { encodeArray } from "./model/codecs.js";
import { TOKENS, mount as mountOn } from "./test-helpers/widget-fixture.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("./widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);

test("every numeric setting refuses what Python would: marked, explained, never sent", async () => {
  const { model, root, cleanup } = mount();
  const { write } = await import("./model/model.js");
  const settings = root.querySelector("[data-testid=headsne-settings]");
  const pane = root.querySelector("[data-testid=headsne-pane-settings]");
  assert.equal(pane.hidden, true, "the settings tab is not the one shown at first");
  settings.click();
  assert.equal(pane.hidden, false);
  assert.equal(settings.getAttribute("aria-selected"), "true");
  assert.ok(!root.querySelector("[data-testid=headsne-mode]").closest("[hidden]"), "the mode control is on view");
  const cases = [
    ["iterations", "100001", "n_iter"],
    ["iterations", "0", "n_iter"],
    ["seed", "4294967296", "seed"],
    ["restarts", "1001", "restarts"],
    ["perplexity", "0", "perplexity"],
    ["perplexity", "1e5", "perplexity"],
    ["learning rate", "2e9", "learning_rate"],
    ["edges per token", "101", "edge_k"],
    ["quantile knots", "1e7", "quantile_k"],
    ["quantile knots", "1e308", "quantile_k"],
    ["quantile knots", "1", "quantile_k"],
  ];
  for (const [label, text, trait] of cases) {
    const input = root.querySelector(`input[aria-label="${label}"]`);
    model.calls.length = 0;
    input.value = text;
    input.dispatchEvent(new Event("change"));
    assert.deepEqual(model.calls, [], `${label} = ${text} was sent`);
    assert.equal(input.getAttribute("aria-invalid"), "true", `${label} = ${text}`);
    assert.match(input.title, /must be/, `${label} says why`);
    assert.throws(() => write(model, { [trait]: Number(text) }), RangeError, `write(${trait} = ${text})`);
  }
  const iterations = root.querySelector('input[aria-label="iterations"]');
  model.calls.length = 0;
  iterations.value = "100000";
  iterations.dispatchEvent(new Event("change"));
  assert.deepEqual(model.calls, [["set", "n_iter", 100000], ["save_changes"]]);
  assert.throws(() => write(model, { speed: 0.05 }), /0 or at least 0.1/);
  cleanup();
});

test("before its data the widget shows what is being done, and an error in full", () => {
  const { model, root, cleanup } = mount({
    state: "loading",
    status: "loading the model",
    progress: null,
    text: "",
    tokens: [],
    offsets: [],
    special: [],
    max_attention: null,
    frame: null,
    kept: [],
  });
  const placeholder = root.querySelector("[data-testid=headsne-placeholder]");
  const progress = root.querySelector("[data-testid=headsne-progress]");
  assert.equal(placeholder.hidden, false);
  assert.equal(placeholder.textContent, "loading the model…");
  assert.equal(progress.hidden, false);
  assert.equal(progress.dataset.indeterminate, "true", "no fraction yet: a sliding bar");
  assert.equal(root.getAttribute("aria-busy"), "true");
  assert.equal(root.querySelector("[data-testid=headsne-play]").disabled, true, "nothing to run yet");
  model.emit({ status: "capturing layer 3 of 6", progress: 0.5 });
  assert.equal(placeholder.textContent, "capturing layer 3 of 6…");
  assert.equal(progress.dataset.indeterminate, "false");
  assert.equal(progress.getAttribute("aria-valuenow"), "50");
  const error = "OSError: no model at /tmp/nowhere: give a Hugging Face model name or the folder of a saved model";
  model.emit({ state: "error", status: error, progress: null });
  assert.equal(placeholder.textContent, error, "the whole error, not one cut line");
  assert.equal(placeholder.dataset.state, "error");
  assert.equal(progress.hidden, true);
  cleanup();
});

test("'your values' can be chosen only once Python gave values; the edge key names both styles", async () => {
  const { model, root, cleanup } = mount({ color_mode: "max_attention" });
  const user = root.querySelector("[data-testid=headsne-color] option[value=user]");
  assert.equal(user.disabled, true);
  assert.match(user.title, /w.color_by/);
  const n = TOKENS.length;
  model.emit({
    color_mode: "user",
    color_values: encodeArray(
      Float32Array.from({ length: n }, (_, i) => i),
      [n],
    ),
  });
  await Promise.resolve(); // the colours are read a microtask later (js/model/sync.js)
  assert.equal(user.disabled, false);
  model.emit({ color_mode: "position" });
  assert.equal(user.disabled, false, "the values stay Python's: they can be chosen again");
  const key = root.querySelector("[data-testid=headsne-edge-key]");
  assert.deepEqual(
    [...key.querySelectorAll(".hs-legend-entry")].map((e) => [e.dataset.style, e.textContent]),
    [
      ["to", "attends to →"],
      ["from", "← attended by"],
    ],
  );
  model.emit({ edge_direction: "from" });
  assert.deepEqual(
    [...key.querySelectorAll(".hs-legend-entry")].map((e) => e.dataset.style),
    ["from"],
  );
  const labels = [...root.querySelectorAll("label")].map((l) => l.firstChild.textContent);
  assert.ok(labels.includes("hover edges") && labels.includes("edges per token") && labels.includes("quantile knots"));
  assert.ok(!labels.includes("edges") && !labels.includes("k"), "no two controls share a name, none is called k");
  cleanup();
});
