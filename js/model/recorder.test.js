import { test } from "node:test";
import assert from "node:assert/strict";
import { FrameRecorder, shownFrameIndex } from "./recorder.js";

test("shownFrameIndex follows the newest frame unless scrubbed", () => {
  assert.equal(shownFrameIndex(0, null, true), -1);
  assert.equal(shownFrameIndex(10, 3, true), 9);
  assert.equal(shownFrameIndex(10, 3, false), 3);
  assert.equal(shownFrameIndex(10, 30, false), 9);
});

test("a recording keeps at most its bytes: every other frame goes, the first and the newest stay", () => {
  const frame = (iteration) => ({ iteration, kl: null, data: new Float32Array(256), m: 128, run: 1 });
  const recorder = new FrameRecorder(10 * 1024); // ten frames of 1 KiB
  recorder.follow(1);
  for (let i = 0; i < 10; i++) recorder.add(frame(i));
  recorder.scrub = 5;
  recorder.shown = 9;
  assert.equal(recorder.frames.length, 10);
  recorder.add(frame(9)); // the same iteration replaces the newest: no growth
  assert.equal(recorder.bytes, 10 * 1024);
  recorder.add(frame(10));
  assert.deepEqual(
    recorder.frames.map((f) => f.iteration),
    [0, 2, 4, 6, 8, 10],
  );
  assert.equal(recorder.bytes, 6 * 1024);
  assert.deepEqual([recorder.scrub, recorder.shown], [2, 4], "iterations 4 and 8: the frames at or before them");
  for (let i = 11; i < 400; i++) recorder.add(frame(i));
  assert.ok(recorder.bytes <= 10 * 1024 && recorder.frames.length >= 5, `${recorder.frames.length} frames`);
  assert.deepEqual([recorder.frames[0].iteration, recorder.last.iteration], [0, 399]);
  recorder.follow(2);
  assert.equal(recorder.bytes, 0);
});
