// headsne-widget front end (anywidget >= 0.9): the maximum-attention grid, the live attention-head t-SNE
// scatter, the text strip and the controls. Traits and messages: js/PROTOCOL.md.

import "./widget.css";
import { decodeArray, decodeEdges } from "./codecs.js";
import { shownFrameIndex, tokenContext, tokenRows } from "./layout.js";
import { readTheme, watchTheme } from "./theme.js";
import { createGrid } from "./grid.js";
import { createScatter } from "./scatter.js";
import { createTextStrip } from "./text.js";
import { createControls } from "./controls.js";

function div(className, testid) {
  const node = document.createElement("div");
  node.className = className;
  if (testid) node.dataset.testid = testid;
  return node;
}

function span(className, text) {
  const node = document.createElement("span");
  if (className) node.className = className;
  node.textContent = text;
  return node;
}

function render({ model, el }) {
  const cleanups = [];
  const listen = (name, fn) => {
    model.on(name, fn);
    cleanups.push(() => model.off(name, fn));
  };

  // ---- DOM skeleton
  const root = div("hs-root");
  const header = div("hs-header");
  const title = span("hs-title", "HeadSNE");
  const subtitle = span("hs-subtitle", "");
  const status = span("hs-status", "");
  status.dataset.testid = "headsne-status";
  status.setAttribute("role", "status");
  header.append(title, subtitle, status);

  const main = div("hs-main");
  const gridPanel = div("hs-panel hs-grid-panel");
  const gridTitle = div("hs-panel-title");
  const legend = document.createElement("canvas");
  const legendMax = span("", "1");
  const legendBox = span("hs-legend", "");
  legendBox.append(span("", "0"), legend, legendMax);
  gridTitle.append(span("", "max attention per layer · head × token — click a row"), legendBox);
  const gridScroll = div("hs-grid-scroll");
  gridPanel.append(gridTitle, gridScroll);

  const scatterPanel = div("hs-panel hs-scatter-panel");
  const scatterTitle = div("hs-panel-title");
  const scatterCaption = span("", "");
  scatterTitle.append(scatterCaption, span("hs-scatter-hint", "scroll to zoom · drag to pan · double-click to reset"));
  const scatterWrap = div("hs-scatter-wrap");
  const runRow = div("hs-controls");
  const paramRow = div("hs-params");
  scatterPanel.append(scatterTitle, scatterWrap, runRow, paramRow);
  main.append(gridPanel, scatterPanel);

  const textStrip = div("hs-text", "headsne-text");
  const tooltip = div("hs-tooltip", "headsne-tooltip");
  tooltip.hidden = true;
  tooltip.setAttribute("role", "tooltip");
  root.append(header, main, textStrip, tooltip);
  el.appendChild(root);

  // ---- state
  let theme = null;
  let tokens = [];
  let special = [];
  let offsets = null;
  let text = "";
  let tokenRow = new Int32Array(0);
  let hover = -1;
  let frames = []; // recorded frames of the current run: {iteration, kl, data, m}
  let recordedRun = null;
  let lastFrameObj = null;
  let scrub = null; // index into frames while scrubbing, null while following the run
  let shown = -1;
  let shownRun = null;
  let pendingSelect = null; // {t0, runId} from the last grid click
  root.dataset.framesDrawn = "0";

  // ---- views
  const grid = createGrid({
    scroll: gridScroll,
    legend,
    legendMax,
    onHover: (token, info, event) => setHover(token, info, event),
    onSelect: (layer, head) => {
      pendingSelect = { t0: performance.now(), runId: model.get("run_id") };
      model.set("layer", layer);
      model.set("head", head);
      model.save_changes();
    },
  });
  const scatter = createScatter({
    wrap: scatterWrap,
    onHover: (token, event) => setHover(token, token >= 0 ? { source: "scatter" } : null, event),
    onDraw: (count) => {
      root.dataset.framesDrawn = String(count);
      if (pendingSelect && shownRun != null && shownRun > pendingSelect.runId) {
        root.dataset.selectLatencyMs = String(Math.round(performance.now() - pendingSelect.t0));
        pendingSelect = null;
      }
    },
  });
  const strip = createTextStrip({
    container: textStrip,
    onHover: (token, event) => setHover(token, token >= 0 ? { source: "text" } : null, event),
  });
  const controls = createControls({
    model,
    runRow,
    paramRow,
    onScrub: (index) => {
      scrub = index;
      showRecorded(true);
    },
    onExport: () => exportPng(),
    onResetView: () => scatter.resetView(),
  });
  cleanups.push(() => grid.destroy(), () => scatter.destroy(), () => strip.destroy(), () => controls.destroy());

  // ---- hover: one token highlighted in all three views, with a tooltip
  function setHover(token, info, event) {
    const changed = token !== hover;
    hover = token;
    if (changed) {
      const partners = token >= 0 ? scatter.partnersOf(token).map((p) => p.token) : [];
      grid.setHover(token);
      scatter.setHover(token);
      strip.setHover(token, partners, info != null && info.source !== "text");
    }
    if (token < 0 || !info) {
      tooltip.hidden = true;
      return;
    }
    fillTooltip(token, info);
    placeTooltip(event);
  }

  function fillTooltip(token, info) {
    const ctx = tokenContext(text, tokens, offsets, token, 6);
    const head = document.createElement("div");
    head.append(span("hs-tip-token", tokens[token] ?? ""), span("hs-tip-meta", `  #${token}${special[token] ? " · special" : ""}`));
    const lines = [head];
    if (info.source === "grid") {
      const meta = document.createElement("div");
      meta.className = "hs-tip-meta";
      meta.textContent = `layer ${info.layer} · head ${info.head} · max attention ${info.value.toFixed(3)}`;
      lines.push(meta);
    }
    const context = document.createElement("div");
    context.className = "hs-tip-context";
    const strong = document.createElement("b");
    strong.textContent = ctx.token;
    context.append(ctx.before, strong, ctx.after);
    lines.push(context);
    if (info.source !== "grid") {
      const partners = scatter.partnersOf(token);
      if (partners.length) {
        const meta = document.createElement("div");
        meta.className = "hs-tip-meta";
        meta.textContent = `attends with: ${partners.map((p) => `${tokens[p.token]} ${p.weight.toFixed(2)}`).join(", ")}`;
        lines.push(meta);
      }
    }
    tooltip.replaceChildren(...lines);
    tooltip.hidden = false;
  }

  function placeTooltip(event) {
    if (!event || event.clientX == null) return;
    const box = root.getBoundingClientRect();
    const tw = tooltip.offsetWidth, th = tooltip.offsetHeight;
    let x = event.clientX - box.left + 14;
    let y = event.clientY - box.top + 14;
    if (x + tw > box.width - 4) x = Math.max(4, event.clientX - box.left - tw - 14);
    if (y + th > box.height - 4) y = Math.max(4, event.clientY - box.top - th - 14);
    tooltip.style.left = `${x}px`;
    tooltip.style.top = `${y}px`;
  }

  // ---- data from Python
  function onText() {
    text = model.get("text") || "";
    tokens = (model.get("tokens") || []).map(String);
    special = model.get("special") || [];
    const off = model.get("offsets");
    offsets = Array.isArray(off) && off.length === tokens.length ? off : null;
    const n = tokens.length;
    const colours = tokens.map((_, i) => (theme ? theme.position(n > 1 ? i / (n - 1) : 0) : "gray"));
    scatter.setTokens(tokens, special, colours);
    strip.setData(text, tokens, offsets, special, colours);
    onKept();
    hover = -1;
    tooltip.hidden = true;
  }

  function onMaxAttention() {
    try {
      grid.setData(decodeArray(model.get("max_attention")), tokens);
    } catch (err) {
      showError(`cannot draw the maximum-attention grid: ${err.message}`);
    }
  }

  function onKept() {
    const kept = model.get("kept") || [];
    tokenRow = tokenRows(kept, tokens.length);
    scatter.setKept(kept, tokenRow);
    strip.setKept(tokenRow);
    // the shown frame's rows belong to the old token set: wait for the new run's first frame
    if (kept.length !== scatter.pointCount) scatter.clear();
  }

  function onEdges() {
    try {
      scatter.setEdges(decodeEdges(model.get("edges")), model.get("edge_k") ?? 5);
    } catch (err) {
      showError(`cannot read the attention edges: ${err.message}`);
    }
  }

  function onHeader() {
    subtitle.textContent = [
      model.get("model_name"),
      `${model.get("n_layers")} layers × ${model.get("n_heads")} heads`,
      `${tokens.length} tokens`,
    ].filter(Boolean).join(" · ");
    const mode = model.get("mode");
    scatterCaption.textContent = mode === "hidden"
      ? `t-SNE of the hidden states of layer ${model.get("layer")} (perplexity ${model.get("perplexity")})`
      : `attention-head t-SNE · layer ${model.get("layer")} · head ${model.get("head")}`;
    grid.setSelection(model.get("layer"), model.get("head"));
  }

  function onState() {
    root.dataset.state = model.get("state") || "idle";
    root.dataset.runId = String(model.get("run_id") ?? 0);
    status.textContent = model.get("status") || "";
  }

  function showError(message) {
    root.dataset.state = "error";
    status.textContent = message;
  }

  /** Record the received frame (a new run starts a new recording) and show it unless scrubbing. */

  function ingest() {
    const runId = model.get("run_id");
    if (runId !== recordedRun) {
      recordedRun = runId;
      frames = [];
      scrub = null;
    }
    const obj = model.get("frame");
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
      const record = { iteration: model.get("iteration") ?? 0, kl: model.get("kl"), data: decoded.data, m: decoded.shape[0], run: runId };
      if (frames.length && frames[frames.length - 1].iteration === record.iteration) frames[frames.length - 1] = record;
      else frames.push(record);
      if (scrub == null) showRecorded(true);
      else controls.setTimeline(frames.length, scrub);
    } else if (!obj && lastFrameObj) {
      lastFrameObj = null;
      frames = [];
      scatter.clear();
      controls.showFrame(model.get("iteration"), model.get("kl"));
      controls.setTimeline(0, 0);
    } else if (!obj && frames.length === 0) {
      controls.showFrame(model.get("iteration"), model.get("kl"));
      controls.setTimeline(0, 0);
    } else if (frames.length && scrub == null) {
      // iteration / kl updated without a new frame
      const last = frames[frames.length - 1];
      last.iteration = model.get("iteration") ?? last.iteration;
      last.kl = model.get("kl");
      controls.showFrame(last.iteration, last.kl);
    }
    controls.drawSpark(frames, shown, theme);
  }

  function showRecorded(animate) {
    const index = shownFrameIndex(frames.length, scrub, scrub == null);
    if (index < 0) return;
    const f = frames[index];
    const rows = Math.min(f.m, (model.get("kept") || []).length);
    shown = index;
    shownRun = f.run;
    scatter.setFrame(f.data, rows, { animate });
    controls.showFrame(f.iteration, f.kl);
    controls.setTimeline(frames.length, index);
    controls.drawSpark(frames, shown, theme);
  }

  function onDisplay() {
    scatter.setQuantile(Boolean(model.get("quantile")), Math.max(2, Math.floor(model.get("quantile_k") ?? 100)));
  }

  // ---- theme
  function applyTheme() {
    theme = readTheme(root);
    grid.setTheme(theme);
    scatter.setTheme(theme);
    onText();
    controls.drawSpark(frames, shown, theme);
  }
  let themeTimer = 0;
  const stopTheme = watchTheme(() => {
    applyTheme();
    // JupyterLab swaps its theme stylesheet after flipping the body attributes: read again once it is in
    clearTimeout(themeTimer);
    themeTimer = setTimeout(applyTheme, 400);
  });
  cleanups.push(stopTheme, () => clearTimeout(themeTimer));

  // ---- export
  function exportPng() {
    const g = grid.canvas, s = scatter.canvas;
    const dpr = window.devicePixelRatio || 1;
    const pad = Math.round(10 * dpr), head = Math.round(26 * dpr);
    const out = document.createElement("canvas");
    out.width = g.width + s.width + 3 * pad;
    out.height = head + Math.max(g.height, s.height) + pad;
    const c = out.getContext("2d");
    c.fillStyle = theme.bg;
    c.fillRect(0, 0, out.width, out.height);
    c.fillStyle = theme.fg;
    c.font = `600 ${Math.round(13 * dpr)}px ${theme.font}`;
    c.textBaseline = "middle";
    const f = frames[shown];
    c.fillText(
      [subtitle.textContent, scatterCaption.textContent, f ? `iteration ${f.iteration}` : "", f && f.kl != null ? `KL ${f.kl.toFixed(3)}` : ""]
        .filter(Boolean).join(" · "),
      pad, head / 2 + pad / 4,
    );
    if (g.width && g.height) c.drawImage(g, pad, head);
    if (s.width && s.height) c.drawImage(s, g.width + 2 * pad, head);
    const name = `headsne-layer${model.get("layer")}-head${model.get("head")}-iter${f ? f.iteration : 0}.png`;
    out.toBlob((blob) => {
      if (!blob) return showError("PNG export failed: the browser could not encode the image");
      const url = URL.createObjectURL(blob);
      const a = document.createElement("a");
      a.href = url;
      a.download = name;
      a.style.display = "none";
      root.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    }, "image/png");
  }

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
  listen("change:text change:tokens change:offsets change:special", coalesce(() => {
    onText();
    onMaxAttention();
    onHeader();
  }));
  listen("change:max_attention", onMaxAttention);
  listen("change:kept", onKept);
  listen("change:edges change:edge_k", onEdges);
  listen("change:model_name change:n_layers change:n_heads change:layer change:head change:mode change:perplexity", onHeader);
  listen("change:state change:status change:run_id", onState);
  listen("change:frame change:iteration change:kl change:run_id", coalesce(ingest));
  listen("change:quantile change:quantile_k", onDisplay);

  const resizeObserver = new ResizeObserver(() => {
    grid.resize();
    scatter.resize();
  });
  resizeObserver.observe(gridScroll);
  resizeObserver.observe(scatterWrap);
  cleanups.push(() => resizeObserver.disconnect());

  applyTheme();
  onMaxAttention();
  onKept();
  onEdges();
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
