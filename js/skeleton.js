// The widget's DOM skeleton: header, grid panel, scatter panel (with the run and parameter rows), text
// strip and tooltip. The views fill the boxes; nothing here listens to the model.

import { div, span } from "./dom.js";

export function buildSkeleton() {
  const root = div("hs-root");
  root.tabIndex = -1;
  const header = div("hs-header");
  const title = span("hs-title", "HeadSNE");
  const subtitle = span("hs-subtitle", "");
  const status = span("hs-status", "");
  const hint = span("hs-hint", "");
  hint.dataset.testid = "headsne-kl-hint";
  hint.hidden = true;
  status.dataset.testid = "headsne-status";
  status.setAttribute("role", "status");
  header.append(title, subtitle, hint, status);

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
  const viewRow = div("hs-controls hs-view-row");
  const scatterWrap = div("hs-scatter-wrap");
  const colourLegend = div("hs-colour-legend");
  const runRow = div("hs-controls");
  const paramRow = div("hs-params");
  scatterPanel.append(scatterTitle, viewRow, scatterWrap, colourLegend, runRow, paramRow);
  main.append(gridPanel, scatterPanel);

  const textStrip = div("hs-text", "headsne-text");
  const atlasPanel = div("hs-atlas", "headsne-atlas");
  const tooltip = div("hs-tooltip", "headsne-tooltip");
  tooltip.hidden = true;
  tooltip.setAttribute("role", "tooltip");
  root.append(header, main, textStrip, atlasPanel, tooltip);
  return {
    root,
    header,
    subtitle,
    status,
    hint,
    main,
    gridPanel,
    gridTitle,
    legend,
    legendMax,
    gridScroll,
    scatterPanel,
    scatterTitle,
    scatterCaption,
    viewRow,
    scatterWrap,
    colourLegend,
    runRow,
    paramRow,
    textStrip,
    atlasPanel,
    tooltip,
  };
}
