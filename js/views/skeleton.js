// The widget's DOM skeleton, drawn at once (before any data): the header with the status line and its
// progress bar, the grid panel (with the placeholder shown while the text is captured), the map panel (its
// title bar with the exports, the view row, the map, the legends, the run row and the settings, folded),
// and below them the text strip, the head map and the head atlas side by side when there is room, each
// foldable. The
// views fill the boxes; nothing here listens to the model.

import { div, el, span } from "../lib/dom.js";

/** The header: title, subtitle, KL hint, static-page badge, status line and progress bar. */
function buildHeader() {
  const header = div("hs-header");
  const title = span("hs-title", "HeadSNE");
  const subtitle = span("hs-subtitle", "");
  const hint = span("hs-hint", "");
  hint.dataset.testid = "headsne-kl-hint";
  hint.hidden = true;
  const badge = span("hs-badge", "");
  badge.dataset.testid = "headsne-static";
  badge.hidden = true;
  const status = span("hs-status", "");
  status.dataset.testid = "headsne-status";
  status.setAttribute("role", "status");
  const bar = div("hs-progress-bar");
  const progress = el("div", {
    className: "hs-progress",
    role: "progressbar",
    "aria-label": "progress",
    dataset: { testid: "headsne-progress" },
  });
  progress.append(bar);
  progress.hidden = true;
  header.append(title, subtitle, badge, hint, el("span", { className: "hs-status-box" }, [progress, status]));
  return { header, subtitle, hint, badge, status, progress, progressBar: bar };
}

/**
 * The grid panel: title with the heat legend, the bar (sort, normalisation, what the colour means), the
 * scroll box, and the placeholder of a grid to come.
 */
function buildGridPanel() {
  const gridPanel = div("hs-panel hs-grid-panel");
  const gridTitle = div("hs-panel-title");
  const legend = document.createElement("canvas");
  const legendMax = span("", "1");
  const legendBox = span("hs-legend", "");
  legendBox.append(span("", "0"), legend, legendMax);
  const what = span("hs-grid-what", "max attention · head × token: click a head");
  what.title = "per layer, each head's row of maximum attention to each token; click a row to map that head";
  gridTitle.append(what, legendBox);
  const gridBar = div("hs-grid-bar");
  const gridScroll = div("hs-grid-scroll");
  const gridPlaceholder = div("hs-placeholder", "headsne-placeholder");
  gridPanel.append(gridTitle, gridBar, gridScroll, gridPlaceholder);
  return { gridPanel, gridTitle, gridWhat: what, gridBar, legend, legendMax, gridScroll, gridPlaceholder };
}

/** The map panel: title bar (caption, exports), view row, map, legends, run row, settings. */
function buildScatterPanel() {
  const scatterPanel = div("hs-panel hs-scatter-panel");
  const scatterTitle = div("hs-panel-title");
  const scatterCaption = span("hs-caption", "");
  const exportBar = el("span", { className: "hs-group hs-export-bar" });
  scatterTitle.append(scatterCaption, exportBar);
  const viewRow = div("hs-controls hs-view-row");
  const scatterWrap = div("hs-scatter-wrap");
  const legendRow = div("hs-legend-row");
  const colourLegend = div("hs-colour-legend");
  const edgeKey = el("span", { className: "hs-edge-key", dataset: { testid: "headsne-edge-key" } });
  legendRow.append(colourLegend, edgeKey);
  const runRow = div("hs-controls hs-run-row");
  const paramRow = div("hs-params");
  paramRow.id = `hs-settings-${Math.random().toString(36).slice(2, 10)}`;
  paramRow.hidden = true;
  scatterPanel.append(scatterTitle, viewRow, scatterWrap, legendRow, runRow, paramRow);
  return { scatterPanel, scatterTitle, scatterCaption, exportBar, viewRow, scatterWrap, colourLegend, edgeKey };
}

/**
 * A foldable panel below the map: a title bar with a fold button, and its body.
 * @param {string} className
 * @param {string} testid
 * @param {string} label
 */
function foldable(className, testid, label) {
  const panel = div(`hs-panel hs-fold ${className}`, testid);
  const fold = el("button", { className: "hs-fold-button", "aria-expanded": "true", title: `fold the ${label}` });
  const title = el("div", { className: "hs-panel-title" }, [fold]);
  panel.append(title);
  return { panel, title, fold };
}

export function buildSkeleton() {
  const root = div("hs-root");
  root.tabIndex = -1;
  const head = buildHeader();
  const main = div("hs-main");
  const grid = buildGridPanel();
  const scatter = buildScatterPanel();
  main.append(grid.gridPanel, scatter.scatterPanel);
  const runRow = /** @type {HTMLElement} */ (scatter.scatterPanel.querySelector(".hs-run-row"));
  const paramRow = /** @type {HTMLElement} */ (scatter.scatterPanel.querySelector(".hs-params"));

  const below = div("hs-below");
  const text = foldable("hs-text-panel", "headsne-text-panel", "text");
  const textStrip = div("hs-text", "headsne-text");
  text.panel.append(textStrip);
  const atlas = foldable("hs-atlas", "headsne-atlas", "head atlas");
  const headMap = foldable("hs-head-map-panel", "headsne-head-map-panel", "head map");
  below.append(text.panel, headMap.panel, atlas.panel);
  const tooltip = div("hs-tooltip", "headsne-tooltip");
  tooltip.hidden = true;
  tooltip.setAttribute("role", "tooltip");
  root.append(head.header, main, below, tooltip);
  return {
    root,
    ...head,
    main,
    ...grid,
    ...scatter,
    runRow,
    paramRow,
    below,
    textPanel: text.panel,
    textTitle: text.title,
    textFold: text.fold,
    textStrip,
    atlasPanel: atlas.panel,
    atlasTitle: atlas.title,
    atlasFold: atlas.fold,
    headMapPanel: headMap.panel,
    headMapTitle: headMap.title,
    headMapFold: headMap.fold,
    tooltip,
  };
}
