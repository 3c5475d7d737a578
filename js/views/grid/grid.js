// The layer-wise maximum-attention grid view: one h x n heat map per layer on a single canvas
// (js/views/grid/grid-canvas.js). Every head is labelled; a click on a cell or a head label selects the head (the
// layer in hidden-state mode); arrows move a cursor and Enter selects when the grid has focus; ctrl/alt +
// wheel zooms the token axis (double-click or Escape resets), with token labels once columns are wide
// enough. Rows follow `head_order` (js/views/grid/grid-order.js): a click, a hover and the cursor's moves mean the head
// the row shows. Hovering a cell hovers its token and rests on its row (js/store/intents.js). A double-click resets the
// zoom and selects nothing: on a zoomed grid a click selects once no second click followed within
// DOUBLE_CLICK_MS (unzoomed, where a double-click has nothing to reset, a click selects at once). A head click opens
// the inspector's heads tab (js/views/inspector.js).

import { kvGroup, moveCursor, zoomRange } from "../../paint/grid-geometry.js";
import { GridCanvas } from "./grid-canvas.js";
import { disposer } from "../../lib/dom.js";
import { changed } from "../../store/store.js";
import { headOf } from "../../store/state.js";
import { mapRow } from "./grid-order.js";

export const DOUBLE_CLICK_MS = 300;

/**
 * @typedef {import("../../store/state.js").State} State
 */

/**
 * A key on the focused grid: arrows move the cursor over the rows as shown, Enter or space selects its head, Escape
 * resets the zoom.
 * @param {GridCanvas} grid
 * @param {KeyboardEvent} event
 * @param {{state: () => State, select: (layer: number, head: number) => void}} parts
 */
function keyOnGrid(grid, event, { state, select }) {
  if (!grid.geom) return;
  const sel = headOf(state());
  const c = grid.cursor ?? { layer: sel.layer, head: sel.head };
  // the cursor moves over the rows as shown (sorted by a score: js/views/grid/grid-order.js), and stays a head
  const way = sel.hidden ? null : grid.order;
  const row = way ? mapRow(way, c, "toRow") : c;
  const next = moveCursor(row, event.key, { L: grid.L, H: grid.H, hidden: sel.hidden });
  const moved = next && way ? mapRow(way, next, "toHead") : next;
  if (moved) {
    grid.cursor = moved;
  } else if (event.key === "Enter" || event.key === " ") {
    select(c.layer, c.head);
    grid.cursor = c;
  } else if (event.key === "Escape") {
    grid.resetZoom();
    grid.cursor = c;
  } else {
    return;
  }
  event.preventDefault();
  grid.reveal(grid.cursor.layer);
  grid.draw();
}

/**
 * ctrl / alt + wheel zooms the token axis round the token under the pointer.
 * @param {GridCanvas} grid
 * @param {WheelEvent} event
 */
function wheelOnGrid(grid, event) {
  const { geom } = grid;
  if (!geom || !(event.ctrlKey || event.altKey || event.metaKey)) return;
  event.preventDefault();
  const hit = grid.cellAt(event);
  const at = hit && hit.token >= 0 ? hit.token : (geom.t0 + geom.t1) / 2;
  grid.view = zoomRange(geom.t0, geom.t1, grid.n, event.deltaY < 0 ? 0.8 : 1.25, at);
  if (grid.view[0] === 0 && grid.view[1] === grid.n) grid.view = [0, 0];
  grid.resize();
}

/**
 * @param {{dom: {gridScroll: HTMLElement, gridBins: HTMLElement, legend: HTMLCanvasElement, legendMax: HTMLElement},
 *   store: import("../../store/store.js").Store<State>, intents: import("../../store/intents.js").Intents,
 *   clock: import("../../lib/schedule.js").Clock}} ctx
 */
export function createGrid({ dom, store, intents, clock }) {
  const grid = new GridCanvas(dom, () => store.state);
  const { canvas } = grid;
  const scope = disposer();
  /** @type {any} the click waiting to see whether it is half of a double-click */
  let pendingClick = null;
  const cancelClick = () => {
    if (pendingClick !== null) clock.cancel(pendingClick);
    pendingClick = null;
  };
  scope.add(cancelClick);

  /** @param {number} layer @param {number} head */
  const select = (layer, head) => {
    const sel = headOf(store.state);
    intents.selectHead(layer, sel.hidden ? sel.head : head);
    if (!store.state.doc.word) intents.showTab("heads"); // the answer to a head click: related heads, what feeds it
  };

  /** @param {MouseEvent} event */
  function onMove(event) {
    const hit = grid.cellAt(event);
    grid.hoverCell = hit;
    intents.restOnRow(hit ? hit.layer : null, hit ? hit.head : 0);
    if (hit && hit.token >= 0 && grid.values) {
      const value = grid.values[(hit.layer * grid.H + hit.head) * grid.n + hit.token];
      const cell = { ...hit, value, group: kvGroup(hit.head, grid.H, Number(store.state.kv_groups ?? 0) || 0) };
      intents.hover(hit.token, { source: "grid", x: event.clientX, y: event.clientY, cell });
    } else {
      intents.hover(-1, null);
    }
    grid.draw();
  }

  const onKey = (/** @type {KeyboardEvent} */ event) => keyOnGrid(grid, event, { state: () => store.state, select });
  const onWheel = (/** @type {WheelEvent} */ event) => wheelOnGrid(grid, event);

  scope.listen(canvas, "mousemove", onMove);
  scope.listen(canvas, "mouseleave", () => {
    grid.hoverCell = null;
    intents.restOnRow(null, 0);
    intents.hover(-1, null);
    grid.draw();
  });
  scope.listen(canvas, "click", (/** @type {MouseEvent} */ event) => {
    const hit = grid.cellAt(event);
    cancelClick();
    if (!hit || event.detail > 1) return; // the second click of a double-click selects nothing
    grid.cursor = { layer: hit.layer, head: hit.head };
    if (!grid.zoomed) select(hit.layer, hit.head);
    else
      pendingClick = clock.later(() => {
        pendingClick = null;
        select(hit.layer, hit.head);
      }, DOUBLE_CLICK_MS);
  });
  scope.listen(canvas, "keydown", onKey);
  scope.listen(canvas, "wheel", onWheel, { passive: false });
  scope.listen(canvas, "dblclick", () => {
    cancelClick();
    grid.resetZoom();
  });
  scope.listen(canvas, "focus", () => grid.draw());
  scope.listen(canvas, "blur", () => grid.draw());

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    const is = (/** @type {keyof State} */ key) => changed(s, prev, key);
    if (is("headOrder")) grid.setOrder(s.headOrder);
    if (is("grid")) grid.setData(s.grid);
    if (is("theme")) {
      grid.painted = "";
      grid.paintImage();
    }
    if (is("layer") || is("head") || is("mode")) grid.cursor = null;
    grid.draw();
    if (prev === null || headOf(s).layer !== headOf(prev).layer) grid.reveal(headOf(s).layer);
  }
  /** @type {(keyof State)[]} */
  const keys = [
    "grid",
    "headOrder",
    "theme",
    "doc",
    "layer",
    "head",
    "mode",
    "kv_groups",
    "selected",
    "search",
    "hover",
  ];
  scope.add(store.watch(keys, update));

  const observer = new ResizeObserver(() => grid.resize());
  observer.observe(dom.gridScroll);
  scope.add(() => observer.disconnect());

  return { canvas, destroy: () => scope.dispose() };
}
