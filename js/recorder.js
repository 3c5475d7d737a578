// The frame recorder: every frame of the current run, kept for the timeline and the KL sparkline.
// A new run_id starts a new recording; scrubbing shows a recorded frame instead of the newest.

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
    /** @type {number | null} run of the frame on screen */
    this.shownRun = null;
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
    this.shownRun = this.frames[index].run;
    return this.frames[index];
  }
}
