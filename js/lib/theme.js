// Colours and fonts: resolved from JupyterLab's --jp-* variables, VS Code's --vscode-* variables, or the
// system light/dark preference (see the --hs-* variables in widget.css). Canvases cannot use CSS
// variables, so they read the resolved values here.

import { color as parseColor } from "d3-color";
import { interpolateViridis } from "d3-scale-chromatic";

/**
 * Relative luminance in [0, 1] of a CSS colour string (0.5 when it cannot be parsed).
 * @param {string} css
 */
export function luminance(css) {
  const c = parseColor(css);
  if (!c) return 0.5;
  const { r, g, b } = c.rgb();
  const lin = (/** @type {number} */ v) => {
    const s = v / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

/**
 * The colours and fonts the canvases draw with.
 * @typedef {{dark: boolean, bg: string, panel: string, fg: string, muted: string, border: string,
 *   accent: string, highlight: string, font: string, mono: string, heat: (t: number) => string}} Theme
 */

/**
 * The resolved theme of the widget root `el`.
 * @param {Element} el
 * @returns {Theme}
 */
export function readTheme(el) {
  const cs = getComputedStyle(el);
  const v = (/** @type {string} */ name, /** @type {string} */ fallback) =>
    cs.getPropertyValue(name).trim() || fallback;
  const bg = v("--hs-bg", "#ffffff");
  const dark = luminance(bg) < 0.25;
  return {
    dark,
    bg,
    panel: v("--hs-panel", bg),
    fg: v("--hs-fg", dark ? "#e6e6e6" : "#1b1b1b"),
    muted: v("--hs-fg-muted", dark ? "#9a9a9a" : "#6b6b6b"),
    border: v("--hs-border", dark ? "#444" : "#d0d0d0"),
    accent: v("--hs-accent", dark ? "#4fc3f7" : "#1976d2"),
    highlight: v("--hs-highlight", dark ? "#ffd54f" : "#e65100"),
    font: v("--hs-font", "system-ui, sans-serif"),
    mono: v("--hs-mono", "ui-monospace, monospace"),
    // maximum attention: viridis in light and dark themes alike (and Viridis256 in the bokeh figures);
    // token colours use the same family (js/lib/colors.js)
    heat: interpolateViridis,
  };
}

/**
 * Call `onChange` when the notebook's theme or the system colour scheme changes; returns the stop function.
 * @param {() => void} onChange
 */
export function watchTheme(onChange) {
  /** @type {(() => void)[]} */
  const stops = [];
  if (typeof MutationObserver !== "undefined" && typeof document !== "undefined") {
    const observer = new MutationObserver(() => onChange());
    const attributes = ["data-jp-theme-name", "data-jp-theme-light", "class", "style", "data-vscode-theme-kind"];
    observer.observe(document.body, { attributes: true, attributeFilter: attributes });
    observer.observe(document.documentElement, { attributes: true, attributeFilter: attributes });
    stops.push(() => observer.disconnect());
  }
  if (typeof matchMedia !== "undefined") {
    const mq = matchMedia("(prefers-color-scheme: dark)");
    const listener = () => onChange();
    mq.addEventListener("change", listener);
    stops.push(() => mq.removeEventListener("change", listener));
  }
  return () => stops.forEach((stop) => stop());
}
