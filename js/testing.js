// Helpers of the node tests (js/*.test.js): not a test file itself.

import assert from "node:assert/strict";

/** Assert |a - b| <= tol. */
export const close = (a, b, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

/** A seeded uniform random number generator in [0, 1) (a linear congruential generator). */
export function rng(seed) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

/** A clock whose time moves only when told: `advance(ms)` fires the timers that fall due, in order. */
export function fakeClock() {
  let t = 0;
  let nextId = 1;
  /** @type {Map<number, {at: number, fn: () => void}>} */
  const timers = new Map();
  return {
    now: () => t,
    later(fn, ms) {
      const id = nextId++;
      timers.set(id, { at: t + ms, fn });
      return id;
    },
    cancel: (id) => timers.delete(id),
    advance(ms) {
      const end = t + ms;
      for (;;) {
        const due = [...timers.entries()].filter(([, v]) => v.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
        if (!due) break;
        timers.delete(due[0]);
        t = due[1].at;
        due[1].fn();
      }
      t = end;
    },
    get timers() {
      return timers.size;
    },
  };
}
