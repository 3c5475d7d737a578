// The legend of the active colouring (data-testid="headsne-legend"): a gradient with its ends for
// ordered values, or one swatch per category. Text via textContent only. `paintLegend` draws it onto a
// canvas (the PNG export).

import { el, span } from "../lib/dom.js";
import { sourceOf } from "../model/sources.js";

/**
 * @typedef {import("../lib/colors.js").Legend} Legend
 */

/**
 * Show `legend` (from js/lib/colors.js) for colour mode `mode` in `box`.
 * @param {HTMLElement} box
 * @param {Legend} legend
 * @param {string} mode
 */
export function showLegend(box, legend, mode) {
  box.dataset.mode = mode;
  box.dataset.kind = legend.kind;
  const parts = [span("hs-legend-title", legend.title)];
  if (legend.kind === "sequential") {
    const ramp = document.createElement("canvas");
    ramp.width = 96;
    ramp.height = 1;
    const c = /** @type {CanvasRenderingContext2D} */ (ramp.getContext("2d"));
    for (let i = 0; i < 96; i++) {
      c.fillStyle = legend.colour(i / 95);
      c.fillRect(i, 0, 1, 1);
    }
    ramp.className = "hs-legend-ramp";
    parts.push(span("hs-legend-end", legend.low), ramp, span("hs-legend-end", legend.high));
  } else {
    for (const entry of legend.entries) {
      const swatch = el("span", { className: "hs-swatch" });
      swatch.style.background = entry.colour;
      parts.push(
        el("span", { className: "hs-legend-entry", dataset: { colour: entry.colour } }, [swatch, entry.label]),
      );
    }
    if (legend.more > 0) parts.push(span("hs-legend-end", `+${legend.more} more`));
  }
  box.replaceChildren(...parts);
}

/**
 * Paint `legend` in one line at (x, y) (CSS px, top-left) onto `c`; returns the width used.
 * @param {CanvasRenderingContext2D} c
 * @param {Legend | null} legend
 * @param {{x: number, y: number}} at
 * @param {import("../lib/theme.js").Theme} theme
 */
export function paintLegend(c, legend, { x, y }, theme) {
  if (!legend) return 0;
  c.font = `11px ${theme.font}`;
  c.textBaseline = "middle";
  c.textAlign = "left";
  c.fillStyle = theme.fg;
  let cx = x;
  const text = (/** @type {string} */ t) => {
    c.fillStyle = theme.fg;
    c.fillText(t, cx, y + 7);
    cx += c.measureText(t).width + 8;
  };
  text(legend.title);
  if (legend.kind === "sequential") {
    text(legend.low);
    for (let i = 0; i < 96; i++) {
      c.fillStyle = legend.colour(i / 95);
      c.fillRect(cx + i, y + 2, 1, 10);
    }
    cx += 104;
    text(legend.high);
  } else {
    for (const entry of legend.entries) {
      c.fillStyle = entry.colour;
      c.fillRect(cx, y + 2, 10, 10);
      cx += 14;
      text(entry.label);
    }
  }
  return cx - x;
}

/**
 * The styles of the hover edges drawn for `direction` (js/paint/scatter-canvas.js drawHoverEdges): attends to
 * solid in the accent colour with an arrow at the partner, attended by dashed in the highlight colour
 * with the arrow at the hovered token; in hidden-state mode plain lines to the nearest neighbours.
 * @param {import("../model/model.js").EdgeDirection} direction
 * @param {boolean} hidden
 * @returns {{style: "to" | "from" | "near", label: string}[]}
 */
export function edgeStyles(direction, hidden) {
  if (direction === "off") return [];
  if (hidden) return [{ style: "near", label: "nearest neighbours" }];
  const to = { style: /** @type {const} */ ("to"), label: "attends to →" };
  const from = { style: /** @type {const} */ ("from"), label: "← attended by" };
  return direction === "to" ? [to] : direction === "from" ? [from] : [to, from];
}

/** A token's points' marks, by role (js/paint/scatter-paint.js isRing): the first filled, the second a ring. */
const ROLE_MARKS = ["hs-qk-query", "hs-qk-key-mark"];

/**
 * The key of which mark is which of a token's points (query-key: "query / key"), from its source's `pointRoles`;
 * hidden where a token is one point.
 * @param {HTMLElement} key
 * @param {string[]} roles
 */
function showPointRoles(key, roles) {
  key.hidden = roles.length < 2;
  key.title = `each token as ${roles.map((r, i) => `its ${r} (${i ? "ring" : "filled"})`).join(" and ")}`;
  key.replaceChildren(
    span("hs-legend-title", roles.join(" / ")),
    ...roles.map((role, i) =>
      el("span", { className: "hs-legend-entry", dataset: { style: role } }, [
        el("span", { className: ROLE_MARKS[i] }),
        role,
      ]),
    ),
  );
}

/**
 * The legend view: follows the state's colouring; next to it, the key of the hover edges' styles.
 * @param {{dom: {colourLegend: HTMLElement, edgeKey: HTMLElement},
 *   store: import("../store/store.js").Store<import("../store/state.js").State>}} ctx
 */
export function createLegend({ dom, store }) {
  const box = dom.colourLegend;
  box.dataset.testid = "headsne-legend";
  box.classList.add("hs-colour-legend");
  // query-key mode: which marks are the queries and which the keys
  const qkKey = el("span", { className: "hs-edge-key hs-qk-key", dataset: { testid: "headsne-qk-key" } });
  dom.colourLegend.after(qkKey);
  const stops = [
    store.watch(["mode"], (s) => showPointRoles(qkKey, sourceOf(s.mode).pointRoles)),
    store.watch(["colours", "doc"], (s) => {
      box.hidden = !s.doc.tokens.length; // nothing coloured yet (the text is being captured)
      if (s.colours) showLegend(box, s.colours.legend, s.colours.mode);
    }),
    store.watch(["edge_direction", "mode"], (s) => {
      const styles = edgeStyles(s.edge_direction || "both", sourceOf(s.mode).partners === "neighbours");
      dom.edgeKey.hidden = styles.length === 0;
      dom.edgeKey.title = "the edges drawn from the hovered token (hover edges, in the row above the map)";
      dom.edgeKey.replaceChildren(
        span("hs-legend-title", "hover edges"),
        ...styles.map(({ style, label }) =>
          el("span", { className: "hs-legend-entry", dataset: { style } }, [
            el("span", { className: `hs-edge-line hs-edge-${style}` }),
            label,
          ]),
        ),
      );
    }),
  ];
  return {
    destroy: () => {
      stops.forEach((stop) => stop());
      qkKey.remove();
    },
  };
}
