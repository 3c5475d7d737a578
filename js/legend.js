// The legend of the active colouring (data-testid="headsne-legend"): a gradient with its ends for
// ordered values, or one swatch per category. Text via textContent only. It can also paint itself
// onto a canvas (the PNG export).

import { el, span } from "./dom.js";

/** @param {HTMLElement} box */
export function createLegend(box) {
  box.dataset.testid = "headsne-legend";
  box.classList.add("hs-colour-legend");
  /** @type {import("./colors.js").Legend | null} */
  let legend = null;

  function render(next, mode) {
    legend = next;
    box.dataset.mode = mode;
    box.dataset.kind = next.kind;
    const parts = [span("hs-legend-title", next.title)];
    if (next.kind === "sequential") {
      const ramp = document.createElement("canvas");
      ramp.width = 96;
      ramp.height = 1;
      const c = ramp.getContext("2d");
      for (let i = 0; i < 96; i++) {
        c.fillStyle = next.colour(i / 95);
        c.fillRect(i, 0, 1, 1);
      }
      ramp.className = "hs-legend-ramp";
      parts.push(span("hs-legend-end", next.low), ramp, span("hs-legend-end", next.high));
    } else {
      for (const entry of next.entries) {
        const swatch = el("span", { className: "hs-swatch" });
        swatch.style.background = entry.colour;
        parts.push(
          el("span", { className: "hs-legend-entry", dataset: { colour: entry.colour } }, [swatch, entry.label]),
        );
      }
      if (next.more > 0) parts.push(span("hs-legend-end", `+${next.more} more`));
    }
    box.replaceChildren(...parts);
  }

  return {
    /** Show `legend` (from js/colors.js) for colour mode `mode`. */
    set: render,
    /**
     * Paint the legend in one line at (x, y) (CSS px, top-left) onto `c`; returns the width used.
     * @param {CanvasRenderingContext2D} c
     */
    paint(c, x, y, theme) {
      if (!legend) return 0;
      c.font = `11px ${theme.font}`;
      c.textBaseline = "middle";
      c.textAlign = "left";
      c.fillStyle = theme.fg;
      let cx = x;
      const text = (t) => {
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
    },
  };
}
