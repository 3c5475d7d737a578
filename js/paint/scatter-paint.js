// Canvas painting of the scatter's parts, each a function of a 2D context and plain data: edges
// to the hovered token's partners (undirected, or "attends to" / "attended by" drawn distinguishably),
// a point with a halo label, and the lasso. Used for the screen and for the 2x PNG export alike (the
// screen's filled points: js/paint/point-raster.js).

/** @typedef {import("../lib/tokens.js").Partner} Partner */

export const MARGIN = { top: 10, right: 12, bottom: 24, left: 48 };
export const RADIUS = 3.6;

/**
 * An arrowhead at (x1, y1) pointing away from (x0, y0).
 * @param {CanvasRenderingContext2D} c
 * @param {[number, number, number, number]} line x0, y0, x1, y1
 * @param {number} size
 */
function arrowHead(c, [x0, y0, x1, y1], size) {
  const a = Math.atan2(y1 - y0, x1 - x0);
  c.beginPath();
  c.moveTo(x1, y1);
  c.lineTo(x1 - size * Math.cos(a - 0.45), y1 - size * Math.sin(a - 0.45));
  c.lineTo(x1 - size * Math.cos(a + 0.45), y1 - size * Math.sin(a + 0.45));
  c.closePath();
  c.fill();
}

/**
 * Lines from the hovered point (hx, hy) to its partners' points.
 * @param {CanvasRenderingContext2D} c
 * @param {number} hx
 * @param {number} hy
 * @param {{x: number, y: number, weight: number}[]} partners
 * @param {{colour: string, dash?: number[], arrow?: "out" | "in" | null}} style out: arrow at the partner
 *   (the hovered token attends to it), in: arrow at the hovered token (the partner attends to it)
 */
export function drawEdges(c, hx, hy, partners, { colour, dash = [], arrow = null }) {
  if (!partners.length) return;
  const wmax = Math.max(...partners.map((p) => p.weight)) || 1;
  c.strokeStyle = colour;
  c.fillStyle = colour;
  c.lineCap = "round";
  c.setLineDash(dash);
  for (const p of partners) {
    const f = p.weight / wmax;
    c.globalAlpha = 0.35 + 0.65 * f;
    c.lineWidth = 0.75 + 3 * f;
    c.beginPath();
    c.moveTo(hx, hy);
    c.lineTo(p.x, p.y);
    c.stroke();
    if (arrow) {
      const len = Math.hypot(p.x - hx, p.y - hy);
      if (len > 14) {
        const back = (RADIUS + 3) / len;
        if (arrow === "out") arrowHead(c, [hx, hy, p.x - (p.x - hx) * back, p.y - (p.y - hy) * back], 7 + 2 * f);
        else arrowHead(c, [p.x, p.y, hx + (p.x - hx) * back, hy + (p.y - hy) * back], 7 + 2 * f);
      }
    }
  }
  c.setLineDash([]);
  c.globalAlpha = 1;
}

/**
 * A ring around the point at (x, y); `main` for the hovered token, else a partner or selected token.
 * @param {CanvasRenderingContext2D} c
 * @param {number} x
 * @param {number} y
 * @param {{fill: string, stroke: string, main?: boolean}} style
 */
export function ring(c, x, y, { fill, stroke, main = false }) {
  c.beginPath();
  c.arc(x, y, main ? RADIUS + 3 : RADIUS + 1.5, 0, 2 * Math.PI);
  c.fillStyle = fill;
  c.fill();
  c.strokeStyle = stroke;
  c.lineWidth = main ? 2 : 1.5;
  c.stroke();
}

/**
 * The font of a halo label (hovered: larger and bold).
 * @param {{font: string}} theme
 * @param {boolean} main
 */
export function haloFont(theme, main) {
  return `${main ? "700 12.5px" : "600 11px"} ${theme.font}`;
}

/**
 * Text with a background halo, its box's top-left corner at (x, y) and height h (`main`: the hovered
 * token's, larger and bold).
 * @param {CanvasRenderingContext2D} c
 * @param {import("../lib/theme.js").Theme} theme
 * @param {{text: string, x: number, y: number, h: number, main: boolean}} label
 */
export function haloText(c, theme, { text, x, y, h, main }) {
  c.font = haloFont(theme, main);
  c.textAlign = "left";
  c.textBaseline = "middle";
  c.lineJoin = "round";
  c.lineWidth = 3;
  c.strokeStyle = theme.panel;
  c.strokeText(text, x + 1, y + h / 2);
  c.fillStyle = theme.fg;
  c.fillText(text, x + 1, y + h / 2);
}

/**
 * The lasso or box being dragged.
 * @param {CanvasRenderingContext2D} c
 * @param {import("../lib/theme.js").Theme} theme
 * @param {[number, number][]} polygon
 */
export function drawLasso(c, theme, polygon) {
  if (!polygon || polygon.length < 2) return;
  c.beginPath();
  polygon.forEach(([x, y], i) => (i ? c.lineTo(x, y) : c.moveTo(x, y)));
  c.closePath();
  c.globalAlpha = 0.12;
  c.fillStyle = theme.accent;
  c.fill();
  c.globalAlpha = 1;
  c.setLineDash([4, 3]);
  c.strokeStyle = theme.accent;
  c.lineWidth = 1.25;
  c.stroke();
  c.setLineDash([]);
}

/**
 * Whether row `r` is drawn as a ring: a key in query-key mode (rows from `queryRows` on are the keys, the
 * queries before them filled), else a special token's.
 * @param {{kept: number[], special: boolean[], queryRows?: number}} points
 * @param {number} r
 */
export function isRing({ kept, special, queryRows = 0 }, r) {
  return queryRows > 0 ? r >= queryRows : Boolean(special[kept[r]]);
}

/**
 * The points (special tokens, or keys in query-key mode, as rings), dimmed outside the selection when `dim`; search matches ringed
 * in the highlight colour and selected tokens in the foreground colour.
 * @param {CanvasRenderingContext2D} c
 * @param {any} theme
 * @param {{sx: ArrayLike<number>, sy: ArrayLike<number>, m: number, kept: number[], tokenRow: Int32Array,
 *   colours: string[], special: boolean[], queryRows?: number}} points
 * @param {{selected: Set<number>, matches: Set<number>, dim: boolean, filled?: boolean}} marks `filled`
 *   false leaves the filled points out (createPointRaster drew them)
 */
export function drawPoints(c, theme, points, { selected, matches, dim, filled = true }) {
  const { sx, sy, m, kept, tokenRow, colours } = points;
  for (let r = 0; r < m; r++) {
    const tok = kept[r];
    const hollow = isRing(points, r);
    if (!filled && !hollow) continue;
    c.globalAlpha = !dim || selected.has(tok) ? 1 : 0.3;
    c.beginPath();
    c.arc(sx[r], sy[r], RADIUS, 0, 2 * Math.PI);
    if (hollow) {
      c.strokeStyle = colours[tok] || theme.muted;
      c.lineWidth = 1.5;
      c.stroke();
    } else {
      c.fillStyle = colours[tok] || theme.muted;
      c.fill();
    }
  }
  c.globalAlpha = 1;
  for (const [set, stroke] of [
    [matches, theme.highlight],
    [selected, theme.fg],
  ]) {
    for (const tok of set) {
      const r = tokenRow[tok];
      if (r >= 0) ring(c, sx[r], sy[r], { fill: colours[tok] || theme.muted, stroke });
    }
  }
}

/**
 * Where the hovered token's edges start (`origin`: a row per kind) and end (per kind, the partners' rows).
 * In query-key mode an edge joins a query to a key, as P does: the hovered token's query to the keys it
 * attends to (`to`, `near`), its key to the queries of the tokens that attend to it (`from`); otherwise
 * every edge joins the token's only point to its partners'.
 * @param {{hover: number, hoverRow: number, points: {tokenRow: Int32Array, queryRows?: number} | null,
 *   shown: {to: Partner[], from: Partner[], near: Partner[]}}} scene the scene's parts it reads
 */
export function edgeEnds(scene) {
  const none = { origin: { to: -1, from: -1, near: -1 }, to: [], from: [], near: [] };
  if (scene.hoverRow < 0 || !scene.points) return none;
  const { tokenRow, queryRows = 0 } = scene.points;
  const key = (/** @type {number} */ t) => tokenRow[t];
  const query = (/** @type {number} */ t) => (queryRows > 0 ? tokenRow[t] - queryRows : tokenRow[t]);
  const h = scene.hover;
  /** @param {import("../lib/partners.js").Partner[]} list @param {(t: number) => number} rowOf */
  const rows = (list, rowOf) =>
    list.filter((p) => tokenRow[p.token] >= 0).map((p) => ({ row: rowOf(p.token), token: p.token, weight: p.weight }));
  if (queryRows <= 0) {
    const o = scene.hoverRow;
    return {
      origin: { to: o, from: o, near: o },
      to: rows(scene.shown.to, key),
      from: rows(scene.shown.from, key),
      near: rows(scene.shown.near, key),
    };
  }
  return {
    origin: { to: query(h), from: key(h), near: query(h) },
    to: rows(scene.shown.to, key),
    from: rows(scene.shown.from, query),
    near: rows(scene.shown.near, key),
  };
}
