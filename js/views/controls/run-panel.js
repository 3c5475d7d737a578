// The run panel: the status line, the KL hint, and the readout of the shown frame (iteration counter,
// KL, timeline, sparkline), written together. While a run streams (60+ frames a second) they change at
// most every PANEL_MS: each change costs a style, layout and paint of page elements that, done for every
// frame, left too little of a 16.7 ms display frame for the scatter. Any other state shows at once. How
// soon a readout shows is its `pace` (js/store/state.js `Readout`).

import { setText, throttle } from "../../lib/schedule.js";
import { drawSpark } from "./sparkline.js";

const PANEL_MS = 66;
const KL_HINT_RATIO = 1.2; // the run's KL this far above the best of restarts shows a hint

/**
 * @typedef {import("../../store/state.js").State} State
 * @typedef {{counter: HTMLElement, kl: HTMLElement, spark: HTMLCanvasElement,
 *   setTimeline: (count: number, index: number) => void}} ReadoutElements
 */

/**
 * The hint's text when this run's KL is far above the best of several restarts ("" for none).
 * @param {State} s
 */
export function klHint(s) {
  const { best_kl: best, kl } = s;
  if (s.state !== "done" || best == null || kl == null || !(kl > KL_HINT_RATIO * best)) return "";
  return `KL ${kl.toFixed(3)} is ${(kl / best).toFixed(1)}× the best of restarts (${best.toFixed(3)}): try restarts = 10`;
}

/**
 * @param {{store: import("../../store/store.js").Store<State>, clock: import("../../lib/schedule.js").Clock,
 *   recorder: import("../../model/recorder.js").FrameRecorder, status: HTMLElement, hint: HTMLElement,
 *   readout: ReadoutElements}} parts
 */
export function createRunPanel({ store, clock, recorder, status, hint, readout }) {
  /** @type {any} */
  let frameId = null;
  const spark = () => drawSpark(readout.spark, recorder.frames, recorder.shown, store.state.theme);

  function render() {
    const s = store.state;
    setText(status, s.status || "");
    const text = klHint(s);
    if (hint.hidden !== !text) hint.hidden = !text;
    setText(hint, text);
    const { iteration, kl, count, index } = s.readout;
    setText(readout.counter, String(iteration ?? 0));
    setText(readout.kl, kl == null || !Number.isFinite(kl) ? "KL –" : `KL ${kl.toFixed(3)}`);
    readout.setTimeline(count, index);
    spark();
  }
  const panel = throttle(render, PANEL_MS, clock);
  const cancelFrame = () => {
    if (frameId !== null) clock.cancelFrame(frameId);
    frameId = null;
  };

  /**
   * Show the panel's new state: at once in any state but running; while running in the next animation
   * frame (after every trait of the message is in, next to the scatter's paint), throttled to PANEL_MS.
   */
  function refresh() {
    if (store.state.state !== "running") {
      cancelFrame();
      panel.flush();
    } else if (frameId === null && !panel.pending) {
      frameId = clock.frame(() => {
        frameId = null;
        panel.request();
      });
    }
  }

  const stops = [
    store.subscribe(["state", "status", "run_id", "best_kl", "kl"], refresh),
    store.subscribe(["readout"], (s) => {
      if (s.readout.pace === "now") panel.flush();
      else if (s.readout.pace === "throttled") panel.request();
      else refresh();
    }),
    store.subscribe(["theme"], spark),
    store.on("error", (/** @type {string} */ message) => {
      panel.cancel(); // a pending panel write would cover the message with the run's status
      cancelFrame();
      status.textContent = message;
    }),
    store.on("notice", (/** @type {string} */ message) => {
      panel.cancel();
      cancelFrame();
      status.textContent = message;
      status.title = message;
    }),
  ];
  refresh();

  return {
    destroy() {
      panel.cancel();
      cancelFrame();
      for (const stop of stops) stop();
    },
  };
}
