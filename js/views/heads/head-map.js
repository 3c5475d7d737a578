// The head map (data-testid="headsne-head-map", a fold below the map): every head one point at its
// `head_map` place (a t-SNE of the heads' features, js/PROTOCOL.md), coloured by its kind (`head_kinds`)
// with the kinds' legend (while the tokens are coloured by a parse, by the relation it tracks best in the text,
// `head_relations`), the selected head ringed; hovering a point says "L{layer} H{head} · kind · top
// scores", a click selects that head (layer and head in one write). Under it the related heads (`related`):
// the heads most like the selected one, each a button that selects it. Text via textContent only.

import { disposer, el, span } from "../../lib/dom.js";
import { nearestPoint } from "../scatter/hittest.js";
import { headOf } from "../../store/state.js";
import { headLine, headPlaces, kindLegend, relatedHeads, relationLegend, topScores } from "./head-kinds.js";

const HEIGHT = 260; // CSS px of the map at most
const PAD = 10; // CSS px around the points
const RADIUS = 3.5;
const HIT = 9; // CSS px from a point that still hovers it

/**
 * @typedef {import("../../store/state.js").State} State
 */

/**
 * What the map says instead of points: the job to come, or what cannot be drawn ("" when it is drawn).
 * @param {State} s
 * @param {number} N heads
 */
export function headMapNote(s, N) {
  if (!N || s.state === "loading") return "";
  const map = s.headMap;
  if (!map) return "the head map comes once every head is compared (a background job after the capture)";
  if (map.shape[0] !== N || map.shape[1] !== 2) return `cannot draw the head map: ${map.shape} is not (${N}, 2)`;
  return "";
}

/**
 * What the map colours its heads by: the relations they track best while Python sends them, else their kinds; one
 * label a head, and the legend's entries (label, colour, count).
 * @param {State} s
 */
export function headLabels(s) {
  const relations = s.head_relations ?? [];
  if (relations.length) return { labels: relations, entries: relationLegend(relations, s.theme?.muted ?? "#888") };
  const kinds = s.head_kinds ?? [];
  return { labels: kinds, entries: kindLegend(kinds) };
}

/**
 * Each label's colour on the map (muted for one the legend lacks).
 * @param {State} s
 * @returns {(label: string) => string}
 */
function colourLookup(s) {
  const by = new Map(headLabels(s).entries.map((e) => [e.kind, e.colour]));
  const muted = s.theme?.muted ?? "#888";
  return (label) => by.get(label) ?? muted;
}

/** @type {(keyof State)[]} what the map is drawn from */
const DRAWN_FROM = ["headMap", "head_kinds", "head_relations", "layer", "head", "mode", "n_layers", "n_heads", "theme"];
/** @type {(keyof State)[]} what the related heads' list shows */
const RELATED_FROM = ["related", "head_kinds", "head_relations", "layer", "head", "mode", "n_layers", "n_heads"];

/**
 * The legend: one swatch per kind (or relation) on the map, with its count of heads.
 * @param {HTMLElement} legend
 * @param {State} s
 */
function fillKindLegend(legend, s) {
  legend.replaceChildren(
    ...headLabels(s).entries.map(({ kind, colour, count }) => {
      const swatch = el("span", { className: "hs-swatch" });
      swatch.style.background = colour;
      return el("span", { className: "hs-legend-entry", dataset: { kind, colour }, title: `${count} heads` }, [
        swatch,
        `${kind} ${count}`,
      ]);
    }),
  );
}

/**
 * @param {{dom: {headMapPanel: HTMLElement, headMapTitle: HTMLElement}, store: import("../../store/store.js").Store<State>,
 *   intents: import("../../store/intents.js").Intents}} ctx
 */
export function createHeadMap({ dom, store, intents }) {
  const scope = disposer();
  const panel = dom.headMapPanel;
  const title = span("hs-head-map-title", "head map");
  dom.headMapTitle.append(title);
  const canvas = el("canvas", {
    dataset: { testid: "headsne-head-map", heads: "0", state: "waiting" },
    role: "img",
    "aria-label": "every head placed by similarity, coloured by kind; click a head to map it",
  });
  const tip = el("div", { className: "hs-head-tip", dataset: { testid: "headsne-head-tip" }, role: "tooltip" });
  tip.hidden = true;
  const body = el("div", { className: "hs-head-map-body" }, [canvas, tip]);
  const note = el("div", { className: "hs-head-map-note", dataset: { testid: "headsne-head-map-note" } });
  const legend = el("div", { className: "hs-head-kinds", dataset: { testid: "headsne-head-kinds" } });
  const related = el("div", { className: "hs-related-list", dataset: { testid: "headsne-related" } });
  panel.append(note, body, legend, related);
  /** @type {ReturnType<typeof headPlaces> | null} */
  let places = null;
  let hovered = -1;

  const shape = () => ({ L: store.state.n_layers || 0, H: store.state.n_heads || 0 });
  const kinds = () => headLabels(store.state).labels;

  function draw() {
    const s = store.state;
    const { L, H } = shape();
    const N = L * H;
    const text = headMapNote(s, N);
    note.textContent = text;
    const map = s.headMap;
    const c = canvas.getContext("2d");
    if (!s.theme || !c || text || !map || !N) {
      places = null;
      canvas.width = canvas.height = 0;
      canvas.dataset.heads = "0";
      canvas.dataset.state = "waiting";
      return;
    }
    const width = Math.max(160, body.clientWidth || 260);
    const height = Math.min(width, HEIGHT);
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    places = headPlaces(map.data, N, { width, height, pad: PAD });
    const { theme } = s;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = theme.panel;
    c.fillRect(0, 0, width, height);
    const all = kinds();
    const colourOf = colourLookup(s);
    for (let i = 0; i < N; i++) {
      c.fillStyle = colourOf(all[i] ?? "");
      c.beginPath();
      c.arc(places.sx[i], places.sy[i], RADIUS, 0, 2 * Math.PI);
      c.fill();
    }
    const sel = headOf(s);
    const ring = (/** @type {number} */ i, /** @type {string} */ colour, /** @type {number} */ r) => {
      if (!places || i < 0 || i >= N) return;
      c.strokeStyle = colour;
      c.lineWidth = 2;
      c.beginPath();
      c.arc(places.sx[i], places.sy[i], r, 0, 2 * Math.PI);
      c.stroke();
    };
    if (!sel.hidden) ring(sel.layer * H + sel.head, theme.accent, RADIUS + 4);
    ring(hovered, theme.fg, RADIUS + 2.5);
    const round = (/** @type {number} */ v) => Math.round(v * 10) / 10;
    canvas.dataset.heads = String(N);
    canvas.dataset.state = "drawn";
    canvas.dataset.selected = sel.hidden ? "" : String(sel.layer * H + sel.head);
    canvas.dataset.positions = JSON.stringify(Array.from(places.sx, (x, i) => [round(x), round(places?.sy[i] ?? 0)]));
  }

  function showRelated() {
    const s = store.state;
    const { L, H } = shape();
    const heads = relatedHeads(s.related, L, H);
    const sel = headOf(s);
    related.hidden = heads.length === 0;
    const all = kinds();
    const colourOf = colourLookup(s);
    related.replaceChildren(
      span("hs-legend-title", `most like L${sel.layer} H${sel.head}`),
      ...heads.map(({ layer, head, similarity }) => {
        const kind = all[layer * H + head] ?? "";
        const button = el("button", {
          className: "hs-related",
          dataset: { layer: String(layer), head: String(head) },
          title: `select layer ${layer} head ${head}${kind ? ` (${kind})` : ""}: similarity ${similarity.toFixed(3)}`,
          text: `L${layer} H${head} · ${Number.isFinite(similarity) ? similarity.toFixed(2) : "–"}`,
        });
        button.style.borderLeftColor = colourOf(kind);
        button.addEventListener("click", () => intents.selectHead(layer, head));
        return button;
      }),
    );
  }

  /** The head under the pointer (-1: none). @param {MouseEvent} event */
  function headAt(event) {
    if (!places) return -1;
    const rect = canvas.getBoundingClientRect();
    return nearestPoint(places, [event.clientX - rect.left, event.clientY - rect.top], HIT);
  }

  scope.listen(canvas, "mousemove", (/** @type {MouseEvent} */ event) => {
    const i = headAt(event);
    const { H } = shape();
    if (i !== hovered) {
      hovered = i;
      draw();
    }
    if (i < 0 || !places) {
      tip.hidden = true;
      return;
    }
    const s = store.state;
    const top = topScores(s.headScores, s.score_names ?? [], i);
    tip.textContent = headLine({ layer: Math.floor(i / H), head: i % H, kind: kinds()[i] ?? "", top });
    tip.hidden = false;
    tip.style.left = `${Math.min(places.sx[i] + 10, Math.max(0, (body.clientWidth || 260) - 200))}px`;
    tip.style.top = `${places.sy[i] + 10}px`;
  });
  scope.listen(canvas, "mouseleave", () => {
    tip.hidden = true;
    if (hovered >= 0) {
      hovered = -1;
      draw();
    }
  });
  scope.listen(canvas, "click", (/** @type {MouseEvent} */ event) => {
    const i = headAt(event);
    const { H } = shape();
    if (i >= 0 && H) intents.selectHead(Math.floor(i / H), i % H);
  });

  scope.add(store.watch([...DRAWN_FROM, "state"], draw));
  scope.add(store.watch(["head_kinds", "head_relations", "theme"], (s) => fillKindLegend(legend, s)));
  scope.add(store.watch(["doc"], (s) => (panel.hidden = Boolean(s.doc.word)))); // word mode: no head scores
  scope.add(store.watch(RELATED_FROM, showRelated));
  const observer = new ResizeObserver(() => draw());
  observer.observe(body);
  scope.add(() => observer.disconnect());
  return { canvas, destroy: () => scope.dispose() };
}
