// The widget's DOM skeleton, drawn at once (before any data), laid out to fit one screen (issue 52): the header
// (title, subtitle, and a status line of fixed height whose whole text opens on click), then three columns of one
// fixed height: the grid panel (its bar, the scroll box and the placeholder of a grid to come), the map panel (its
// title bar with the exports, the view row with the mode control and the search, the map with the box of its
// message or error, the legends with the colour and edge controls, the run row) and the inspector (tabs: the
// clicked token, an edge, the heads, the atlas, the settings); below them the text strip, foldable. Narrow cells
// stack the inspector under the map (js/widget.css, a container query). The views fill the boxes; nothing here
// listens to the model.

import { div, el, span } from "../lib/dom.js";

/** The inspector's tabs: name, label, and what the tab shows (its title). */
export const TABS = /** @type {const} */ ([
  [
    "token",
    "token",
    "the clicked token: its partners and what wrote its state (its parts: input, heads, feed-forward)",
  ],
  ["edge", "edge", "why the head attends: a partner's edge split into the component pairs of its score"],
  ["heads", "heads", "every head by similarity and kind, the heads most like the selected one, and what feeds it"],
  ["atlas", "atlas", "a small t-SNE of every head of a layer"],
  ["settings", "settings", "the mode's parameters, the t-SNE's and the display options"],
]);

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
  // the status line: one line of fixed height (a longer text is cut, and opens whole in `statusFull` on click)
  const status = el("span", {
    className: "hs-status",
    role: "status",
    tabIndex: 0,
    dataset: { testid: "headsne-status" },
  });
  const statusFull = el("div", { className: "hs-status-full", dataset: { testid: "headsne-status-full" } });
  statusFull.hidden = true;
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
  return { header, subtitle, hint, badge, status, statusFull, progress, progressBar: bar };
}

/**
 * The grid panel: title with the heat legend, the bar (sort, normalisation, what the colour means), and the body:
 * the scroll box, and over it the placeholder of a grid to come (below the bar: the two never overlap).
 */
function buildGridPanel() {
  const gridPanel = div("hs-panel hs-grid-panel");
  const gridTitle = div("hs-panel-title");
  const legend = document.createElement("canvas");
  const legendMax = span("", "1");
  const legendBox = span("hs-legend", "");
  legendBox.append(span("", "0"), legend, legendMax);
  const what = span("hs-grid-what", "max attention: click a head");
  what.title = "per layer, each head's row of maximum attention to each token; click a row to map that head";
  gridTitle.append(what, legendBox);
  const gridBar = div("hs-grid-bar");
  // what the grid's columns are (binned tokens of a long text, a zoomed range), in plain words
  const gridBins = div("hs-grid-bins", "headsne-grid-bins");
  const gridScroll = div("hs-grid-scroll");
  const gridPlaceholder = div("hs-placeholder", "headsne-placeholder");
  const gridBody = el("div", { className: "hs-grid-body" }, [gridScroll, gridPlaceholder]);
  gridPanel.append(gridTitle, gridBar, gridBins, gridBody);
  return { gridPanel, gridTitle, gridWhat: what, gridBar, gridBins, legend, legendMax, gridScroll, gridPlaceholder };
}

/**
 * The map panel: title bar (caption, exports), view row (mode, search, selection, box), the map and the box of its
 * message (an error in full, where the map would be), the legends with the colour and edge controls, the run row.
 */
function buildScatterPanel() {
  const scatterPanel = div("hs-panel hs-scatter-panel");
  const scatterTitle = div("hs-panel-title");
  const scatterCaption = span("hs-caption", "");
  scatterCaption.dataset.testid = "headsne-caption";
  const exportBar = el("span", { className: "hs-group hs-export-bar" });
  scatterTitle.append(scatterCaption, exportBar);
  const modeSlot = el("span", { className: "hs-group hs-mode-slot" });
  const viewRow = div("hs-controls hs-view-row");
  viewRow.append(modeSlot);
  const mapMessage = div("hs-map-message", "headsne-map-message");
  mapMessage.hidden = true;
  mapMessage.setAttribute("role", "alert");
  const scatterWrap = div("hs-scatter-wrap");
  scatterWrap.append(mapMessage);
  const legendRow = div("hs-legend-row");
  const colourSlot = el("span", { className: "hs-group hs-colour-slot" });
  const colourLegend = div("hs-colour-legend");
  const edgeSlot = el("span", { className: "hs-group hs-edge-slot" });
  const edgeKey = el("span", { className: "hs-edge-key", dataset: { testid: "headsne-edge-key" } });
  legendRow.append(
    el("span", { className: "hs-legend-group" }, [colourSlot, colourLegend]),
    el("span", { className: "hs-legend-group" }, [edgeSlot, edgeKey]),
  );
  const runRow = div("hs-controls hs-run-row");
  scatterPanel.append(scatterTitle, viewRow, scatterWrap, legendRow, runRow);
  return {
    scatterPanel,
    scatterTitle,
    scatterCaption,
    exportBar,
    viewRow,
    modeSlot,
    scatterWrap,
    mapMessage,
    legendRow,
    colourSlot,
    colourLegend,
    edgeSlot,
    edgeKey,
    runRow,
  };
}

/**
 * The inspector: a tab list and one pane a tab; the views fill the panes (js/views/inspector.js switches them).
 */
function buildInspector() {
  const inspector = div("hs-panel hs-inspector", "headsne-inspector");
  const tabList = el("div", { className: "hs-tabs", role: "tablist", "aria-label": "inspector" });
  const id = Math.random().toString(36).slice(2, 10);
  /** @type {Record<string, HTMLButtonElement>} */
  const tabs = {};
  /** @type {Record<string, HTMLElement>} */
  const panes = {};
  for (const [name, label, title] of TABS) {
    const testid = name === "settings" ? "headsne-settings" : `headsne-tab-${name}`;
    tabs[name] = el("button", {
      className: "hs-tab",
      role: "tab",
      text: label,
      title,
      id: `hs-tab-${name}-${id}`,
      "aria-selected": "false",
      "aria-controls": `hs-pane-${name}-${id}`,
      dataset: { testid, tab: name },
    });
    panes[name] = el("div", {
      className: `hs-pane hs-pane-${name}`,
      role: "tabpanel",
      id: `hs-pane-${name}-${id}`,
      "aria-labelledby": `hs-tab-${name}-${id}`,
      dataset: { testid: `headsne-pane-${name}`, tab: name },
    });
    panes[name].hidden = true;
    tabList.append(tabs[name]);
  }
  inspector.append(tabList, ...Object.values(panes));
  // each pane's own box, which its view hides where it has nothing to show (word mode)
  const headMapTitle = div("hs-pane-title");
  const headMapPanel = el("div", { className: "hs-head-map-panel", dataset: { testid: "headsne-head-map-panel" } }, [
    headMapTitle,
  ]);
  const atlasTitle = div("hs-pane-title hs-atlas-bar");
  const atlasPanel = el("div", { className: "hs-atlas", dataset: { testid: "headsne-atlas" } }, [atlasTitle]);
  panes.heads.append(headMapPanel);
  panes.atlas.append(atlasPanel);
  const paramRow = div("hs-params");
  const playbackRow = div("hs-param-group hs-playback");
  panes.settings.append(paramRow, playbackRow);
  return { inspector, tabList, tabs, panes, headMapPanel, headMapTitle, atlasPanel, atlasTitle, paramRow, playbackRow };
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
  const inspector = buildInspector();
  main.append(grid.gridPanel, scatter.scatterPanel, inspector.inspector);

  const below = div("hs-below");
  const text = foldable("hs-text-panel", "headsne-text-panel", "text");
  const textStrip = div("hs-text", "headsne-text");
  text.panel.append(textStrip);
  below.append(text.panel);
  const tooltip = div("hs-tooltip", "headsne-tooltip");
  tooltip.hidden = true;
  tooltip.setAttribute("role", "tooltip");
  root.append(head.header, head.statusFull, main, below, tooltip);
  return {
    root,
    ...head,
    main,
    ...grid,
    ...scatter,
    ...inspector,
    tokenPane: inspector.panes.token,
    edgePane: inspector.panes.edge,
    below,
    textPanel: text.panel,
    textTitle: text.title,
    textFold: text.fold,
    textStrip,
    tooltip,
  };
}
