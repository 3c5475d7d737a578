// Every view of the widget, registered in one place, in the order they are mounted. A view is a small
// controller: `create(ctx, views)` builds its part of the DOM (inside the skeleton's boxes, js/views/skeleton.js),
// reads the state (js/store/state.js), calls the intents (js/store/intents.js) for what the user does, and returns
// {destroy()}. `views` holds the views mounted before it (the exporter draws the grid and the map).
// A new view (a head map, a WebGL map) is one more entry here.

import { createHooks } from "./hooks.js";
import { createHeader } from "./header.js";
import { createTooltipView } from "./tooltip.js";
import { createGrid } from "./grid/grid.js";
import { createGridBar } from "./grid/grid-bar.js";
import { createScatter } from "./scatter/scatter.js";
import { createTextStrip } from "./text/text.js";
import { createLegend } from "./legend.js";
import { createViewBar } from "./controls/viewbar.js";
import { createControls } from "./controls/controls.js";
import { createParams } from "./controls/params.js";
import { createAtlas } from "./heads/atlas.js";
import { createHeadMap } from "./heads/head-map.js";
import { createDecomposition } from "./decomposition/decomposition.js";
import { createExporter } from "../export/export.js";
import { createLoading } from "./loading.js";
import { createPanels } from "./panels.js";
import { createInspector } from "./inspector.js";
import { createStatus } from "./status.js";
import { createAttribution } from "./attribution/attribution.js";

/**
 * What every view gets.
 * @typedef {object} ViewContext
 * @property {ReturnType<typeof import("./skeleton.js").buildSkeleton>} dom
 * @property {import("../store/store.js").Store<import("../store/state.js").State>} store
 * @property {import("../store/intents.js").Intents} intents
 * @property {import("../lib/schedule.js").Clock} clock
 * @property {import("../model/recorder.js").FrameRecorder} recorder
 * @property {ReturnType<typeof import("../lib/metrics.js").createMetrics>} metrics
 */

/** @typedef {{destroy: () => void}} View */

/**
 * The views by name, in mounting order.
 * @type {[string, (ctx: ViewContext, views: Record<string, any>) => View][]}
 */
export const VIEWS = [
  ["hooks", createHooks],
  ["header", createHeader],
  ["loading", createLoading],
  ["grid", createGrid],
  ["gridBar", createGridBar],
  ["scatter", createScatter],
  ["text", createTextStrip],
  ["tooltip", createTooltipView],
  ["legend", createLegend],
  ["viewbar", createViewBar],
  ["controls", createControls],
  ["status", createStatus],
  ["params", createParams],
  ["atlas", createAtlas],
  ["headMap", createHeadMap],
  ["attribution", createAttribution],
  ["decomposition", createDecomposition],
  ["panels", createPanels],
  ["inspector", createInspector],
  ["exporter", (ctx, views) => createExporter(ctx, { grid: views.grid, scatter: views.scatter })],
];

/**
 * Mount every view; returns them by name.
 * @param {ViewContext} ctx
 * @returns {Record<string, View>}
 */
export function mountViews(ctx) {
  /** @type {Record<string, View>} */
  const views = {};
  for (const [name, create] of VIEWS) views[name] = create(ctx, views);
  return views;
}
