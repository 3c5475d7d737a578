// Replay of a recorded run in the browser: the recorded frames from the first to the last, one per
// animation frame (so at the display's rate, whatever rate Python computed them at), with no message to
// Python. A recording that still grows is followed to its newest frame. The caller shows the frames and
// decides what stopping means (js/store/playback.js: the timeline and the scatter follow; at the end the widget
// follows live frames again).

import { realClock } from "../lib/schedule.js";

/** Fewest recorded frames worth a replay. */
export const MIN_REPLAY_FRAMES = 2;

/** Whether a recording of `count` frames can be replayed. */
export const canReplay = (/** @type {number} */ count) => count >= MIN_REPLAY_FRAMES;

/**
 * A replay over a recording of `count()` frames: `show(index)` is called with 0 at `start()` and then
 * with the next index at each animation frame, up to the recording's last frame (read again every frame);
 * `onEnd(reason)` is called once when it stops: "end" in the animation frame after the last frame was
 * shown, "stopped" on `stop()`. Returns {start(), stop(), toggle(), active, index}.
 * @param {{count: () => number, show: (index: number) => void, onEnd: (reason: "end" | "stopped") => void,
 *   clock?: {frame: (fn: () => void) => any, cancelFrame: (id: any) => void}}} options `clock`: animation
 *   frames (js/lib/schedule.js `Clock`)
 */
export function createReplay({ count, show, onEnd, clock = realClock }) {
  let index = -1; // the frame shown last, -1 while not replaying
  /** @type {any} */
  let pending = null;

  function finish(/** @type {"end" | "stopped"} */ reason) {
    if (pending !== null) clock.cancelFrame(pending);
    pending = null;
    index = -1;
    onEnd(reason);
  }

  function step() {
    pending = null;
    if (index + 1 >= count()) {
      finish("end");
      return;
    }
    index++;
    show(index);
    pending = clock.frame(step);
  }

  const replay = {
    /** Start from the first frame (again, when already replaying); false with too few frames. */
    start() {
      if (!canReplay(count())) return false;
      if (pending !== null) clock.cancelFrame(pending);
      index = 0;
      show(0);
      pending = clock.frame(step);
      return true;
    },
    /** Stop where it is (nothing happens when not replaying). */
    stop() {
      if (index >= 0) finish("stopped");
    },
    /** Stop a replay, or start one; true if it started. */
    toggle() {
      if (index >= 0) {
        replay.stop();
        return false;
      }
      return replay.start();
    },
    get active() {
      return index >= 0;
    },
    /** Index of the frame shown last (-1 while not replaying). */
    get index() {
      return index;
    },
  };
  return replay;
}
