// throttle() with a fake clock: at most one run per window, the last request always lands at the
// window's end, flush() runs at once, cancel() drops a pending run.

import { test } from "node:test";
import assert from "node:assert/strict";
import { throttle, tweenMs } from "./schedule.js";
import { fakeClock } from "../test-helpers/testing.js";

test("throttle runs at most once a window and always runs the last request", () => {
  const clock = fakeClock();
  const runs = [];
  let value = 0;
  const th = throttle(() => runs.push([clock.now(), value]), 66, clock);
  // a 60 Hz stream of changes for one second
  for (let i = 1; i <= 60; i++) {
    value = i;
    th.request();
    clock.advance(1000 / 60);
  }
  assert.equal(runs[0][0], 0, "the first request after a quiet time runs at once");
  assert.ok(runs.length >= 14 && runs.length <= 16, `about 15 runs a second, got ${runs.length}`);
  for (let i = 1; i < runs.length; i++) assert.ok(runs[i][0] - runs[i - 1][0] >= 66 - 1e-9, "runs >= 66 ms apart");
  // the stream stops: the last value shows at most one window later, and nothing more is pending
  clock.advance(66);
  assert.equal(runs[runs.length - 1][1], 60);
  assert.equal(th.pending, false);
  assert.equal(clock.timers, 0);
  // no value was left on screen longer than the window: each change shows within 66 ms
  for (let i = 1; i <= 60; i++) {
    const changedAt = ((i - 1) * 1000) / 60;
    const shown = runs.find(([t, v]) => v >= i && t >= changedAt);
    assert.ok(shown && shown[0] - changedAt <= 66 + 1e-9, `change ${i} shown ${shown && shown[0] - changedAt} ms late`);
  }
});

test("throttle: flush runs now and drops the pending run; cancel drops it without running", () => {
  const clock = fakeClock();
  let runs = 0;
  const th = throttle(() => runs++, 66, clock);
  th.request();
  th.request();
  assert.equal(runs, 1);
  assert.equal(th.pending, true);
  th.flush();
  assert.equal(runs, 2);
  assert.equal(th.pending, false);
  clock.advance(200);
  assert.equal(runs, 2, "the dropped run never comes");
  th.request(); // a quiet window passed: at once
  assert.equal(runs, 3);
  th.request();
  th.cancel();
  clock.advance(200);
  assert.equal(runs, 3);
});

test("tweenMs: frames far enough apart glide for the gap (at most 140 ms), unless a paint is costly", () => {
  assert.equal(tweenMs(30, 1), 0); // faster than 20 a second: shown as they come
  assert.equal(tweenMs(80, 1), 80);
  assert.equal(tweenMs(500, 1), 140);
  assert.equal(tweenMs(80, 9), 0); // 8192 points: in-between paints would take the kernel's CPU
  assert.equal(tweenMs(NaN, 1), 0);
});

test("throttle with leading: false waits for the window's end even after a quiet time", () => {
  const clock = fakeClock();
  let runs = 0;
  const th = throttle(() => runs++, 50, clock, { leading: false });
  th.request();
  assert.equal(runs, 0, "not at once");
  assert.equal(th.pending, true);
  th.request(); // inside the window: still one run
  clock.advance(49);
  assert.equal(runs, 0);
  clock.advance(1);
  assert.equal(runs, 1);
  clock.advance(500); // a quiet time: still delayed
  th.request();
  assert.equal(runs, 1);
  th.cancel();
  clock.advance(100);
  assert.equal(runs, 1, "a cancelled request never runs");
  assert.equal(clock.timers, 0);
});
