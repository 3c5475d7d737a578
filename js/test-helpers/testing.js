// Helpers of the node tests (js/*.test.js): not a test file itself.

import assert from "node:assert/strict";

/** Assert |a - b| <= tol. */
export const close = (a, b, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

/** A seeded uniform random number generator in [0, 1) (a linear congruential generator). */
export function rng(seed) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

/** A display frame of the fake clock: 60 a second. */
export const FRAME_MS = 1000 / 60;

/**
 * A clock whose time moves only when told (js/lib/schedule.js `Clock`): `advance(ms)` fires the timers and
 * animation frames that fall due, in order; animation frames fall on the display's beat (every FRAME_MS)
 * and get the time of their beat. `timers` counts the waiting timers (not frames), `frames` the frames.
 */
export function fakeClock() {
  let t = 0;
  let nextId = 1;
  /** @type {Map<number, {at: number, fn: (now: number) => void, frame: boolean}>} */
  const timers = new Map();
  const add = (/** @type {(now: number) => void} */ fn, /** @type {number} */ at, frame = false) => {
    const id = nextId++;
    timers.set(id, { at, fn, frame });
    return id;
  };
  const count = (/** @type {boolean} */ frame) => [...timers.values()].filter((v) => v.frame === frame).length;
  return {
    now: () => t,
    later: (/** @type {() => void} */ fn, /** @type {number} */ ms) => add(fn, t + ms),
    cancel: (/** @type {number} */ id) => timers.delete(id),
    frame: (/** @type {(now: number) => void} */ fn) => add(fn, (Math.floor(t / FRAME_MS + 1e-9) + 1) * FRAME_MS, true),
    cancelFrame: (/** @type {number} */ id) => timers.delete(id),
    /** @param {number} ms */
    advance(ms) {
      const end = t + ms;
      for (;;) {
        const due = [...timers.entries()].filter(([, v]) => v.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
        if (!due) break;
        timers.delete(due[0]);
        t = Math.max(t, due[1].at);
        due[1].fn(t);
      }
      t = end;
    },
    get timers() {
      return count(false);
    },
    get frames() {
      return count(true);
    },
  };
}
