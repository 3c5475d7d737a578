// The run panel (status line, iteration counter, KL, timeline, sparkline) while frames stream: written
// at most every ~66 ms while running, at once on any other state, never left stale; and the sparkline's
// thinning of long runs. Time is a fake clock (js/test-helpers/testing.js): frames arrive at the moments a test says,
// timers and animation frames (60 a second) run only when it advances the clock.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom, fakeModel } from "../test-helpers/fake-dom.js";
import { encodeArray } from "../model/codecs.js";
import { sparkLine } from "./controls/sparkline.js";
import { fakeClock } from "../test-helpers/testing.js";

let widget;
before(async () => {
  installDom();
  widget = (await import("../widget.js")).default;
});

const TOKENS = ["a", "b", "c"];
const n = TOKENS.length;
const frame = (i) =>
  encodeArray(
    Float32Array.from({ length: 2 * n }, (_, j) => j + i),
    [n, 2],
  );

function mount() {
  // only what the run panel needs: the parameter traits are left at their defaults
  const model = fakeModel({
    text: "a b c",
    tokens: TOKENS,
    offsets: [
      [0, 1],
      [2, 3],
      [4, 5],
    ],
    special: [false, false, false],
    model_name: "tiny",
    n_layers: 1,
    n_heads: 1,
    max_attention: encodeArray(new Float32Array(n), [1, 1, n]),
    layer: 0,
    head: 0,
    n_iter: 1000,
    speed: 0,
    frame: null,
    kept: [0, 1, 2],
    iteration: 0,
    kl: null,
    run_id: 1,
    status: "starting",
    state: "running",
    edges: null,
  });
  const el = document.createElement("div");
  document.body.appendChild(el);
  const clock = fakeClock();
  const cleanup = widget.render({ model, el, clock });
  const root = el.querySelector(".hs-root");
  const text = (id) => root.querySelector(`[data-testid=${id}]`).textContent;
  /** `ms` pass: the message handlers' microtasks first, then the timers and animation frames that fall due. */
  const elapse = async (ms) => {
    await Promise.resolve();
    clock.advance(ms);
  };
  return { model, cleanup, root, text, clock, elapse };
}

test("while running the panel is written at most ~15 times a second, and the last frame always lands", async () => {
  const { model, cleanup, root, text, clock, elapse } = mount();
  const counter = root.querySelector("[data-testid=headsne-iteration]");
  let writes = 0;
  const observer = new MutationObserver((records) => (writes += records.length));
  observer.observe(counter, { childList: true, characterData: true, subtree: true });
  const t0 = clock.now();
  let i = 0;
  let maxStale = 0;
  // about 60 frames a second for half a second
  while (clock.now() - t0 < 500) {
    i++;
    model.emit({ frame: frame(i), iteration: i, kl: 2 - i / 1000, status: `running ${i}` });
    await elapse(16);
    // the counter never lags more than one window (+ timer slack) behind the newest frame
    const shown = Number(counter.textContent);
    if (shown !== i) maxStale = Math.max(maxStale, i - shown);
  }
  writes += observer.takeRecords().length;
  observer.disconnect();
  const ms = clock.now() - t0;
  assert.ok(writes <= Math.ceil(ms / 66) + 2, `${writes} counter writes for ${i} frames in ${ms.toFixed(0)} ms`);
  assert.ok(writes >= 3, `the counter moved while running (${writes} writes)`);
  assert.ok(maxStale <= 8, `the counter lagged ${maxStale} frames`);
  await elapse(80);
  assert.equal(text("headsne-iteration"), String(i), "the last frame shows within a window");
  assert.equal(text("headsne-status"), `running ${i}`);
  // the final message (done) shows at once, with no wait
  model.emit({ frame: frame(i + 1), iteration: i + 1, kl: 1.25, status: "done", state: "done" });
  await Promise.resolve();
  assert.equal(text("headsne-iteration"), String(i + 1));
  assert.equal(text("headsne-status"), "done");
  assert.match(root.querySelector(".hs-kl").textContent, /KL 1\.250/);
  assert.equal(root.dataset.state, "done");
  const timeline = /** @type {HTMLInputElement} */ (root.querySelector("[data-testid=headsne-timeline]"));
  assert.equal(timeline.max, String(i)); // i + 1 frames recorded
  cleanup();
});

test("the timeline is never disabled, so a new run does not drop its keyboard focus: aria-disabled below two frames", async () => {
  const { model, cleanup, root, elapse } = mount();
  const timeline = /** @type {HTMLInputElement} */ (root.querySelector("[data-testid=headsne-timeline]"));
  await elapse(150);
  assert.equal(timeline.disabled, false);
  assert.equal(timeline.getAttribute("aria-disabled"), "true");
  for (let i = 1; i <= 3; i++) {
    model.emit({ frame: frame(i), iteration: i, kl: 2 - i / 10, status: `running ${i}` });
    await elapse(16);
  }
  await elapse(100);
  assert.equal(timeline.max, "2");
  assert.equal(timeline.getAttribute("aria-disabled"), "false");
  assert.equal(timeline.disabled, false);
  cleanup();
});

test("pausing shows the newest status and frame at once", async () => {
  const { model, cleanup, text, elapse } = mount();
  await elapse(150); // past the window of the panel writes at mount (the mount's, then its first frame's)
  model.emit({ frame: frame(1), iteration: 1, kl: 2, status: "running 1" });
  await Promise.resolve();
  assert.equal(text("headsne-iteration"), "0", "written in the next animation frame, not in the message");
  await elapse(30);
  assert.equal(text("headsne-iteration"), "1");
  assert.equal(text("headsne-status"), "running 1");
  model.emit({ frame: frame(2), iteration: 2, kl: 1.9, status: "running 2" });
  await elapse(20);
  assert.equal(text("headsne-iteration"), "1", "inside the window: not yet");
  model.emit({ state: "paused", status: "paused at 2" });
  assert.equal(text("headsne-status"), "paused at 2");
  assert.equal(text("headsne-iteration"), "2");
  cleanup();
});

test("sparkLine keeps every point of a short run and thins a long one to four per pixel column", () => {
  const short = Array.from({ length: 5 }, (_, i) => ({ iteration: i * 10, kl: 3 - i / 2 }));
  const a = sparkLine(short, 4, 110, 24);
  assert.equal(a.xy.length, 10);
  assert.deepEqual(a.xy.slice(0, 2), [2, 3]); // the highest KL at the top
  assert.deepEqual(a.xy.slice(-2), [108, 21]);
  assert.deepEqual(a.marker, [108, 21]);
  const long = Array.from({ length: 30000 }, (_, i) => ({
    iteration: i,
    kl: 1 + Math.exp(-i / 3000) + (i % 2) * 0.01,
  }));
  const b = sparkLine(long, 100, 110, 24);
  assert.ok(b.xy.length <= 2 * 4 * 107, `${b.xy.length / 2} vertices`);
  const ys = b.xy.filter((_, j) => j % 2 === 1);
  assert.equal(Math.min(...ys), 3);
  assert.equal(Math.max(...ys), 21);
  assert.equal(sparkLine([{ iteration: 0, kl: 1 }], 0, 110, 24), null);
});

test("frames that arrive within one display frame are each shown, one animation frame apart", async () => {
  const { model, cleanup, root, elapse } = mount();
  model.emit({ frame: frame(1), iteration: 1, kl: 2 });
  await elapse(60);
  const drawn0 = Number(root.dataset.framesDrawn);
  // three frames in one go (network jitter), then a fourth and fifth: at most three wait, the oldest drops
  for (let i = 2; i <= 6; i++) {
    model.emit({ frame: frame(i), iteration: i, kl: 2 - i / 100 });
    await Promise.resolve();
  }
  await elapse(150);
  assert.equal(Number(root.dataset.framesDrawn) - drawn0, 3, "the three newest of five shown, one per paint");
  // a new run's first frame does not wait behind the old run's
  model.emit({ frame: frame(7), iteration: 7, kl: 1.9 });
  await Promise.resolve();
  model.emit({ frame: frame(8), iteration: 8, kl: 1.8 });
  await Promise.resolve();
  model.emit({ run_id: 2, frame: frame(9), iteration: 0, kl: null });
  await elapse(150);
  assert.equal(Number(root.dataset.framesDrawn) - drawn0, 4, "the new run's frame replaced the waiting ones");
  cleanup();
});
