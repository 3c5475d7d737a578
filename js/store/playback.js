// Playback of the recorded run in the browser: the timeline's scrub and the replay (js/store/replay.js), on
// the frame feed (js/model/recorder.js). A scrub or a replay stops a replay; a new run stops it too; at its end
// the widget follows live frames again (a stopped replay stays where it was, like a scrub). The intents
// ask for both through the store's "scrub" and "replay" events; `replaying` is in the state.

import { T } from "../model/model.js";
import { createReplay } from "./replay.js";

/**
 * @param {{model: import("../model/model.js").Model, store: import("./store.js").Store<import("./state.js").State>,
 *   recorder: import("../model/recorder.js").FrameRecorder, feed: ReturnType<typeof import("../model/recorder.js").createFrameFeed>,
 *   clock: import("../lib/schedule.js").Clock}} parts
 */
export function createPlayback({ model, store, recorder, feed, clock }) {
  const replay = createReplay({
    count: () => recorder.frames.length,
    show: (index) => {
      recorder.scrub = index;
      feed.show(false, "throttled"); // a frame per display frame: no tween; the panel follows within PANEL_MS
    },
    onEnd: (reason) => {
      if (reason === "end") {
        recorder.scrub = null;
        if (recorder.shown !== recorder.frames.length - 1) feed.show(true, "now");
      }
      store.set({ replaying: false });
      feed.touch("now");
    },
    clock,
  });
  const stops = [
    store.on("scrub", (/** @type {number | null} */ index) => {
      replay.stop(); // dragging the timeline ends a replay
      recorder.scrub = index;
      feed.show(true, "now"); // the user's own scrub shows at once
    }),
    store.on("replay", () => {
      if (replay.active) replay.stop();
      else if (replay.start()) store.set({ replaying: true });
    }),
  ];
  return {
    /** Take the model's frames (js/model/sync.js calls it); a new run ends a replay. */
    ingest() {
      if (replay.active && model.get(T.run_id) !== recorder.run) replay.stop();
      feed.ingest();
    },
    destroy() {
      replay.stop();
      for (const stop of stops) stop();
    },
  };
}
