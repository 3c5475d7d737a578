// The frame recorder: every frame of the current run, kept for the timeline and the KL sparkline.
// A new run_id starts a new recording; scrubbing shows a recorded frame instead of the newest.

import { decodeArray } from "./codecs.js";
import { T } from "./model.js";

/**
 * One recorded frame.
 * @typedef {{iteration: number, kl: number | null, data: Float32Array, m: number, run: number}} Frame
 */

/** Index of the recorded frame to show: the newest while following, else the scrubbed one (clamped). */
export function shownFrameIndex(count, scrub, following) {
  if (count === 0) return -1;
  if (following || scrub == null) return count - 1;
  return Math.max(0, Math.min(count - 1, scrub));
}

export class FrameRecorder {
  constructor() {
    /** @type {Frame[]} */
    this.frames = [];
    /** @type {number | null} run id of the recording */
    this.run = null;
    /** @type {number | null} index into frames while scrubbing, null while following the run */
    this.scrub = null;
    /** index of the frame on screen (-1: none) */
    this.shown = -1;
  }

  /** Start a new recording when `runId` differs from the recorded run; true if it did. */
  follow(runId) {
    if (runId === this.run) return false;
    this.run = runId;
    this.frames = [];
    this.scrub = null;
    return true;
  }

  /** Record a frame; a frame of the same iteration as the newest replaces it. */
  add(/** @type {Frame} */ frame) {
    const last = this.frames[this.frames.length - 1];
    if (last && last.iteration === frame.iteration) this.frames[this.frames.length - 1] = frame;
    else this.frames.push(frame);
  }

  /** Forget every frame (the frame trait went empty). */
  clear() {
    this.frames = [];
  }

  get last() {
    return this.frames[this.frames.length - 1] ?? null;
  }

  /** The frame to show now (and mark it shown), or null when there is none. */
  take() {
    const index = shownFrameIndex(this.frames.length, this.scrub, this.scrub == null);
    if (index < 0) return null;
    this.shown = index;
    return this.frames[index];
  }
}

/**
 * Feed the model's frames to the views: record each received frame (a new run starts a new recording)
 * and hand it to the scatter at once (it draws in its next animation frame); the counter, KL, timeline
 * and sparkline follow through `render()`, which the caller runs when it likes (`onPanel` asks for it
 * after every change: js/widget.js throttles it to ~15 a second while a run streams). Returns
 * {ingest, show(animate), render(), drawSpark()}.
 * @param {{model: import("./model.js").Model, recorder: FrameRecorder, scatter: any, controls: any,
 *   theme: () => any, onError: (message: string) => void, onPanel?: () => void}} parts
 */
export function createFrameFeed({ model, recorder, scatter, controls, theme, onError, onPanel }) {
  let lastFrameObj = null;
  // what the counter, KL and timeline are to show at the next render()
  const panel = { iteration: 0, kl: /** @type {number | null} */ (null), count: 0, index: 0 };
  const spark = () => controls.drawSpark(recorder.frames, recorder.shown, theme());
  const changed = () => (onPanel ? onPanel() : render());

  function render() {
    controls.showFrame(panel.iteration, panel.kl);
    controls.setTimeline(panel.count, panel.index);
    spark();
  }

  /** Put the frame to show (the newest, or the scrubbed one) on the scatter; the panel follows it. */
  function show(animate) {
    const f = recorder.take();
    if (!f) return;
    const rows = Math.min(f.m, (model.get(T.kept) || []).length);
    scatter.setFrame(f.data, rows, { animate, tag: f.run });
    panel.iteration = f.iteration;
    panel.kl = f.kl;
    panel.count = recorder.frames.length;
    panel.index = recorder.shown;
  }

  function ingest() {
    const runId = model.get(T.run_id);
    const fresh = recorder.follow(runId);
    const obj = model.get(T.frame);
    if (obj && obj !== lastFrameObj) {
      lastFrameObj = obj;
      let decoded;
      try {
        decoded = decodeArray(obj);
      } catch (err) {
        onError(`cannot read the t-SNE frame: ${err.message}`);
        return;
      }
      if (decoded.shape.length !== 2 || decoded.shape[1] !== 2) {
        onError(`a t-SNE frame must be (m, 2), got [${decoded.shape}]`);
        return;
      }
      recorder.add({
        iteration: model.get(T.iteration) ?? 0,
        kl: model.get(T.kl),
        data: /** @type {Float32Array} */ (decoded.data),
        m: decoded.shape[0],
        run: runId,
      });
      if (recorder.scrub == null) show(true);
      else Object.assign(panel, { count: recorder.frames.length, index: recorder.scrub });
    } else if (!obj && lastFrameObj) {
      lastFrameObj = null;
      recorder.clear();
      scatter.clear();
      Object.assign(panel, { iteration: model.get(T.iteration), kl: model.get(T.kl), count: 0, index: 0 });
    } else if (!recorder.last) {
      // nothing recorded yet (no frame, or a new run still showing the last run's frame): a new run
      // counts from 0 even before Python resets the iteration
      panel.iteration = fresh ? 0 : model.get(T.iteration);
      panel.kl = fresh ? null : model.get(T.kl);
      panel.count = panel.index = 0;
    } else if (recorder.scrub == null) {
      // iteration / kl updated without a new frame
      const last = recorder.last;
      last.iteration = model.get(T.iteration) ?? last.iteration;
      last.kl = model.get(T.kl);
      panel.iteration = last.iteration;
      panel.kl = last.kl;
    }
    changed();
  }

  return { ingest, show, render, drawSpark: spark };
}
