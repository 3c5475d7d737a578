// The frame recorder: every frame of the current run, kept for the timeline and the KL sparkline.
// A new run_id starts a new recording; scrubbing shows a recorded frame instead of the newest. A recording
// keeps at most RECORD_BYTES of frames: beyond, every other frame goes (65536 tokens: 512 KiB a frame, a
// run of a thousand frames would hold half a gigabyte).

/** Bytes of frames a recording keeps at most (256 frames of 65536 tokens, 2048 of 8192). */
export const RECORD_BYTES = 128 * 2 ** 20;

import { decodeArray } from "./codecs.js";
import { T } from "./model.js";

/**
 * One recorded frame.
 * @typedef {{iteration: number, kl: number | null, data: Float32Array, m: number, run: number}} Frame
 */

/**
 * Index of the recorded frame to show: the newest while following, else the scrubbed one (clamped).
 * @param {number} count
 * @param {number | null} scrub
 * @param {boolean} following
 */
export function shownFrameIndex(count, scrub, following) {
  if (count === 0) return -1;
  if (following || scrub == null) return count - 1;
  return Math.max(0, Math.min(count - 1, scrub));
}

export class FrameRecorder {
  constructor(maxBytes = RECORD_BYTES) {
    this.maxBytes = maxBytes;
    this.bytes = 0; // of the recorded frames' data
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
  /** @param {number} runId */
  follow(runId) {
    if (runId === this.run) return false;
    this.run = runId;
    this.frames = [];
    this.bytes = 0;
    this.scrub = null;
    return true;
  }

  /** Record a frame; a frame of the same iteration as the newest replaces it. */
  add(/** @type {Frame} */ frame) {
    const last = this.frames[this.frames.length - 1];
    if (last && last.iteration === frame.iteration) {
      this.frames[this.frames.length - 1] = frame;
      this.bytes -= last.data.byteLength;
    } else this.frames.push(frame);
    this.bytes += frame.data.byteLength;
    if (this.bytes > this.maxBytes && this.frames.length > 2) this.thin();
  }

  /** Drop every other frame (the first and the newest stay); the scrubbed and shown indices follow. */
  thin() {
    const n = this.frames.length;
    const at = (/** @type {number} */ i) => (i >= n - 1 ? Math.ceil((n - 1) / 2) : i >> 1);
    this.frames = this.frames.filter((_, i) => i % 2 === 0 || i === n - 1);
    this.bytes = this.frames.reduce((sum, f) => sum + f.data.byteLength, 0);
    if (this.scrub != null) this.scrub = at(this.scrub);
    if (this.shown >= 0) this.shown = at(this.shown);
  }

  /** Forget every frame (the frame trait went empty). */
  clear() {
    this.frames = [];
    this.bytes = 0;
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
 * Feed the model's frames to the state: record each received frame (a new run starts a new recording) and
 * make it the state's `frame` (the scatter draws it in its next animation frame) with the `readout` the
 * run panel shows (counter, KL, timeline) at the readout's pace. Returns {ingest(), show(animate, pace),
 * touch(pace)}.
 * @param {{model: import("./model.js").Model, store: import("../store/store.js").Store<import("../store/state.js").State>,
 *   recorder: FrameRecorder, onError: (message: string) => void}} parts
 */
export function createFrameFeed({ model, store, recorder, onError }) {
  /** @type {import("./model.js").WireArray | null} */
  let lastFrameObj = null;
  /** @typedef {import("../store/state.js").Readout} Readout */
  /** @typedef {import("../store/state.js").Pace} Pace */
  /** @param {Partial<Readout>} values @param {Pace} pace */
  const readout = (values, pace) => ({ readout: { ...store.state.readout, ...values, pace } });

  /**
   * The state that puts the frame to show (the newest, or the scrubbed one) on the map, or {} when
   * there is none.
   * @param {boolean} animate
   * @param {Pace} pace
   * @returns {Partial<import("../store/state.js").State>}
   */
  function take(animate, pace) {
    const f = recorder.take();
    if (!f) return {};
    const count = Math.min(f.m, (model.get(T.kept) || []).length);
    return {
      frame: { data: f.data, count, animate, tag: f.run },
      ...readout({ iteration: f.iteration, kl: f.kl, count: recorder.frames.length, index: recorder.shown }, pace),
    };
  }

  /** @returns {Partial<import("../store/state.js").State> | null} null: the frame cannot be read */
  function received() {
    const obj = /** @type {import("./model.js").WireArray} */ (model.get(T.frame));
    lastFrameObj = obj;
    let decoded;
    try {
      decoded = decodeArray(obj);
    } catch (err) {
      onError(`cannot read the t-SNE frame: ${/** @type {Error} */ (err).message}`);
      return null;
    }
    if (!decoded || decoded.shape.length !== 2 || decoded.shape[1] !== 2) {
      onError(`a t-SNE frame must be (m, 2), got [${decoded ? decoded.shape : ""}]`);
      return null;
    }
    recorder.add({
      iteration: model.get(T.iteration) ?? 0,
      kl: model.get(T.kl),
      data: /** @type {Float32Array} */ (decoded.data),
      m: decoded.shape[0],
      run: model.get(T.run_id),
    });
    if (recorder.scrub == null) return take(true, "live");
    return readout({ count: recorder.frames.length, index: recorder.scrub }, "live");
  }

  /** What the readout shows when no frame came: the trait's iteration and KL, or the newest frame's. */
  function unchanged(/** @type {boolean} */ fresh) {
    const last = recorder.last;
    if (!last) {
      // nothing recorded yet (no frame, or a new run still showing the last run's frame): a new run
      // counts from 0 even before Python resets the iteration
      return readout(
        { iteration: fresh ? 0 : model.get(T.iteration), kl: fresh ? null : model.get(T.kl), count: 0, index: 0 },
        "live",
      );
    }
    if (recorder.scrub != null) return readout({}, "live");
    // iteration / kl updated without a new frame
    last.iteration = model.get(T.iteration) ?? last.iteration;
    last.kl = model.get(T.kl);
    return readout({ iteration: last.iteration, kl: last.kl }, "live");
  }

  function ingest() {
    const fresh = recorder.follow(model.get(T.run_id));
    const obj = model.get(T.frame);
    if (obj && obj !== lastFrameObj) {
      const patch = received();
      if (patch) store.set(patch);
    } else if (!obj && lastFrameObj) {
      lastFrameObj = null;
      recorder.clear();
      store.set({
        frame: null,
        ...readout({ iteration: model.get(T.iteration), kl: model.get(T.kl), count: 0, index: 0 }, "live"),
      });
    } else {
      store.set(unchanged(fresh));
    }
  }

  return {
    ingest,
    /**
     * Show the frame the recorder points at; the readout follows at `pace`.
     * @param {boolean} animate
     * @param {Pace} pace
     */
    show: (animate, pace) => store.set({ ...readout({}, pace), ...take(animate, pace) }),
    /** Show the readout again at `pace`. @param {Pace} pace */
    touch: (pace) => store.set(readout({}, pace)),
  };
}
