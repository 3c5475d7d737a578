// headsne-widget front end (anywidget >= 0.9): the maximum-attention grid, the live attention-head t-SNE
// scatter, the text strip, the controls and the head atlas. Traits and messages: js/PROTOCOL.md and
// js/model/model.js. This file only puts the parts together: the state (js/store/state.js, js/store/store.js), the model
// wiring (js/model/sync.js), the user's intents (js/store/intents.js), the frames and their playback
// (js/model/recorder.js, js/store/playback.js) and the views (js/views/views.js). The stylesheet js/widget.css is bundled
// next to it (npm run build) and loaded by anywidget's _css.

import { oneEventAtATime } from "./model/model.js";
import { FrameRecorder, createFrameFeed } from "./model/recorder.js";
import { createPlayback } from "./store/playback.js";
import { createLayerPlay } from "./store/layer-play.js";
import { buildSkeleton } from "./views/skeleton.js";
import { createMetrics } from "./lib/metrics.js";
import { keepKeys } from "./lib/dom.js";
import { realClock } from "./lib/schedule.js";
import { readTheme, watchTheme } from "./lib/theme.js";
import { createStore } from "./store/store.js";
import { initialState } from "./store/state.js";
import { connectModel } from "./model/sync.js";
import { createIntents } from "./store/intents.js";
import { mountViews } from "./views/views.js";
import { createSearcher } from "./workers/search-worker.js";
import { staticModel } from "./model/static-page.js";

const THEME_SETTLE_MS = 400; // JupyterLab swaps its theme stylesheet after flipping the body attributes

/**
 * Follow the notebook's theme into the state: read it now, at every change, and once more after the
 * host's stylesheet is in.
 * @param {HTMLElement} root
 * @param {import("./store/store.js").Store<import("./store/state.js").State>} store
 * @param {import("./lib/schedule.js").Clock} clock
 */
function followTheme(root, store, clock) {
  const apply = () => store.set({ theme: readTheme(root) });
  /** @type {any} */
  let timer = null;
  const stopWatching = watchTheme(() => {
    apply();
    if (timer !== null) clock.cancel(timer);
    timer = clock.later(apply, THEME_SETTLE_MS);
  });
  apply();
  return () => {
    stopWatching();
    if (timer !== null) clock.cancel(timer);
  };
}

/**
 * Render the widget into `el`; returns the function that removes it. `clock` schedules every timer and
 * animation frame (tests pass a fake one); `offline`: a saved page's (js/model/static-page.js), no kernel behind it.
 * @param {{model: import("./model/model.js").Model, el: HTMLElement, clock?: import("./lib/schedule.js").Clock,
 *   offline?: import("./model/static-page.js").Offline | null}} props
 */
function render({ model: host, el, clock = realClock, offline = null }) {
  const model = oneEventAtATime(host);
  const dom = buildSkeleton();
  el.appendChild(dom.root);
  const store = createStore({ ...initialState(), offline });
  const onError = (/** @type {string} */ message) => store.emit("error", message);
  const recorder = new FrameRecorder();
  const metrics = createMetrics(dom.root, clock);
  const intents = createIntents({ model, store, clock, metrics });
  const feed = createFrameFeed({ model, store, recorder, onError });
  const playback = createPlayback({ model, store, recorder, feed, clock });
  const layerPlay = createLayerPlay({ model, store, clock });
  const searcher = createSearcher({ store, clock });
  const stopTheme = followTheme(dom.root, store, clock);
  const views = mountViews({ dom, store, intents, clock, recorder, metrics });
  const sync = connectModel({ model, store, feed: playback, onError });
  sync.start();
  const stopKeys = keepKeys(dom.root);

  return () => {
    sync.stop();
    playback.destroy();
    layerPlay.destroy();
    searcher.destroy();
    for (const view of Object.values(views).reverse()) view.destroy();
    intents.destroy();
    stopTheme();
    stopKeys();
    dom.root.remove();
  };
}

/**
 * A saved page's widget (headsne_widget/export): the state of the export, no kernel.
 * @param {{state: Record<string, any>, offline: import("./model/static-page.js").Offline, el: HTMLElement,
 *   clock?: import("./lib/schedule.js").Clock}} page
 */
export function renderStatic({ state, offline, el, clock = realClock }) {
  return render({ model: /** @type {any} */ (staticModel(state, offline)), el, offline, clock });
}

export default { render };
