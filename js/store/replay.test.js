// createReplay with fake animation frames: one recorded frame per animation frame from the first to the
// last, a growing recording followed to its end, stop() and toggle(), too short a recording refused.

import { test } from "node:test";
import assert from "node:assert/strict";
import { canReplay, createReplay } from "./replay.js";

/** Animation frames that run only when told: `tick()` runs the callbacks requested before it. */
function fakeFrames() {
  let nextId = 1;
  /** @type {Map<number, () => void>} */
  const queued = new Map();
  return {
    frame(fn) {
      const id = nextId++;
      queued.set(id, fn);
      return id;
    },
    cancelFrame: (id) => queued.delete(id),
    tick() {
      const due = [...queued.values()];
      queued.clear();
      for (const fn of due) fn();
    },
    get pending() {
      return queued.size;
    },
  };
}

function setup(n) {
  const frames = fakeFrames();
  const shown = [];
  const ends = [];
  const recording = { n };
  const replay = createReplay({
    count: () => recording.n,
    show: (i) => shown.push(i),
    onEnd: (reason) => ends.push(reason),
    clock: frames,
  });
  return { frames, shown, ends, replay, recording };
}

test("a replay shows every recorded frame once, one per animation frame, then ends", () => {
  const { frames, shown, ends, replay } = setup(4);
  assert.equal(replay.start(), true);
  assert.deepEqual(shown, [0]);
  assert.equal(replay.active, true);
  frames.tick();
  assert.deepEqual(shown, [0, 1]);
  frames.tick();
  frames.tick();
  assert.deepEqual(shown, [0, 1, 2, 3]);
  assert.equal(replay.index, 3);
  assert.deepEqual(ends, [], "the last frame is painted in this animation frame: not over yet");
  frames.tick();
  assert.deepEqual(ends, ["end"]);
  assert.equal(replay.active, false);
  assert.equal(replay.index, -1);
  assert.equal(frames.pending, 0, "nothing left requested");
  frames.tick();
  assert.deepEqual(shown, [0, 1, 2, 3]);
  assert.deepEqual(ends, ["end"]);
});

test("a recording that grows during the replay is followed to its newest frame", () => {
  const { frames, shown, ends, replay, recording } = setup(2);
  replay.start();
  recording.n = 3;
  frames.tick();
  frames.tick();
  assert.deepEqual(shown, [0, 1, 2]);
  frames.tick();
  assert.deepEqual(ends, ["end"]);
});

test("stop and toggle stop where the replay is; start again begins at the first frame", () => {
  const { frames, shown, ends, replay } = setup(10);
  assert.equal(replay.toggle(), true);
  frames.tick();
  frames.tick();
  assert.equal(replay.toggle(), false);
  assert.deepEqual(ends, ["stopped"]);
  assert.equal(frames.pending, 0);
  frames.tick();
  assert.deepEqual(shown, [0, 1, 2]);
  replay.stop(); // not replaying: nothing happens
  assert.deepEqual(ends, ["stopped"]);
  replay.start();
  frames.tick();
  replay.start(); // a restart while replaying: from the first frame, one callback pending
  assert.equal(frames.pending, 1);
  assert.deepEqual(shown, [0, 1, 2, 0, 1, 0]);
});

test("fewer than two frames: nothing to replay", () => {
  assert.equal(canReplay(1), false);
  assert.equal(canReplay(2), true);
  const { frames, shown, ends, replay } = setup(1);
  assert.equal(replay.start(), false);
  assert.equal(replay.active, false);
  assert.equal(frames.pending, 0);
  assert.deepEqual([shown, ends], [[], []]);
});

test("a recording cleared during the replay ends it", () => {
  const { frames, ends, replay, recording } = setup(5);
  replay.start();
  recording.n = 0;
  frames.tick();
  assert.deepEqual(ends, ["end"]);
});
