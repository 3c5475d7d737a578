// What wrote it (data-testid="headsne-decomposition-panel", in the inspector's token tab): each token's state at the
// selected layer split into the parts that wrote it (headsne_widget/widget/decomposition_view.py). The token tab's
// first showing asks Python once (control "decomposition"; a forward pass with hooks), then it follows the layer.
// It shows
//  - the token's shares by term kind (`decomposition_terms`), a stacked bar: the hovered token while the pointer is
//    on one, else the token clicked last (the inspector's answer), else the last hovered: input, attention,
//    feed-forward, correction, t.e/||e||^2 each, negative ones below 0;
//  - every head's share of each token's state (`decomposition_heads`, heads x tokens as the grid), on a diverging
//    scale; a click on a head row selects that head, as a grid click does.
// Its canvases publish what they show in data-* (the browser tests read them). Text via textContent only.

import { decodeArray } from "../../model/codecs.js";
import { disposer, el, span } from "../../lib/dom.js";
import { headOf } from "../../store/state.js";
import { shownTab } from "../inspector.js";
import { TERMS, rowAt, shareText, tokenShares } from "./decomposition-parts.js";
import { LABEL_W, ROW_H, paintChart, paintHeads, sizeCanvas } from "./decomposition-draw.js";

const CHART_W = 300; // CSS px of the stacked bar chart at most (the pane's width where narrower)
const CHART_H = 120;

/**
 * @typedef {import("../../store/state.js").State} State
 * @typedef {{data: Float32Array | Int32Array, shape: number[]}} Decoded
 */

/**
 * What the panel says above its charts ("" when it shows the selected layer's).
 * @param {State} s
 */
export function decompositionNote(s) {
  const layer = s.layer ?? 0;
  switch (s.decomposition_state) {
    case "running":
      return `splitting each token's state at layer ${layer} into its parts: one forward pass with hooks…`;
    case "error":
      return s.status || "the decomposition failed";
    case "done":
      return s.decomposition_layer === layer ? "" : `splitting the states of layer ${layer}…`;
    default:
      return `open this tab to split each token's state at layer ${layer} into its parts (one forward pass with hooks)`;
  }
}

/**
 * A decomposition array of the state, decoded (null: none, or unreadable).
 * @param {State} s
 * @param {"decomposition_terms" | "decomposition_heads"} name
 * @returns {Decoded | null}
 */
function decodedOf(s, name) {
  try {
    return /** @type {Decoded | null} */ (decodeArray(/** @type {any} */ (s[name]) ?? null));
  } catch {
    return null;
  }
}

/** The panel's elements (appended by the view to the token tab, after the token's partners). */
function buildPanel() {
  const title = el("div", {
    className: "hs-pane-title",
    text: "what wrote it: the token's state split into its parts",
    title: "each token's state at the layer is the sum of what wrote it: the input, each head, each feed-forward",
  });
  const panel = el("div", { className: "hs-decomposition-panel" }, [title]);
  panel.dataset.testid = "headsne-decomposition-panel";
  const note = el("div", { className: "hs-head-map-note", dataset: { testid: "headsne-decomposition-note" } });
  const caption = el("div", { className: "hs-head-map-note", dataset: { testid: "headsne-decomposition-token" } });
  const chart = el("canvas", {
    dataset: { testid: "headsne-decomposition-chart", state: "waiting", token: "-1" },
    role: "img",
    "aria-label": "the token's state split into input, attention, feed-forward and correction shares",
  });
  const heads = el("canvas", {
    dataset: { testid: "headsne-decomposition-heads", state: "waiting" },
    role: "img",
    "aria-label": "every head's share of each token's state at the layer; click a head row to select it",
  });
  const tip = el("div", {
    className: "hs-head-tip",
    dataset: { testid: "headsne-decomposition-tip" },
    role: "tooltip",
  });
  tip.hidden = true;
  const legend = el("div", { className: "hs-head-kinds", dataset: { testid: "headsne-decomposition-legend" } });
  const body = el("div", { className: "hs-head-map-body hs-decomposition-body" }, [caption, chart, legend, heads, tip]);
  panel.append(note, body);
  const scale = el("div", { className: "hs-head-map-note", dataset: { testid: "headsne-decomposition-scale" } });
  body.insertBefore(scale, heads);
  fillLegend(legend);
  return { panel, note, caption, chart, heads, tip, legend, scale, body };
}

/**
 * The terms' legend.
 * @param {HTMLElement} legend
 */
function fillLegend(legend) {
  const terms = TERMS.map(({ label, colour }) => {
    const box = el("span", { className: "hs-swatch" });
    box.style.background = colour;
    return el("span", { className: "hs-legend-entry" }, [box, label]);
  });
  legend.replaceChildren(span("hs-legend-title", "share t·e/‖e‖² of"), ...terms);
}

/** Whether the decomposition in the state is the selected layer's. @param {State} s */
function isCurrent(s) {
  return s.decomposition_state === "done" && s.decomposition_layer === (s.layer ?? 0);
}

/**
 * The chart of token `shown`'s shares by term, and its caption; an empty chart while there are none.
 * @param {{chart: HTMLCanvasElement, caption: HTMLElement, body: HTMLElement}} parts
 * @param {State} s
 * @param {number} shown
 */
function drawChart({ chart, caption, body }, s, shown) {
  const c = chart.getContext("2d");
  const current = isCurrent(s);
  const shares = current ? tokenShares(decodedOf(s, "decomposition_terms"), shown) : null;
  const width = Math.min(CHART_W, Math.max(200, (body.clientWidth || CHART_W) - 16));
  if (!s.theme || !c || !shares) {
    chart.width = chart.height = 0;
    chart.dataset.state = "waiting";
    chart.dataset.token = "-1";
    delete chart.dataset.shares;
    caption.textContent = current ? "click or hover a token to see what wrote its state" : "";
    return;
  }
  sizeCanvas(chart, c, width, CHART_H);
  paintChart(c, s.theme, shares, { width, height: CHART_H });
  chart.dataset.state = "drawn";
  chart.dataset.token = String(shown);
  chart.dataset.layer = String(s.decomposition_layer);
  chart.dataset.shares = JSON.stringify(shares.map((v) => Number(v.toPrecision(7))));
  caption.textContent = `token #${shown} "${s.doc.tokens[shown] ?? ""}" · layer ${s.decomposition_layer}`;
}

/**
 * The pointer on the heads x tokens map: a tip names the head, the token and its share; a click selects the head.
 * @param {{heads: HTMLCanvasElement, tip: HTMLElement, store: import("../../store/store.js").Store<State>,
 *   intents: import("../../store/intents.js").Intents, scope: ReturnType<typeof disposer>,
 *   map: () => {layer: number, H: number, n: number, width: number} | null}} parts
 */
function attachHeadRows({ heads, tip, store, intents, scope, map: current }) {
  /** The (head, token) under the pointer, or null. @param {MouseEvent} event */
  function cellAt(event) {
    const map = current();
    if (!map) return null;
    const rect = heads.getBoundingClientRect();
    const x = event.clientX - rect.left;
    const head = rowAt(event.clientY - rect.top, map.H, ROW_H);
    if (head < 0 || x < 0 || x > map.width) return null;
    const token = x < LABEL_W ? -1 : Math.min(map.n - 1, Math.floor(((x - LABEL_W) / (map.width - LABEL_W)) * map.n));
    return { head, token };
  }

  scope.listen(heads, "mousemove", (/** @type {MouseEvent} */ event) => {
    const cell = cellAt(event);
    const map = current();
    const data = decodedOf(store.state, "decomposition_heads");
    if (!cell || !map || !data) {
      tip.hidden = true;
      return;
    }
    const token = cell.token >= 0 ? ` · #${cell.token} "${store.state.doc.tokens[cell.token] ?? ""}" ` : " ";
    const value = cell.token >= 0 ? shareText(data.data[cell.head * map.n + cell.token]) : "";
    tip.textContent = `L${map.layer} H${cell.head}${token}${value} · click to select`;
    tip.hidden = false;
    tip.style.left = `${Math.min(event.clientX - heads.getBoundingClientRect().left + 10, map.width - 200)}px`;
    tip.style.top = `${heads.offsetTop + (cell.head + 1) * ROW_H + 4}px`;
  });
  scope.listen(heads, "mouseleave", () => (tip.hidden = true));
  scope.listen(heads, "click", (/** @type {MouseEvent} */ event) => {
    const cell = cellAt(event);
    const map = current();
    if (cell && map) intents.selectHead(map.layer, cell.head);
  });
}

/**
 * @param {{dom: {tokenPane: HTMLElement}, store: import("../../store/store.js").Store<State>,
 *   intents: import("../../store/intents.js").Intents}} ctx
 */
export function createDecomposition({ dom, store, intents }) {
  const scope = disposer();
  const { panel, note, caption, chart, heads, tip, scale, body } = buildPanel();
  dom.tokenPane.append(panel);
  let pinned = -1; // the token clicked last
  let hovered = -1; // the token hovered last
  let shown = -1; // the token the chart shows: the hovered one, else the clicked one, else the last hovered
  const open = () => shownTab(store.state) === "token";
  /** @type {{layer: number, H: number, n: number, width: number} | null} */
  let map = null;

  const decoded = (/** @type {"decomposition_terms" | "decomposition_heads"} */ name) => decodedOf(store.state, name);
  const current = () => isCurrent(store.state);

  function ask() {
    const s = store.state;
    if (!open() || s.state === "loading" || s.offline || s.doc.word) return;
    if (s.decomposition_state === "idle" || s.decomposition_state === undefined) intents.decompose();
  }

  function drawHeads() {
    const s = store.state;
    const c = heads.getContext("2d");
    const data = current() ? decoded("decomposition_heads") : null;
    if (!s.theme || !c || !data || data.shape.length !== 2 || !open()) {
      map = null;
      heads.width = heads.height = 0;
      heads.dataset.state = "waiting";
      scale.textContent = "";
      return;
    }
    const [H, n] = data.shape;
    const width = Math.max(200, (body.clientWidth || 320) - 16);
    sizeCanvas(heads, c, width, H * ROW_H);
    const sel = headOf(s);
    const limit = paintHeads(c, s.theme, data, { width, selected: sel.hidden ? -1 : sel.head, token: shown });
    map = { layer: s.decomposition_layer ?? 0, H, n, width };
    heads.dataset.state = "drawn";
    heads.dataset.layer = String(map.layer);
    heads.dataset.heads = String(H);
    heads.dataset.tokens = String(n);
    heads.dataset.rowHeight = String(ROW_H);
    heads.dataset.labelWidth = String(LABEL_W);
    heads.dataset.limit = String(limit);
    heads.dataset.selected = sel.hidden ? "" : String(sel.head);
    scale.dataset.limit = String(limit);
    scale.textContent = `each head of layer ${map.layer} (rows) × token: its share, blue −${limit.toFixed(3)} · 0 · red +${limit.toFixed(3)}; click a row to select the head`;
  }

  function draw() {
    note.textContent = decompositionNote(store.state);
    drawChart({ chart, caption, body }, store.state, shown);
    drawHeads();
  }

  attachHeadRows({ heads, tip, store, intents, scope, map: () => map });

  /** The token the chart shows, drawn again when it changed. */
  function follow() {
    const next = store.state.hover >= 0 ? store.state.hover : pinned >= 0 ? pinned : hovered;
    if (next === shown) return;
    shown = next;
    draw();
  }
  scope.add(
    store.watch(["hover"], (s) => {
      if (s.hover >= 0) hovered = s.hover;
      follow();
    }),
  );
  scope.add(
    store.on("pin", (/** @type {number} */ token) => {
      pinned = token;
      follow();
    }),
  );
  scope.add(
    store.watch(["tab", "state"], () => {
      ask();
      draw();
    }),
  );
  scope.add(
    store.watch(
      ["decomposition_state", "decomposition_layer", "decomposition_terms", "decomposition_heads", "layer", "head"],
      draw,
    ),
  );
  scope.add(store.watch(["theme", "mode", "doc", "state", "status"], draw));
  // word mode: each occurrence's state is written in a text of its own, not decomposed here
  scope.add(
    store.watch(["doc"], (s) => {
      panel.hidden = Boolean(s.doc.word);
      pinned = -1;
    }),
  );
  const observer = new ResizeObserver(() => drawHeads());
  observer.observe(body);
  scope.add(() => observer.disconnect());
  scope.add(() => panel.remove());
  return { chart, heads, destroy: () => scope.dispose() };
}
