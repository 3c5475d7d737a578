// The fake-model fixture of the wiring tests (js/widget.test.js, js/views/grid/grid.test.js): a small text's traits,
// the widget mounted on a fake model (js/test-helpers/fake-dom.js) with a fake clock (js/test-helpers/testing.js), and mouse
// events placed on grid cells. Not a test file itself.

import { fakeModel } from "./fake-dom.js";
import { encodeArray } from "../model/codecs.js";
import { fakeClock } from "./testing.js";

export const L = 2,
  H = 3;
export const TOKENS = ["[CLS]", "hello", "world", ".", "[SEP]"];

export function traits(extra = {}) {
  const n = TOKENS.length;
  const grid = Float32Array.from({ length: L * H * n }, (_, i) => (i % 7) / 7);
  return {
    text: "hello world.",
    tokens: TOKENS,
    offsets: [null, [0, 5], [6, 11], [11, 12], null],
    special: [true, false, false, false, true],
    model_name: "tiny",
    n_layers: L,
    n_heads: H,
    max_attention: encodeArray(grid, [L, H, n]),
    layer: 0,
    head: 0,
    mode: "attention",
    perplexity: 20,
    learning_rate: null,
    n_iter: 1000,
    seed: 0,
    restarts: 1,
    exclude_special: false,
    quantile: false,
    quantile_k: 100,
    speed: 250,
    edge_k: 5,
    frame: encodeArray(
      Float32Array.from({ length: 2 * n }, (_, i) => i),
      [n, 2],
    ),
    kept: [0, 1, 2, 3, 4],
    iteration: 10,
    kl: 1.5,
    run_id: 1,
    status: "running",
    state: "running",
    edges: null,
    ...extra,
  };
}

/**
 * The widget of `widget.js` rendered with the traits (and `extra`) on a fake model and a fake clock.
 * @param {{render: Function}} widget
 * @param {Record<string, any>} [extra]
 */
export function mount(widget, extra) {
  const model = fakeModel(traits(extra));
  const el = document.createElement("div");
  document.body.appendChild(el);
  const clock = fakeClock();
  const cleanup = widget.render({ model, el, clock });
  return { model, el, cleanup, clock, root: el.querySelector(".hs-root") };
}

/** A mouse event of `type` on the grid canvas at cell (layer, head, token), from its published layout. */
export function gridEvent(el, type, layer, head, token) {
  const canvas = el.querySelector("[data-testid=headsne-grid]");
  const g = Object.fromEntries(Object.entries(canvas.dataset).map(([k, v]) => [k, Number(v)]));
  const x = g.labelW + (token + 0.5) * g.cellW;
  const y = layer * (g.gap + g.heads * g.cellH) + g.gap + (head + 0.5) * g.cellH;
  canvas.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true }));
}

export const clickCell = (el, layer, head, token) => gridEvent(el, "click", layer, head, token);

/** The traits of a text of `n` tokens (the fake model's text repeated). */
export function longTraits(n) {
  const grid = Float32Array.from({ length: L * H * n }, (_, i) => (i % 7) / 7);
  return {
    tokens: Array.from({ length: n }, (_, i) => `t${i}`),
    offsets: Array.from({ length: n }, () => null),
    special: Array.from({ length: n }, () => false),
    max_attention: encodeArray(grid, [L, H, n]),
    frame: encodeArray(new Float32Array(2 * n), [n, 2]),
    kept: Array.from({ length: n }, (_, i) => i),
  };
}

/** `attends_to` of a text of `n` tokens: token t attends to (t + 1) % n most (0.6), then (t + 2) % n (0.3). */
export function attendsNext(n) {
  return {
    indices: encodeArray(
      Int32Array.from({ length: 2 * n }, (_, k) => (Math.floor(k / 2) + 1 + (k % 2)) % n),
      [n, 2],
    ),
    weights: encodeArray(
      Float32Array.from({ length: 2 * n }, (_, k) => (k % 2 ? 0.3 : 0.6)),
      [n, 2],
    ),
  };
}

/** Click the map where a point answers (probed with mouse moves, as a user finds one); its token. */
export function clickAPoint(root) {
  const canvas = root.querySelector("[data-testid=headsne-scatter]");
  const tooltip = root.querySelector("[data-testid=headsne-tooltip]");
  for (let y = 0; y < 400; y += 2) {
    for (let x = 0; x < 600; x += 2) {
      canvas.dispatchEvent(new MouseEvent("mousemove", { clientX: x, clientY: y, bubbles: true }));
      if (!tooltip.hidden) {
        canvas.dispatchEvent(new MouseEvent("click", { clientX: x, clientY: y, bubbles: true }));
        return Number(/#(\d+)/.exec(tooltip.textContent)[1]);
      }
    }
  }
  throw new Error("no point answered anywhere on the map");
}
