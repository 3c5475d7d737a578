import { test } from "node:test";
import assert from "node:assert/strict";
import { scaleLinear } from "d3-scale";
import { MAX_CHARS, axisTicks, tickLabels } from "./axes.js";

// domains a run goes through: its tiny start, a frame aligned far from 0, the usual map, huge values
const DOMAINS = [
  [-3, 4],
  [-0.3, 0.3],
  [0.0044, 0.0051],
  [-1.99e-10, -1.97e-10],
  [0.0667664, 0.0667665],
  [-1e-4, 1.5e-4],
  [0.1, 0.1 + 1e-9],
  [12345, 98765],
  [1e6, 3e6],
  [-52.3, -51.9],
];

/** The number a label and the note stand for: label x 10^e + offset. */
function valueOf(label, note) {
  const num = (s) => Number(s.replace(/−/g, "-").replace(/,/g, ""));
  const power = /×1e(\S+?)(,|$)/.exec(note);
  const offset = /offset (\S+)/.exec(note);
  return num(label) * (power ? 10 ** num(power[1]) : 1) + (offset ? num(offset[1]) : 0);
}

test("tick labels fit the margin, differ, and with their note give the tick's value", () => {
  for (const domain of DOMAINS) {
    const { ticks, note } = axisTicks(scaleLinear(domain, [0, 500]), null);
    const values = scaleLinear(domain, [0, 500]).ticks(6);
    assert.ok(ticks.length >= 2, `${domain}: ticks`);
    for (const t of ticks) assert.ok(t.text.length <= MAX_CHARS, `${domain}: label ${t.text} is too long`);
    assert.equal(new Set(ticks.map((t) => t.text)).size, ticks.length, `${domain}: labels repeat`);
    const step = values[1] - values[0];
    ticks.forEach((t, i) => {
      const back = valueOf(t.text, note);
      assert.ok(Math.abs(back - values[i]) <= 0.01 * step, `${domain}: ${t.text} (${note}) is not ${values[i]}`);
    });
  }
});

test("short labels stay plain, with no note", () => {
  assert.deepEqual(tickLabels([-1, 0, 1, 2], 1), { labels: ["−1", "0", "1", "2"], note: "" });
  assert.equal(tickLabels([0.5, 1, 1.5], 0.5).note, "");
});
