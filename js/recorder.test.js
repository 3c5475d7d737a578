import { test } from "node:test";
import assert from "node:assert/strict";
import { shownFrameIndex } from "./recorder.js";

test("shownFrameIndex follows the newest frame unless scrubbed", () => {
  assert.equal(shownFrameIndex(0, null, true), -1);
  assert.equal(shownFrameIndex(10, 3, true), 9);
  assert.equal(shownFrameIndex(10, 3, false), 3);
  assert.equal(shownFrameIndex(10, 30, false), 9);
});
