// Helpers of the node tests (js/*.test.js): not a test file itself.

import assert from "node:assert/strict";

/** Assert |a - b| <= tol. */
export const close = (a, b, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

/** A seeded uniform random number generator in [0, 1) (a linear congruential generator). */
export function rng(seed) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}
