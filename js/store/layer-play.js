// "Play layers" in word mode (the points are a word's occurrences across texts): layer 0 first, then, each time
// the run of the layer shown is done (`state` "done", a run started after the layer was written: `run_id`
// moved), the next layer after LAYER_HOLD_MS, up to the last. Python aligns each layer's frames to the map before
// (Procrustes), so the same points move from layer to layer and the senses separate under the user's eyes. It
// writes only `layer`; a layer or mode the user (or Python) sets, an error or the stop button ends it. The intents
// ask for it through the store's "playLayers" event (a toggle); `playingLayers` is in the state.

import { T, write } from "../model/model.js";

/** ms a finished layer's map stays before the next layer is asked for */
export const LAYER_HOLD_MS = 600;

/**
 * @param {{model: import("../model/model.js").Model, store: import("./store.js").Store<import("./state.js").State>,
 *   clock: import("../lib/schedule.js").Clock}} parts
 */
export function createLayerPlay({ model, store, clock }) {
  let target = -1; // the layer asked for
  let runAtWrite = /** @type {number | null} */ (null); // run_id when it was written (null: nothing written)
  /** @type {any} */
  let hold = null;
  const cancelHold = () => {
    if (hold !== null) clock.cancel(hold);
    hold = null;
  };

  function stop() {
    cancelHold();
    target = -1;
    if (store.state.playingLayers) store.set({ playingLayers: false });
  }

  /** Ask for layer `layer` (written only when it is not the layer already). @param {number} layer */
  function go(layer) {
    cancelHold();
    target = layer;
    if (model.get(T.layer) === layer) {
      runAtWrite = null; // its run is the current one: its "done" counts
    } else {
      runAtWrite = model.get(T.run_id) ?? 0;
      write(model, { [T.layer]: layer });
    }
    check(store.state);
  }

  /** The run of the target layer is done: hold, then the next layer (or the end). @param {import("./state.js").State} s */
  function check(s) {
    if (!s.playingLayers || hold !== null || s.state !== "done") return;
    if ((model.get(T.layer) ?? s.layer) !== target) return;
    if (runAtWrite !== null && (s.run_id ?? 0) === runAtWrite) return; // the run before the write
    hold = clock.later(() => {
      hold = null;
      const last = (store.state.n_layers ?? 0) - 1;
      if (!store.state.playingLayers) return;
      if (target >= last) stop();
      else go(target + 1);
    }, LAYER_HOLD_MS);
  }

  const stops = [
    store.on("playLayers", () => {
      if (store.state.playingLayers) return stop();
      if (!store.state.doc.word || !(store.state.n_layers ?? 0)) return;
      store.set({ playingLayers: true });
      go(0);
    }),
    store.subscribe(["layer", "mode", "state", "run_id", "doc"], (s, prev) => {
      if (!s.playingLayers) return;
      const moved = prev && s.layer !== prev.layer && s.layer !== target; // someone else chose a layer
      const other = (prev && s.mode !== prev.mode) || (prev && s.doc !== prev.doc) || s.state === "error";
      if (moved || other) stop();
      else check(s);
    }),
  ];

  return {
    destroy() {
      cancelHold();
      for (const fn of stops) fn();
    },
  };
}
