// The user's intents, in one place: every view calls these instead of writing the model or the state
// itself. An intent updates the shared UI state (js/store/state.js) and writes the traits Python must know
// (js/model/model.js `write`, one save_changes per intent), or asks another part of the widget through a
// store event (reset the zoom, export, replay, scrub, play layers: handled by the scatter, js/exporter.js,
// js/store/playback.js and js/store/layer-play.js).

import { T, control, preview, write } from "../model/model.js";
import { throttle } from "../lib/schedule.js";
import { createDwell, prefetches } from "./prefetch.js";
import { searchOf } from "../lib/search.js";
import { headHeld } from "./state.js";
import { sourceOf } from "../model/sources.js";

// `hovered` reaches Python at most 20 times a second, at the end of each 50 ms window (never at once): the
// host sends a model's next update only once the kernel has answered the one in flight (ipywidgets keeps
// one message per model in flight), so a hover written as the pointer reaches a grid cell held the click's
// layer/head write back a whole round trip through the server (32-75 ms, median 47, at 512 tokens in
// JupyterLab; 3-5 ms without it). A click sends the pending hover with its own write instead.
export const HOVER_WRITE_MS = 50;

/**
 * @typedef {import("./state.js").State} State
 * @typedef {import("./state.js").HoverInfo} HoverInfo
 * @typedef {ReturnType<typeof createIntents>} Intents
 */

/**
 * The intents that write traits as they are (a setting) or ask for something: a run's control, a job of Python's
 * (atlas, decomposition, attribution, composition), another part of the page (replay, export, the map's zoom) or the
 * inspector's tab.
 * @param {import("../model/model.js").Model} model
 * @param {import("./store.js").Store<State>} store
 */
function askingIntents(model, store) {
  return {
    /** Write traits in one message. @param {Partial<import("../model/model.js").Traits>} values */
    write: (values) => write(model, values),
    /**
     * Set a trait without sending it yet (a slider being dragged: the views follow it at once).
     * @param {import("../model/model.js").TraitName} name
     * @param {any} value
     */
    preview: (name, value) => preview(model, { [name]: value }),
    /** Play, pause or resume, by the run's state. */
    togglePlay() {
      const state = model.get(T.state);
      control(model, state === "running" ? "pause" : state === "paused" ? "resume" : "restart");
    },
    /** @param {"restart" | "stop"} action */
    run: (action) => control(model, action),
    /** Compute the head atlas of the layer, or stop computing it. */
    toggleAtlas: () => control(model, model.get(T.atlas_state) === "running" ? "atlas_stop" : "atlas"),
    /** Ask Python for the selected layer's decomposition (the decomposition panel; it then follows the layer). */
    decompose: () => control(model, "decomposition"),
    /** Show recorded frame `index` (null: follow the run). @param {number | null} index */
    scrub: (index) => store.emit("scrub", index),
    toggleReplay: () => store.emit("replay"),
    /** Word mode: play the layers from 0 to the last (js/store/layer-play.js), or stop playing them. */
    togglePlayLayers: () => store.emit("playLayers"),
    resetView: () => store.emit("resetView"),
    /** @param {"png" | "svg"} kind */
    exportImage: (kind) => store.emit("export", kind),
    toggleRecording: () => store.emit("record"),
    /**
     * Keep token `token` as the query the attribution panel asks about (a click on the map): the inspector shows
     * it (its partners, what wrote it). @param {number} token
     */
    pin(token) {
      store.emit("pin", token);
      store.set({ tab: "token", pinned: token });
    },
    /** Show the inspector's tab `tab`. @param {import("./state.js").Tab} tab */
    showTab: (tab) => store.set({ tab }),
    /**
     * Ask Python why query `i` attends to key `j` in head (layer, head): `attribution_request` (the answer comes
     * as `attribution`).
     * @param {number} layer @param {number} head @param {number} i @param {number} j
     */
    askAttribution(layer, head, i, j) {
      write(model, { [T.attribution_request]: [layer, head, i, j] });
      store.set({ tab: "edge" }); // the answer shows where the user looks
    },
    /** Ask Python for the composition links (`composition`, computed once per text). */
    askComposition: () => control(model, "composition"),
  };
}

/**
 * @param {{model: import("../model/model.js").Model, store: import("./store.js").Store<State>,
 *   clock: import("../lib/schedule.js").Clock, metrics: {clicked: (runId: number) => void}}} parts
 */
export function createIntents({ model, store, clock, metrics }) {
  const hoverValue = () => (store.state.hover >= 0 ? store.state.hover : null);
  const hoverWriter = throttle(
    () => {
      if (model.get(T.hovered) !== hoverValue()) write(model, { [T.hovered]: hoverValue() });
    },
    HOVER_WRITE_MS,
    clock,
    { leading: false },
  );
  // the grid row the pointer rests on goes to Python, which builds its P before the click (where it pays)
  const dwell = createDwell({
    report: (value) => write(model, { [T.hovered_head]: value }),
    wanted: (layer, head) => {
      const source = sourceOf(model.get(T.mode));
      const other = layer !== model.get(T.layer) || (source.perHead && head !== model.get(T.head));
      return other && prefetches(source, store.state.doc.tokens.length);
    },
    // Python forgets the row when one of these changes (owner.py `on_p_trait`): the same row is then a new P
    scope: () => [T.mode, T.perplexity, T.exclude_special].map((name) => String(model.get(name))).join("|"),
    clock,
  });

  /**
   * A user's write (a head click) with the hover not yet written: one message, nothing in flight before it.
   * @param {Partial<import("../model/model.js").Traits>} values
   */
  function writeWithHover(values) {
    const pending = hoverWriter.pending && model.get(T.hovered) !== hoverValue();
    hoverWriter.cancel();
    write(model, pending ? { [T.hovered]: hoverValue(), ...values } : values);
  }

  /**
   * Whether head (`layer`, `head`) can be shown; on a saved page that holds no map of it, says so instead.
   * @param {number} layer
   * @param {number} head
   */
  function held(layer, head) {
    if (headHeld(store.state, layer, head)) return true;
    const offline = /** @type {import("../model/static-page.js").Offline} */ (store.state.offline);
    store.emit("notice", `${offline.label}: this page holds no map of layer ${layer} head ${head} (no kernel)`);
    return false;
  }

  /**
   * Select tokens (sorted, each once) in every view and in Python's `selected`.
   * @param {number[]} list
   */
  function select(list) {
    const n = store.state.doc.tokens.length;
    const sorted = [...new Set(list)].filter((t) => Number.isInteger(t) && t >= 0 && t < n).sort((a, b) => a - b);
    store.set({ selected: new Set(sorted) });
    write(model, { [T.selected]: sorted }); // tokens of the text only: Python refuses any other
  }

  return {
    /**
     * The pointer is over token `token` (-1: none) at `info`; Python reads it as `hovered`.
     * @param {number} token
     * @param {HoverInfo | null} info
     */
    hover(token, info) {
      const moved = token !== store.state.hover;
      store.set({ hover: token, hoverInfo: info });
      if (moved) hoverWriter.request();
    },
    /**
     * The pointer is over grid row (layer, head), or over none (layer null).
     * @param {number | null} layer
     * @param {number} head
     */
    restOnRow: (layer, head) => dwell.over(layer, head),
    /**
     * Select a head (a grid click or Enter): layer and head in one write, with a pending hover.
     * @param {number} layer
     * @param {number} head
     */
    selectHead(layer, head) {
      dwell.cancel();
      if (layer === model.get(T.layer) && head === model.get(T.head)) return;
      if (!held(layer, head)) return;
      metrics.clicked(model.get(T.run_id));
      writeWithHover({ [T.layer]: layer, [T.head]: head });
    },
    /** A head of the current layer (an atlas thumbnail). @param {number} head */
    selectAtlasHead(head) {
      metrics.clicked(model.get(T.run_id));
      const layer = model.get(T.atlas_layer) ?? model.get(T.layer); // the atlas's own layer, maybe not the shown one
      if (!held(layer, head)) return;
      writeWithHover({ [T.layer]: layer, [T.head]: head });
    },
    /**
     * Select tokens; `add` keeps the current selection (alt + lasso).
     * @param {number[]} list
     * @param {{add?: boolean}} [options]
     */
    select: (list, { add = false } = {}) => select(add ? [...store.state.selected, ...list] : list),
    /** The search matches become the selection (Enter in the search box). */
    selectMatches: () => select([...store.state.search.matches]),
    clearSelection: () => select([]),
    /** Highlight the tokens that `query`'s matches in the text touch (js/lib/search.js). @param {string} query */
    search: (query) => store.set({ search: searchOf(query, store.state.doc) }),
    /** The map's drag draws a box (else it pans; shift + drag always lassoes). @param {boolean} on */
    setBoxMode: (on) => store.set({ boxMode: Boolean(on) }),
    ...askingIntents(model, store),
    destroy() {
      hoverWriter.cancel();
      dwell.cancel();
    },
  };
}
