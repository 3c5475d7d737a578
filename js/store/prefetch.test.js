// createDwell with a fake clock: a row is reported once the pointer has rested on it DWELL_MS, never while
// the pointer sweeps across rows, never twice in a row, never when not wanted.

import { test } from "node:test";
import assert from "node:assert/strict";
import { DWELL_MS, createDwell } from "./prefetch.js";
import { fakeClock } from "../test-helpers/testing.js";

function setup(wanted = () => true) {
  const clock = fakeClock();
  const reports = [];
  const dwell = createDwell({ report: (v) => reports.push(v), wanted, clock });
  return { clock, reports, dwell };
}

test("a row is reported after the pointer rests on it, not while it sweeps", () => {
  const { clock, reports, dwell } = setup();
  for (let h = 0; h < 10; h++) {
    dwell.over(1, h);
    clock.advance(DWELL_MS / 3);
  }
  assert.deepEqual(reports, [], "a sweep across rows reports nothing");
  dwell.over(1, 9); // the same row again: its timer is not restarted
  clock.advance(DWELL_MS - 1 - DWELL_MS / 3);
  assert.deepEqual(reports, []);
  clock.advance(1);
  assert.deepEqual(reports, [[1, 9]]);
  dwell.over(1, 9);
  clock.advance(5 * DWELL_MS);
  dwell.over(null);
  dwell.over(1, 9);
  clock.advance(5 * DWELL_MS);
  assert.deepEqual(reports, [[1, 9]], "the row last reported is not reported again");
  dwell.over(0, 3);
  clock.advance(DWELL_MS);
  assert.deepEqual(reports, [
    [1, 9],
    [0, 3],
  ]);
});

test("leaving the grid, a click or an unwanted row reports nothing", () => {
  let selected = "2:2";
  const { clock, reports, dwell } = setup((l, h) => `${l}:${h}` !== selected);
  dwell.over(2, 1);
  clock.advance(DWELL_MS / 2);
  dwell.over(null);
  clock.advance(DWELL_MS);
  dwell.over(2, 3);
  clock.advance(DWELL_MS / 2);
  dwell.cancel();
  clock.advance(DWELL_MS);
  dwell.over(2, 2);
  clock.advance(DWELL_MS);
  assert.deepEqual(reports, []);
  dwell.over(2, 4);
  selected = "2:4"; // selected meanwhile (from Python)
  clock.advance(DWELL_MS);
  assert.deepEqual(reports, []);
  assert.equal(clock.timers, 0);
});

test("the row last reported is reported again under another scope (a mode change: a new P)", () => {
  let mode = "head-output";
  const clock = fakeClock();
  const reports = [];
  const dwell = createDwell({
    report: (v) => reports.push([mode, ...v]),
    wanted: () => true,
    scope: () => mode,
    clock,
  });
  dwell.over(1, 2);
  clock.advance(DWELL_MS);
  dwell.over(null);
  mode = "hidden";
  dwell.over(1, 2);
  clock.advance(DWELL_MS);
  dwell.over(null);
  dwell.over(1, 2);
  clock.advance(DWELL_MS);
  assert.deepEqual(reports, [
    ["head-output", 1, 2],
    ["hidden", 1, 2],
  ]);
});
