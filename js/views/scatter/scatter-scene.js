// The scatter's scene (js/paint/scatter-canvas.js `Scene`): what the map shows, from the state, the points
// (js/views/scatter/scatter-points.js) and the view's size and zoom; the screen positions of the points are computed
// here, for any backend and for hit testing.

import { scaleLinear } from "d3-scale";
import { partnerTokens, shownPartners } from "../../lib/partners.js";
import { directionOf, partnersAt } from "../../store/state.js";
import { MARGIN, RADIUS, isRing } from "../../paint/scatter-paint.js";
import { axisTicks } from "../../paint/axes.js";
import { sourceOf } from "../../model/sources.js";
import { NO_LINKS, syntaxLinks } from "../../lib/syntax.js";

const NO_PARTNERS = { to: [], from: [], near: [], hidden: false };

/**
 * @typedef {import("../../store/state.js").State} State
 * @typedef {import("../../paint/scatter-canvas.js").Scene} Scene
 */

/**
 * The map's rows that are its tokens' first points: where the mode's tokens have more than one (its source's
 * `pointRoles`: query-key's queries, then its keys, drawn as rings), the page's `query_rows`; else 0.
 * @param {string | undefined} mode @param {number | null | undefined} queryRows
 */
function firstPointRows(mode, queryRows) {
  return sourceOf(mode).pointRoles.length > 1 ? Number(queryRows ?? 0) || 0 : 0;
}

/** The label density of the state, in [0, 1]. @param {State} s */
export function densityOf(s) {
  const value = s.label_density == null ? 0.5 : Number(s.label_density);
  return Math.max(0, Math.min(1, Number.isFinite(value) ? value : 0.5));
}

/**
 * What an empty map says: what is being done before its first frame.
 * @param {State} s
 */
export function messageOf(s) {
  if (s.state === "loading") return "the map comes once the text is captured";
  if (s.state === "error") return "no map"; // the error itself is in the map's message box (js/views/loading.js)
  if (!s.doc.tokens.length) return "no text yet";
  if (s.state === "running") return "building P, then the first t-SNE frame…";
  return "press ▶ (or click a head) to run t-SNE";
}

/**
 * The row drawn hovered: the hovered token's point; in query-key mode (kept lists the tokens twice, so
 * tokenRow gives a token's key and tokenRow - queryRows its query) the one under the pointer when it is the
 * hovered token's, else (a hover from the grid or the text) its query.
 * @param {State} s @param {number} queryRows @param {number} pointerRow
 */
function hoverRowOf(s, queryRows, pointerRow) {
  const { kept, tokenRow } = s.rows;
  const row = s.hover >= 0 && s.hover < tokenRow.length ? tokenRow[s.hover] : -1;
  if (queryRows <= 0 || row < queryRows) return row;
  return pointerRow >= 0 && kept[pointerRow] === s.hover ? pointerRow : row - queryRows;
}

/**
 * What the map shows now, or null before there is a theme and a size.
 * @param {State} s
 * @param {import("./scatter-points.js").ScatterPoints} points
 * @param {{width: number, height: number, transform: any,
 *   lasso: [number, number][] | null, plot: import("../../paint/scatter-canvas.js").Box, pointerRow?: number}} view
 *   pointerRow: the row under the pointer (-1: none), which of a token's two points query-key mode rings
 * @returns {Scene | null}
 */
export function sceneOf(s, points, { width, height, transform, lasso, plot, pointerRow = -1 }) {
  if (!s.theme || !width) return null;
  const { kept, tokenRow } = s.rows;
  const colours = s.colours ? s.colours.colours : [];
  /** @type {Scene} */
  const base = {
    theme: s.theme,
    width,
    height,
    plot,
    x: null,
    y: null,
    knots: null,
    points: null,
    message: messageOf(s),
    hover: s.hover,
    hoverRow: -1,
    shown: NO_PARTNERS,
    partners: [],
    selected: s.selected,
    matches: s.search.matches,
    density: densityOf(s),
    subword: s.doc.subword,
    tokens: s.doc.labels ?? s.doc.tokens, // what each point is labelled with (js/lib/segments.js pointLabels)
    lasso,
  };
  if (!points.domains || points.m === 0) return base;
  const x = transform.rescaleX(scaleLinear(points.domains.x, [plot.x0, plot.x1]));
  const y = transform.rescaleY(scaleLinear(points.domains.y, [plot.y1, plot.y0]));
  points.toScreen(x, y, plot);
  const queryRows = firstPointRows(s.mode, s.query_rows);
  const hoverRow = hoverRowOf(s, queryRows, pointerRow);
  const shown = shownPartners(hoverRow >= 0 ? partnersAt(s, s.hover) : NO_PARTNERS, directionOf(s));
  const partners = partnerTokens(shown).filter((t) => tokenRow[t] >= 0);
  const { sx, sy, m } = points;
  const pts = { sx, sy, m, kept, tokenRow, colours, special: s.doc.special, queryRows };
  const syntax = syntaxOf(s, hoverRow >= 0 && queryRows <= 0 ? s.hover : -1);
  const knots = points.quantile ? points.knots : null;
  return { ...base, x, y, knots, points: pts, hoverRow, shown, partners, syntax };
}

/**
 * The hovered token's syntactic head and dependents as rows of the map (those with a point), from `syntax_tree`.
 * @param {State} s
 * @param {number} token
 * @returns {{head: number, dependents: number[], tokens: import("../../lib/syntax.js").SyntaxLinks}}
 */
function syntaxOf(s, token) {
  const { tokenRow } = s.rows;
  const links = token >= 0 ? syntaxLinks(s.syntaxTree, token) : NO_LINKS;
  const row = (/** @type {number} */ t) => (t >= 0 && t < tokenRow.length ? tokenRow[t] : -1);
  return { head: row(links.head), dependents: links.dependents.map(row).filter((r) => r >= 0), tokens: links };
}

/**
 * What is on screen, for the SVG export (js/export/svg.js): points, label boxes and the axes' ticks in CSS px.
 * @param {State} s
 * @param {import("./scatter-points.js").ScatterPoints} points
 * @param {{width: number, height: number, lastBoxes: import("../../paint/scatter-canvas.js").LabelBox[],
 *   scene: Scene | null}} view
 */
export function snapshotOf({ doc, rows, colours, mode, query_rows }, points, { width, height, lastBoxes, scene }) {
  const queryRows = firstPointRows(mode, query_rows);
  const list = colours ? colours.colours : [];
  const pts = [];
  for (let r = 0; r < points.m; r++) {
    const t = rows.kept[r];
    pts.push({
      x: points.sx[r],
      y: points.sy[r],
      colour: list[t] || "#888",
      special: isRing({ kept: rows.kept, special: doc.special, queryRows }, r),
      token: t,
    });
  }
  const labels = lastBoxes.map((b) => ({ ...b, text: (doc.labels ?? doc.tokens)[b.key] ?? "" }));
  const knots = scene ? scene.knots : null;
  const axes =
    scene && scene.x
      ? { x: axisTicks(scene.x, knots ? knots.x : null), y: axisTicks(scene.y, knots ? knots.y : null) }
      : null;
  return { width, height, margin: MARGIN, radius: RADIUS, points: pts, labels, axes };
}
