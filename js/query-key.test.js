// Query-key mode in the browser: the keys (frame rows from query_rows on) are drawn as rings and the
// queries filled, whatever the backend (js/scatter-paint.js isRing, js/point-gl.js pointStyles); the map's
// legend row says which is which; the mode select offers the mode Python allows.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "./fake-dom.js";
import { encodeArray } from "./codecs.js";
import { TOKENS, mount as mountOn } from "./widget-fixture.js";
import { isRing } from "./scatter-paint.js";
import { pointStyles } from "./point-gl.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("./widget.js")).default;
});

const mount = (extra) => mountOn(widget, extra);

test("keys are rings and queries filled in query-key mode; special tokens are rings otherwise", () => {
  const kept = [0, 1, 2, 0, 1, 2];
  const special = [true, false, false];
  const qk = { kept, special, queryRows: 3 };
  assert.deepEqual(
    kept.map((_, r) => isRing(qk, r)),
    [false, false, false, true, true, true],
  );
  assert.deepEqual(
    kept.map((_, r) => isRing({ kept, special }, r)),
    [true, false, false, true, false, false],
  );
  const rgb = new Int32Array(3);
  const { kind } = pointStyles({ ...qk, m: 6 }, rgb, { dim: false, selected: new Set() });
  assert.deepEqual(Array.from(kind), [0, 0, 0, 1, 1, 1]);
});

test("the query / key legend shows in query-key mode only, and the mode select offers it", async () => {
  const n = TOKENS.length;
  const { model, root, cleanup } = mount();
  await Promise.resolve();
  const key = root.querySelector("[data-testid=headsne-qk-key]");
  assert.equal(key.hidden, true);
  const mode = root.querySelector("[data-testid=headsne-mode]");
  assert.ok([...mode.options].some((o) => o.value === "query-key"));
  model.calls.length = 0;
  mode.value = "query-key";
  mode.dispatchEvent(new Event("change"));
  assert.deepEqual(model.calls, [["set", "mode", "query-key"], ["save_changes"]]);
  const kept = [...TOKENS.keys(), ...TOKENS.keys()];
  model.emit({
    mode: "query-key",
    query_rows: n,
    kept,
    frame: encodeArray(new Float32Array(4 * n), [2 * n, 2]),
    run_id: 2,
  });
  assert.equal(key.hidden, false);
  assert.deepEqual(
    [...key.querySelectorAll(".hs-legend-entry")].map((e) => e.dataset.style),
    ["query", "key"],
  );
  model.emit({ mode: "attention", query_rows: 0 });
  assert.equal(key.hidden, true);
  cleanup();
});
