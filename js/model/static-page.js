// The model of a saved page (headsne_widget/export `save_html`): the widget's synced state, with no
// kernel behind it. It answers what the widget writes as the kernel would where the page can: a head whose map
// the export holds (the exported head, and every finished head of the atlas's layer) becomes the shown one,
// with its frame, KL and colours; the widget itself refuses every other head (js/store/intents.js) and says the
// page is static (`offline`, the header's badge). Hover, selection, search, colours and replay stay live.

import { encodeArray } from "./codecs.js";
import { decodeArray } from "./codecs.js";
import { sourceOf } from "./sources.js";

/**
 * What a saved page holds besides the state: its label and the heads it has a map of ("layer,head"), with
 * the token of each row of the atlas's thumbnails.
 * @typedef {{label: string, heads: [number, number][], atlas_kept: number[] | null}} Offline
 */

/**
 * A model of `state` (traits, wire arrays decoded to DataViews) that switches the map to a held head.
 * @param {Record<string, any>} state
 * @param {Offline} offline
 */
export function staticModel(state, offline) {
  /** @type {Map<string, ((...args: any[]) => void)[]>} */
  const listeners = new Map();
  const exported = { ...state };
  let shown = `${state.layer},${state.head}`;
  const set = (/** @type {string} */ name, /** @type {any} */ value) => {
    state[name] = value;
    for (const fn of listeners.get(`change:${name}`) || []) fn({ new: value });
  };

  /** The selected head's max attention per token, as the kernel sends it for colour mode max_attention. */
  function maxAttention() {
    const grid = decodeArray(state.max_attention);
    if (!grid || !sourceOf(state.mode).perHead) return null;
    const n = grid.shape[2];
    const start = (state.layer * grid.shape[1] + state.head) * n;
    return encodeArray(grid.data.slice(start, start + n), [n]);
  }

  /** What the map shows for the held head `layer`, `head`: the export's own, or its atlas thumbnail. */
  function viewOf(/** @type {number} */ layer, /** @type {number} */ head) {
    const names = ["frame", "kept", "iteration", "kl", "best_kl", "status", "edges", "attends_to", "attended_by"];
    if (layer === exported.layer && head === exported.head)
      return Object.fromEntries(names.map((k) => [k, exported[k]]));
    const atlas = decodeArray(state.atlas);
    const kl = decodeArray(state.atlas_kl);
    if (!atlas || !kl) return null;
    const m = atlas.shape[1];
    const frame = encodeArray(atlas.data.slice(head * m * 2, (head + 1) * m * 2), [m, 2]);
    const status =
      `static page: layer ${layer} head ${head} from the head atlas (${state.atlas_n_iter} iterations, seed ` +
      `${state.atlas_seed}); the export's map is layer ${exported.layer} head ${exported.head}`;
    // no best-of-restarts KL for a thumbnail: the export's would compare it with another run
    return { frame, kept: offline.atlas_kept, iteration: state.atlas_n_iter, kl: kl.data[head], best_kl: null, status };
  }

  /** The widget wrote (a head click, a colour mode): do what the kernel would, where the page can. */
  function answer() {
    const key = `${state.layer},${state.head}`;
    if (key !== shown && offline.heads.some(([l, h]) => `${l},${h}` === key)) {
      const view = viewOf(state.layer, state.head);
      if (view) {
        shown = key;
        const edges = { edges: null, attends_to: null, attended_by: null };
        for (const [name, value] of Object.entries({ ...edges, ...view })) set(name, value);
        set("run_id", state.run_id + 1);
        set("state", "done");
      }
    }
    if (state.color_mode === "max_attention") set("color_values", maxAttention());
  }

  return {
    get: (/** @type {string} */ name) => state[name],
    set,
    save_changes: answer,
    send() {},
    on(/** @type {string} */ events, /** @type {(...args: any[]) => void} */ fn) {
      for (const e of events.split(/\s+/)) if (e) listeners.set(e, [...(listeners.get(e) || []), fn]);
    },
    off(/** @type {string} */ events, /** @type {(...args: any[]) => void} */ fn) {
      for (const e of (events || "").split(/\s+/))
        listeners.set(
          e,
          (listeners.get(e) || []).filter((f) => f !== fn),
        );
    },
  };
}
