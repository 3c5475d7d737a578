// headsne-widget front end (anywidget >= 0.9): the maximum-attention grid, the live attention-head t-SNE
// scatter, the text strip, the controls and the head atlas. Traits and messages: js/PROTOCOL.md and
// js/model.js. This file only wires the views to the model and to each other; the stylesheet
// js/widget.css is bundled next to it (npm run build) and loaded by anywidget's _css.

import { decodeArray, decodeEdges } from "./codecs.js";
import { T, changes, write } from "./model.js";
import { tokenRows } from "./tokens.js";
import { FrameRecorder, createFrameFeed } from "./recorder.js";
import { createReplay } from "./replay.js";
import { buildSkeleton } from "./skeleton.js";
import { createTooltip } from "./tooltip.js";
import { createMetrics } from "./metrics.js";
import { createExports } from "./export.js";
import { keepKeys } from "./dom.js";
import { coalesce, realClock, setData, setText, throttle } from "./schedule.js";
import { readTheme, watchTheme } from "./theme.js";
import { colourTokens, tokenKinds, KIND_PIECE } from "./colors.js";
import { parseQuery, searchTokens } from "./search.js";
import { partnerLines, partnerTokens, partnersOf, shownPartners } from "./partners.js";
import { createGrid } from "./grid.js";
import { createScatter } from "./scatter.js";
import { createTextStrip } from "./text.js";
import { createControls } from "./controls.js";
import { createViewBar } from "./viewbar.js";
import { createLegend } from "./legend.js";
import { createAtlas } from "./atlas.js";
import { PREFETCH_MIN_N, createDwell } from "./prefetch.js";

// `hovered` reaches Python at most 20 times a second, at the end of each 50 ms window (never at once): the
// host sends a model's next update only once the kernel has answered the one in flight (ipywidgets keeps
// one message per model in flight), so a hover written as the pointer reaches a grid cell held the click's
// layer/head write back a whole round trip through the server (32-75 ms, median 47, at 512 tokens in
// JupyterLab; 3-5 ms without it). A click sends the pending hover with its own write instead.
const HOVER_WRITE_MS = 50;
const KL_HINT_RATIO = 1.2; // the run's KL this far above the best of restarts shows a hint
// While a run streams (60+ frames a second) the status line, counter, KL, timeline and sparkline change
// at most this often: each change costs a style, layout and paint of page elements that, done for every
// frame, left too little of a 16.7 ms display frame for the scatter. Any other state shows at once.
const PANEL_MS = 66;

/**
 * The host's model with `on`/`off` that also take several space-separated events ("change:a change:b",
 * what `changes()` makes). Backbone (JupyterLab, Notebook 7) splits such a string itself; the anywidget
 * front-end module spec does not, and marimo's model keys its listeners by the whole string, so no
 * "change:x" it emits would ever reach them: nothing Python sets after the first render would show.
 * Registering each event on its own is what Backbone does, so both hosts behave the same.
 * @param {import("./model.js").Model} host
 * @returns {import("./model.js").Model}
 */
function oneEventAtATime(host) {
  const each = (/** @type {string} */ events, /** @type {(name: string) => void} */ fn) => {
    for (const name of events.split(/\s+/)) if (name) fn(name);
  };
  return {
    get: (name) => host.get(name),
    set: (name, value) => host.set(name, value),
    save_changes: () => host.save_changes(),
    send: (message) => host.send(message),
    on: (events, fn) => each(events, (name) => host.on(name, fn)),
    off: (events, fn) => each(events, (name) => host.off(name, fn)),
  };
}

/** @param {{model: import("./model.js").Model, el: HTMLElement}} props */
function render({ model: host, el }) {
  const model = oneEventAtATime(host);
  /** @type {(() => void)[]} */
  const cleanups = [];
  const listen = (name, fn) => {
    model.on(name, fn);
    cleanups.push(() => model.off(name, fn));
  };

  const dom = buildSkeleton();
  const { root, subtitle, status, scatterCaption } = dom;
  el.appendChild(root);
  cleanups.push(keepKeys(root));

  // ---- state
  let theme = null;
  let tokens = [];
  let special = [];
  let offsets = null;
  let text = "";
  let tokenRow = new Int32Array(0);
  let hover = -1;
  let selected = new Set();
  let matches = new Set();
  let edges = null;
  let attendsTo = null;
  let attendedBy = null;
  const recorder = new FrameRecorder();
  const metrics = createMetrics(root);
  const tooltip = createTooltip(root, dom.tooltip);
  root.dataset.selectedCount = "0";
  root.dataset.matchCount = "0";
  root.dataset.replaying = "false";

  // ---- the grid row the pointer rests on goes to Python, which builds its P before the click (long texts)
  const dwell = createDwell({
    report: (value) => write(model, { [T.hovered_head]: value }),
    wanted: (layer, head) =>
      tokens.length >= PREFETCH_MIN_N &&
      model.get(T.mode) !== "hidden" &&
      (layer !== model.get(T.layer) || head !== model.get(T.head)),
  });
  cleanups.push(() => dwell.cancel());

  // ---- views
  const grid = createGrid({
    scroll: dom.gridScroll,
    legend: dom.legend,
    legendMax: dom.legendMax,
    onHover: (token, info, event) => setHover(token, info, event),
    onRow: (layer, head) => dwell.over(layer, head),
    onSelect: (layer, head) => {
      dwell.cancel();
      if (layer === model.get(T.layer) && head === model.get(T.head)) return;
      metrics.clicked(model.get(T.run_id));
      writeWithHover({ [T.layer]: layer, [T.head]: head });
    },
  });
  const scatter = createScatter({
    wrap: dom.scatterWrap,
    onHover: (token, event) => setHover(token, token >= 0 ? { source: "scatter" } : null, event),
    onDraw: (count, ms, run) => metrics.drawn(count, run, ms),
    onSelect: (list, event) => userSelect(event.altKey ? [...selected, ...list] : list),
  });
  const strip = createTextStrip({
    container: dom.textStrip,
    onHover: (token, event) => setHover(token, token >= 0 ? { source: "text" } : null, event),
    onSelect: (list) => userSelect(list),
  });
  const legend = createLegend(dom.colourLegend);
  const viewBar = createViewBar({
    model,
    row: dom.viewRow,
    onSearch: (query) => search(query),
    onSearchEnter: () => userSelect([...matches]),
    onClearSelection: () => userSelect([]),
    onBoxMode: (on) => scatter.setBoxMode(on),
  });
  const controls = createControls({
    model,
    runRow: dom.runRow,
    paramRow: dom.paramRow,
    onScrub: (index) => {
      replay.stop(); // dragging the timeline ends a replay
      recorder.scrub = index;
      feed.show(true);
      panel.flush(); // the user's own scrub shows at once
    },
    onReplay: () => {
      if (replay.active) replay.stop();
      else if (replay.start()) {
        setData(root, "replaying", "true");
        controls.setReplaying(true);
      }
    },
    onExport: (kind) => (kind === "svg" ? exports.svg() : exports.png()),
    onRecord: () => exports.toggleVideo(),
    onResetView: () => scatter.resetView(),
  });
  const atlas = createAtlas({
    model,
    panel: dom.atlasPanel,
    onSelect: (head) => {
      metrics.clicked(model.get(T.run_id));
      writeWithHover({ [T.head]: head });
    },
  });
  const feed = createFrameFeed({
    model,
    recorder,
    scatter,
    controls,
    theme: () => theme,
    onError: showError,
    onPanel: () => refreshPanel(),
  });
  // the status line, counter, KL, timeline and sparkline, written together (never more than PANEL_MS stale)
  const panel = throttle(() => {
    setText(status, model.get(T.status) || "");
    onHint();
    feed.render();
  }, PANEL_MS);
  let panelFrame = 0;
  // ---- replay of the recorded run: one recorded frame per animation frame, in the browser only
  const replay = createReplay({
    count: () => recorder.frames.length,
    show: (index) => {
      recorder.scrub = index;
      feed.show(false); // a frame per display frame: no tween
      panel.request(); // the counter, KL, timeline and sparkline follow, at most every PANEL_MS
    },
    onEnd: (reason) => {
      // at the end the widget follows live frames again (the last frame stays on screen unless newer came
      // meanwhile); a stopped replay stays where it was, like a scrub
      if (reason === "end") {
        recorder.scrub = null;
        if (recorder.shown !== recorder.frames.length - 1) feed.show(true);
      }
      setData(root, "replaying", "false");
      controls.setReplaying(false);
      panel.flush();
    },
  });
  /**
   * Show the panel's new state: at once in any state but running; while running in the next animation
   * frame (after every trait of the message is in, next to the scatter's paint), throttled to PANEL_MS.
   */
  function refreshPanel() {
    if (model.get(T.state) !== "running") {
      cancelAnimationFrame(panelFrame);
      panelFrame = 0;
      panel.flush();
    } else if (!panelFrame && !panel.pending) {
      panelFrame = requestAnimationFrame(() => {
        panelFrame = 0;
        panel.request();
      });
    }
  }
  cleanups.push(
    () => replay.stop(),
    () => grid.destroy(),
    () => scatter.destroy(),
    () => strip.destroy(),
    () => controls.destroy(),
    () => viewBar.destroy(),
    () => atlas.destroy(),
    () => panel.cancel(),
    () => cancelAnimationFrame(panelFrame),
  );

  // ---- partners of a token (attends to / attended by, or neighbours in hidden-state mode)
  const partnerSource = () => ({
    edges,
    attendsTo,
    attendedBy,
    k: model.get(T.edge_k) ?? 5,
    tokenRow,
    hidden: model.get(T.mode) === "hidden",
  });
  const partnersFor = (token) => partnersOf(token, partnerSource());

  function onPartners() {
    try {
      edges = decodeEdges(model.get(T.edges));
      attendsTo = decodeEdges(model.get(T.attends_to) ?? null);
      attendedBy = decodeEdges(model.get(T.attended_by) ?? null);
    } catch (err) {
      showError(`cannot read the attention edges: ${err.message}`);
    }
    scatter.setPartners(partnersFor, model.get(T.edge_direction) || "both");
  }

  // ---- hover: one token highlighted in all views, with a tooltip; Python reads it as `hovered`
  const hoverValue = () => (hover >= 0 ? hover : null);
  const hoverWriter = throttle(
    () => {
      if (model.get(T.hovered) !== hoverValue()) write(model, { [T.hovered]: hoverValue() });
    },
    HOVER_WRITE_MS,
    realClock,
    { leading: false },
  );
  cleanups.push(() => hoverWriter.cancel());
  /** A user's write (a head click) with the hover not yet written: one message, nothing in flight before it. */
  function writeWithHover(values) {
    const pending = hoverWriter.pending && model.get(T.hovered) !== hoverValue();
    hoverWriter.cancel();
    write(model, pending ? { [T.hovered]: hoverValue(), ...values } : values);
  }

  function setHover(token, info, event, fromPython = false) {
    const changed = token !== hover;
    hover = token;
    if (changed) {
      const shown = shownPartners(partnersFor(token), model.get(T.edge_direction) || "both");
      grid.setHover(token);
      scatter.setHover(token);
      strip.setHover(token, partnerTokens(shown), info != null && info.source !== "text");
      if (!fromPython) hoverWriter.request();
    }
    if (token < 0 || !info) {
      tooltip.hide();
      return;
    }
    const above = [];
    let below = [];
    if (info.source === "grid") {
      const group = info.group >= 0 ? ` · kv group ${info.group}` : "";
      above.push(`layer ${info.layer} · head ${info.head}${group} · max attention ${info.value.toFixed(3)}`);
    } else {
      below = partnerLines(partnersFor(token), tokens, model.get(T.layer));
    }
    tooltip.show(token, { text, tokens, offsets, special }, { above, below }, event);
  }

  function onHovered() {
    const value = model.get(T.hovered);
    const token = Number.isInteger(value) && value >= 0 && value < tokens.length ? value : -1;
    if (token !== hover) setHover(token, null, undefined, true);
  }

  // ---- selection: token indices, the same in every view and in Python's `selected`
  function applySelection(list) {
    const n = tokens.length;
    selected = new Set((list || []).filter((t) => Number.isInteger(t) && t >= 0 && t < n));
    scatter.setSelection(selected);
    strip.setSelection(selected);
    grid.setMarks(selected, matches);
    viewBar.showSelected(selected.size);
    root.dataset.selectedCount = String(selected.size);
  }
  function userSelect(list) {
    const sorted = [...new Set(list)].sort((a, b) => a - b);
    applySelection(sorted);
    write(model, { [T.selected]: sorted });
  }
  const onSelected = () => applySelection(model.get(T.selected) ?? []);
  const onEscape = (event) => {
    const target = /** @type {HTMLElement} */ (event.target);
    if (event.key === "Escape" && !(target && target.closest && target.closest("input, select"))) userSelect([]);
  };
  root.addEventListener("keydown", onEscape);
  cleanups.push(() => root.removeEventListener("keydown", onEscape));

  // ---- search: matches highlighted in every view; Enter selects them
  function search(query) {
    const parsed = parseQuery(query);
    const error = parsed && "error" in parsed ? parsed.error : "";
    matches = new Set(searchTokens(parsed, tokens, text, offsets));
    scatter.setMatches(matches);
    strip.setMatches(matches);
    grid.setMarks(selected, matches);
    viewBar.showFound(matches.size, error);
    root.dataset.matchCount = String(matches.size);
  }

  // ---- colours and legend
  function recolour() {
    if (!theme) return;
    let values = null;
    try {
      const decoded = decodeArray(model.get(T.color_values) ?? null);
      values = decoded ? /** @type {Float32Array} */ (decoded.data) : null;
    } catch (err) {
      showError(`cannot read the colour values: ${err.message}`);
    }
    const result = colourTokens(model.get(T.color_mode) || "position", {
      text,
      tokens,
      offsets,
      special,
      values,
      categories: model.get(T.color_categories) ?? [],
      dark: theme.dark,
      muted: theme.muted,
      layer: model.get(T.layer),
      head: model.get(T.head),
    });
    scatter.setColours(result.colours);
    strip.setColours(result.colours);
    atlas.setColours(result.colours);
    legend.set(result.legend, result.mode);
  }

  // ---- data from Python
  function onText() {
    text = model.get(T.text) || "";
    tokens = (model.get(T.tokens) || []).map(String);
    special = model.get(T.special) || [];
    const off = model.get(T.offsets);
    offsets = Array.isArray(off) && off.length === tokens.length ? off : null;
    const kinds = tokenKinds(text, tokens, offsets, special);
    scatter.setTokens(tokens, special, (t) => kinds[t] === KIND_PIECE);
    strip.setData(text, tokens, offsets, special, []);
    recolour();
    onKept();
    hover = -1;
    tooltip.hide();
    applySelection(model.get(T.selected) ?? []);
    search(viewBar.query);
  }

  function onMaxAttention() {
    try {
      grid.setData(decodeArray(model.get(T.max_attention)), tokens);
      grid.setMarks(selected, matches);
    } catch (err) {
      showError(`cannot draw the maximum-attention grid: ${err.message}`);
    }
  }

  function onKept() {
    const kept = model.get(T.kept) || [];
    tokenRow = tokenRows(kept, tokens.length);
    scatter.setKept(kept, tokenRow);
    strip.setKept(tokenRow);
    atlas.setKept(kept);
    // the shown frame's rows belong to the old token set: wait for the new run's first frame
    if (kept.length !== scatter.pointCount) scatter.clear();
  }

  function onHeader() {
    subtitle.textContent = [
      model.get(T.model_name),
      `${model.get(T.n_layers)} layers × ${model.get(T.n_heads)} heads`,
      `${tokens.length} tokens`,
    ]
      .filter(Boolean)
      .join(" · ");
    const hidden = model.get(T.mode) === "hidden";
    scatterCaption.textContent = hidden
      ? `t-SNE of the hidden states of layer ${model.get(T.layer)} (perplexity ${model.get(T.perplexity)})`
      : `attention-head t-SNE · layer ${model.get(T.layer)} · head ${model.get(T.head)}`;
    grid.setSelection(model.get(T.layer), model.get(T.head), hidden);
    grid.setKvGroups(model.get(T.kv_groups) ?? 0);
    atlas.setSelection(model.get(T.layer), model.get(T.head), hidden);
  }

  function onState() {
    setData(root, "state", model.get(T.state) || "idle");
    setData(root, "runId", String(model.get(T.run_id) ?? 0));
    refreshPanel(); // the status line and the hint
  }

  /** A visible hint when this run's KL is far above the best of several restarts. */
  function onHint() {
    const best = model.get(T.best_kl);
    const kl = model.get(T.kl);
    const far = model.get(T.state) === "done" && best != null && kl != null && kl > KL_HINT_RATIO * best;
    if (dom.hint.hidden !== !far) dom.hint.hidden = !far;
    setText(
      dom.hint,
      far
        ? `KL ${kl.toFixed(3)} is ${(kl / best).toFixed(1)}× the best of restarts (${best.toFixed(3)}): try restarts = 10`
        : "",
    );
  }

  function showError(message) {
    panel.cancel(); // a pending panel write would cover the message with the run's status
    cancelAnimationFrame(panelFrame);
    panelFrame = 0;
    root.dataset.state = "error";
    status.textContent = message;
  }

  function onDisplay() {
    scatter.setQuantile(Boolean(model.get(T.quantile)), Math.max(2, Math.floor(model.get(T.quantile_k) ?? 100)));
    const density = model.get(T.label_density);
    scatter.setLabelDensity(density == null ? 0.5 : Number(density));
  }

  // ---- theme
  function applyTheme() {
    theme = readTheme(root);
    grid.setTheme(theme);
    scatter.setTheme(theme);
    atlas.setTheme(theme);
    onText();
    feed.drawSpark();
  }
  let themeTimer = 0;
  const stopTheme = watchTheme(() => {
    applyTheme();
    // JupyterLab swaps its theme stylesheet after flipping the body attributes: read again once it is in
    clearTimeout(themeTimer);
    themeTimer = setTimeout(applyTheme, 400);
  });
  cleanups.push(stopTheme, () => clearTimeout(themeTimer));

  // ---- exports
  const exports = createExports({
    root,
    grid,
    scatter,
    legend,
    theme: () => theme,
    title: () => {
      const f = recorder.frames[recorder.shown];
      const parts = [subtitle.textContent, scatterCaption.textContent, f ? `iteration ${f.iteration}` : ""];
      return [...parts, f && f.kl != null ? `KL ${f.kl.toFixed(3)}` : ""].filter(Boolean).join(" · ");
    },
    name: (ext) => {
      const f = recorder.frames[recorder.shown];
      return `headsne-layer${model.get(T.layer)}-head${model.get(T.head)}-iter${f ? f.iteration : 0}.${ext}`;
    },
    onError: showError,
  });
  cleanups.push(() => exports.destroy());

  // ---- wiring
  // several traits of one message fire one after the other: coalesce redraws them once
  listen(
    changes(T.text, T.tokens, T.offsets, T.special),
    coalesce(() => {
      onText();
      onMaxAttention();
      onHeader();
    }),
  );
  listen(changes(T.max_attention), onMaxAttention);
  listen(changes(T.kept), onKept);
  listen(changes(T.edges, T.attends_to, T.attended_by, T.edge_k, T.edge_direction, T.mode), onPartners);
  listen(changes(T.model_name, T.n_layers, T.n_heads, T.layer, T.head, T.mode, T.perplexity, T.kv_groups), onHeader);
  listen(changes(T.state, T.status, T.run_id, T.best_kl, T.kl), onState);
  listen(
    changes(T.frame, T.iteration, T.kl, T.run_id),
    coalesce(() => {
      if (replay.active && model.get(T.run_id) !== recorder.run) replay.stop(); // a new run ends a replay
      feed.ingest();
    }),
  );
  listen(changes(T.quantile, T.quantile_k, T.label_density), onDisplay);
  listen(changes(T.selected), onSelected);
  listen(changes(T.hovered), onHovered);
  listen(changes(T.color_mode, T.color_values, T.color_categories), coalesce(recolour));
  listen(
    changes(T.layer, T.head),
    coalesce(() => model.get(T.color_mode) === "max_attention" && recolour()),
  );

  const resizeObserver = new ResizeObserver(() => {
    grid.resize();
    scatter.resize();
  });
  resizeObserver.observe(dom.gridScroll);
  resizeObserver.observe(dom.scatterWrap);
  cleanups.push(() => resizeObserver.disconnect());

  applyTheme();
  onMaxAttention();
  onKept();
  onPartners();
  onHeader();
  onState();
  onDisplay();
  scatter.resize();
  feed.ingest();

  return () => {
    for (const fn of cleanups.splice(0)) fn();
    root.remove();
  };
}

export default { render };
