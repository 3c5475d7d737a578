// headsne-widget front end (anywidget >= 0.9): the maximum-attention grid, the live attention-head t-SNE
// scatter, the text strip, the controls and the head atlas. Traits and messages: js/PROTOCOL.md and
// js/model.js. This file only wires the views to the model and to each other; the stylesheet
// js/widget.css is bundled next to it (npm run build) and loaded by anywidget's _css.

import { decodeArray, decodeEdges } from "./codecs.js";
import { T, changes, write } from "./model.js";
import { tokenRows } from "./tokens.js";
import { FrameRecorder } from "./recorder.js";
import { buildSkeleton } from "./skeleton.js";
import { createTooltip } from "./tooltip.js";
import { createMetrics } from "./metrics.js";
import { PNG_SCALE, composePng, download, downloadCanvas, recordCanvas, scatterSvg } from "./export.js";
import { keepKeys } from "./dom.js";
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

const HOVER_WRITE_MS = 50; // `hovered` reaches Python at most 20 times a second
const KL_HINT_RATIO = 1.2; // the run's KL this far above the best of restarts shows a hint

/** @param {{model: import("./model.js").Model, el: HTMLElement}} props */
function render({ model, el }) {
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
  let lastFrameObj = null;
  let video = null;
  const metrics = createMetrics(root);
  const tooltip = createTooltip(root, dom.tooltip);
  root.dataset.selectedCount = "0";
  root.dataset.matchCount = "0";

  // ---- views
  const grid = createGrid({
    scroll: dom.gridScroll,
    legend: dom.legend,
    legendMax: dom.legendMax,
    onHover: (token, info, event) => setHover(token, info, event),
    onSelect: (layer, head) => {
      if (layer === model.get(T.layer) && head === model.get(T.head)) return;
      metrics.clicked(model.get(T.run_id));
      write(model, { [T.layer]: layer, [T.head]: head });
    },
  });
  const scatter = createScatter({
    wrap: dom.scatterWrap,
    onHover: (token, event) => setHover(token, token >= 0 ? { source: "scatter" } : null, event),
    onDraw: (count) => metrics.drawn(count, recorder.shownRun),
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
      recorder.scrub = index;
      showRecorded(true);
    },
    onExport: (kind) => (kind === "svg" ? exportSvg() : exportPng()),
    onRecord: () => toggleVideo(),
    onResetView: () => scatter.resetView(),
  });
  const atlas = createAtlas({
    model,
    panel: dom.atlasPanel,
    onSelect: (head) => {
      metrics.clicked(model.get(T.run_id));
      write(model, { [T.head]: head });
    },
  });
  cleanups.push(
    () => grid.destroy(),
    () => scatter.destroy(),
    () => strip.destroy(),
    () => controls.destroy(),
    () => viewBar.destroy(),
    () => atlas.destroy(),
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
  let hoverTimer = 0;
  let hoverWritten = 0;
  function writeHover() {
    hoverTimer = 0;
    hoverWritten = performance.now();
    const value = hover >= 0 ? hover : null;
    if (model.get(T.hovered) !== value) write(model, { [T.hovered]: value });
  }
  function scheduleHoverWrite() {
    const wait = HOVER_WRITE_MS - (performance.now() - hoverWritten);
    if (wait <= 0 && !hoverTimer) writeHover();
    else if (!hoverTimer) hoverTimer = setTimeout(writeHover, Math.max(0, wait));
  }
  cleanups.push(() => clearTimeout(hoverTimer));

  function setHover(token, info, event, fromPython = false) {
    const changed = token !== hover;
    hover = token;
    if (changed) {
      const shown = shownPartners(partnersFor(token), model.get(T.edge_direction) || "both");
      grid.setHover(token);
      scatter.setHover(token);
      strip.setHover(token, partnerTokens(shown), info != null && info.source !== "text");
      if (!fromPython) scheduleHoverWrite();
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
    root.dataset.state = model.get(T.state) || "idle";
    root.dataset.runId = String(model.get(T.run_id) ?? 0);
    status.textContent = model.get(T.status) || "";
    onHint();
  }

  /** A visible hint when this run's KL is far above the best of several restarts. */
  function onHint() {
    const best = model.get(T.best_kl);
    const kl = model.get(T.kl);
    const far = model.get(T.state) === "done" && best != null && kl != null && kl > KL_HINT_RATIO * best;
    dom.hint.hidden = !far;
    dom.hint.textContent = far
      ? `KL ${kl.toFixed(3)} is ${(kl / best).toFixed(1)}× the best of restarts (${best.toFixed(3)}): try restarts = 10`
      : "";
  }

  function showError(message) {
    root.dataset.state = "error";
    status.textContent = message;
  }

  /** Record the received frame (a new run starts a new recording) and show it unless scrubbing. */
  function ingest() {
    const runId = model.get(T.run_id);
    const fresh = recorder.follow(runId);
    const obj = model.get(T.frame);
    if (obj && obj !== lastFrameObj) {
      lastFrameObj = obj;
      let decoded;
      try {
        decoded = decodeArray(obj);
      } catch (err) {
        showError(`cannot read the t-SNE frame: ${err.message}`);
        return;
      }
      if (decoded.shape.length !== 2 || decoded.shape[1] !== 2) {
        showError(`a t-SNE frame must be (m, 2), got [${decoded.shape}]`);
        return;
      }
      recorder.add({
        iteration: model.get(T.iteration) ?? 0,
        kl: model.get(T.kl),
        data: /** @type {Float32Array} */ (decoded.data),
        m: decoded.shape[0],
        run: runId,
      });
      if (recorder.scrub == null) showRecorded(true);
      else controls.setTimeline(recorder.frames.length, recorder.scrub);
    } else if (!obj && lastFrameObj) {
      lastFrameObj = null;
      recorder.clear();
      scatter.clear();
      controls.showFrame(model.get(T.iteration), model.get(T.kl));
      controls.setTimeline(0, 0);
    } else if (!recorder.last) {
      // nothing recorded yet (no frame, or a new run still showing the last run's frame): a new run
      // counts from 0 even before Python resets the iteration
      controls.showFrame(fresh ? 0 : model.get(T.iteration), fresh ? null : model.get(T.kl));
      controls.setTimeline(0, 0);
    } else if (recorder.scrub == null) {
      // iteration / kl updated without a new frame
      const last = recorder.last;
      last.iteration = model.get(T.iteration) ?? last.iteration;
      last.kl = model.get(T.kl);
      controls.showFrame(last.iteration, last.kl);
    }
    controls.drawSpark(recorder.frames, recorder.shown, theme);
  }

  function showRecorded(animate) {
    const f = recorder.take();
    if (!f) return;
    const rows = Math.min(f.m, (model.get(T.kept) || []).length);
    scatter.setFrame(f.data, rows, { animate });
    controls.showFrame(f.iteration, f.kl);
    controls.setTimeline(recorder.frames.length, recorder.shown);
    controls.drawSpark(recorder.frames, recorder.shown, theme);
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
    controls.drawSpark(recorder.frames, recorder.shown, theme);
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
  function exportTitle() {
    const f = recorder.frames[recorder.shown];
    return [
      subtitle.textContent,
      scatterCaption.textContent,
      f ? `iteration ${f.iteration}` : "",
      f && f.kl != null ? `KL ${f.kl.toFixed(3)}` : "",
    ]
      .filter(Boolean)
      .join(" · ");
  }
  function exportName(ext) {
    const f = recorder.frames[recorder.shown];
    return `headsne-layer${model.get(T.layer)}-head${model.get(T.head)}-iter${f ? f.iteration : 0}.${ext}`;
  }
  function exportPng() {
    const gridRect = grid.canvas.getBoundingClientRect();
    const out = composePng({
      grid: grid.canvas,
      gridSize: { width: gridRect.width, height: gridRect.height },
      scatter: scatter.render(PNG_SCALE),
      scatterSize: scatter.size,
      paintLegend: (c, x, y) => legend.paint(c, x, y, theme),
      theme,
      title: exportTitle(),
    });
    downloadCanvas(out, exportName("png"), root, showError);
  }
  function exportSvg() {
    const svg = scatterSvg(scatter.snapshot(), theme, exportTitle());
    download(new Blob([svg], { type: "image/svg+xml" }), exportName("svg"), root);
  }
  function toggleVideo() {
    if (video) {
      video.stop();
      video = null;
      return false;
    }
    const name = exportName("webm");
    video = recordCanvas(scatter.canvas, (blob) => download(blob, name, root), showError);
    return video != null;
  }
  cleanups.push(() => video && video.stop());

  // ---- wiring
  // several traits of one message fire one after the other: redraw once, a microtask later
  const coalesce = (fn) => {
    let queued = false;
    return () => {
      if (queued) return;
      queued = true;
      queueMicrotask(() => {
        queued = false;
        fn();
      });
    };
  };
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
  listen(changes(T.frame, T.iteration, T.kl, T.run_id), coalesce(ingest));
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
  ingest();

  return () => {
    for (const fn of cleanups.splice(0)) fn();
    root.remove();
  };
}

export default { render };
