// The head atlas (data-testid="headsne-atlas"): a small t-SNE thumbnail for every head of a layer (the one
// shown when it was asked for: `atlas_layer`), computed by Python in the background on request (control
// "atlas", cancelled by "atlas_stop"), with its progress, sortable by head or by KL; heads not done yet (or
// never, after a stop) show as empty; a click on a thumbnail selects that layer and head. Its note says
// with how many iterations and which seed the thumbnails ran, and whether their KLs compare with the
// map's (a run of other length or seed ends at another KL). Each thumbnail is scaled to its tokens' 5%-95%
// box, far tokens drawn as rings on its edge and tokens on one spot as a ringed disc (`thumbMarks`): a few far
// points or a t-SNE that barely moved never leave a thumbnail showing one dot. Its button carries
// data-outside (tokens off the scale) and data-stacked (the most tokens of one mark).

import { decodeArray } from "./codecs.js";
import { disposer, el } from "./dom.js";
import { setText } from "./schedule.js";
import { headOf } from "./state.js";

const SIZE = 92; // CSS px of a thumbnail
const INSET = 5; // CSS px kept clear at the edges: off-scale marks sit there
const LOW = 0.05; // the quantiles whose box a thumbnail shows (widened by WIDEN of its span on each side)
const HIGH = 0.95;
const WIDEN = 0.4; // a Gaussian cloud: +-3 sigma shown, 0.3% of its tokens on the edge
const CELL = 2; // CSS px: tokens whose positions round to one cell are one stacked mark
const COUNTED = 3; // the largest stacks whose counts are written

/**
 * @typedef {import("./state.js").State} State
 * @typedef {{x: number, y: number, rows: number[], outside: boolean}} ThumbMark
 */

/** The q-quantile of sorted values (linear between neighbours). @param {Float64Array} v @param {number} q */
function quantile(v, q) {
  if (v.length === 0) return NaN;
  const at = q * (v.length - 1);
  const i = Math.floor(at);
  return i + 1 < v.length ? v[i] + (at - i) * (v[i + 1] - v[i]) : v[i];
}

/**
 * A box [lo, hi] of one axis: the values within the LOW..HIGH quantiles widened by WIDEN of their span (a
 * thumbnail with no far points shows all of them, one with far points the rest from edge to edge); the full
 * range when the quantiles coincide (most tokens on one spot, a few apart).
 * @param {Float64Array} v sorted
 */
function axisBox(v) {
  const lo = quantile(v, LOW),
    hi = quantile(v, HIGH);
  if (!(hi > lo)) return [v[0], v[v.length - 1]];
  const pad = WIDEN * (hi - lo);
  let a = 0,
    b = v.length - 1;
  while (v[a] < lo - pad) a++;
  while (v[b] > hi + pad) b--;
  return [v[a], v[b]];
}

/**
 * Where a thumbnail draws each token (CSS px in a size x size square): the scale is set by the 5%-95%
 * quantile box of each axis (widened), not by the farthest points, so a few far tokens do not squeeze the
 * rest into one dot; tokens beyond the box are drawn on its edge, flagged `outside`. The scale is relative to
 * the spread, whatever its magnitude (a head whose t-SNE never left 1e-13 is spread as one of 1e1). Tokens
 * that fall in one CELL are one mark with all their rows: a stacked mark. Non-finite rows are left out.
 * @param {ArrayLike<number>} data (m, 2) flat
 * @param {number} m
 * @param {number} [size]
 * @returns {{marks: ThumbMark[], outside: number, stacked: number}} stacked: the most tokens of one mark
 */
export function thumbMarks(data, m, size = SIZE) {
  /** @type {number[]} */
  const rows = [];
  for (let r = 0; r < m; r++) if (Number.isFinite(data[2 * r]) && Number.isFinite(data[2 * r + 1])) rows.push(r);
  if (rows.length === 0) return { marks: [], outside: 0, stacked: 0 };
  const xs = Float64Array.from(rows, (r) => data[2 * r]).sort();
  const ys = Float64Array.from(rows, (r) => data[2 * r + 1]).sort();
  const [x0, x1] = axisBox(xs);
  const [y0, y1] = axisBox(ys);
  const inner = size - 2 * INSET;
  const span = Math.max(x1 - x0, y1 - y0); // equal units on both axes: t-SNE distances are isotropic
  const ppu = span > 0 ? inner / span : 0; // 0: every token on one spot, drawn in the middle
  const cx = (x0 + x1) / 2,
    cy = (y0 + y1) / 2;
  const edge = (/** @type {number} */ v) => Math.min(size - INSET, Math.max(INSET, v));
  /** @type {Map<string, ThumbMark>} */
  const cells = new Map();
  let outside = 0;
  for (const r of rows) {
    const x = data[2 * r],
      y = data[2 * r + 1];
    const out = x < x0 || x > x1 || y < y0 || y > y1;
    if (out) outside++;
    const px = edge(size / 2 + (x - cx) * ppu);
    const py = edge(size / 2 - (y - cy) * ppu);
    const key = `${out ? "o" : ""}${Math.round(px / CELL)},${Math.round(py / CELL)}`;
    const mark = cells.get(key);
    if (mark) mark.rows.push(r);
    else cells.set(key, { x: px, y: py, rows: [r], outside: out });
  }
  const marks = [...cells.values()];
  return { marks, outside, stacked: Math.max(...marks.map((k) => k.rows.length)) };
}

/**
 * A thumbnail: the head's small t-SNE, each token in its colour (thumbMarks places them). A token alone is a
 * 2.5 px square; a stack of k tokens a disc of area growing with k, ringed in the text colour, the counts of
 * the COUNTED largest stacks of at least 5% of the tokens (and 5) written beside them; an off-scale token a
 * hollow ring on the edge.
 * Returns what it drew, for the thumbnail's title and test hooks.
 * @param {CanvasRenderingContext2D} c
 * @param {{data: ArrayLike<number>, m: number, dpr: number, kept: number[], colours: string[],
 *   theme: import("./theme.js").Theme}} thumb
 */
export function paintThumb(c, { data, m, dpr, kept, colours, theme }) {
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.fillStyle = theme.panel;
  c.fillRect(0, 0, SIZE, SIZE);
  const layout = thumbMarks(data, m);
  const total = layout.marks.reduce((a, k) => a + k.rows.length, 0);
  const colour = (/** @type {ThumbMark} */ k) => colours[kept[k.rows[0]]] || theme.muted;
  const singles = layout.marks.filter((k) => k.rows.length === 1 && !k.outside);
  const stacks = layout.marks.filter((k) => k.rows.length > 1 && !k.outside);
  for (const k of singles) {
    c.fillStyle = colour(k);
    c.fillRect(k.x - 1.25, k.y - 1.25, 2.5, 2.5);
  }
  c.lineWidth = 1;
  c.font = `9px ${theme.font}`;
  for (const k of stacks.sort((a, b) => a.rows.length - b.rows.length)) {
    const radius = Math.min(1.6 + 0.9 * Math.sqrt(k.rows.length - 1), 8);
    c.beginPath();
    c.arc(k.x, k.y, radius, 0, 2 * Math.PI);
    c.fillStyle = colour(k);
    c.fill();
    c.strokeStyle = theme.fg;
    c.stroke();
  }
  const least = Math.max(5, 0.05 * total);
  c.textBaseline = "middle";
  c.lineWidth = 2.5;
  for (const k of stacks.slice(-COUNTED).filter((k) => k.rows.length >= least)) {
    const radius = Math.min(1.6 + 0.9 * Math.sqrt(k.rows.length - 1), 8);
    const right = k.x > SIZE / 2;
    c.textAlign = right ? "right" : "left";
    const x = k.x + (right ? -radius - 1.5 : radius + 1.5);
    c.strokeStyle = theme.panel; // a halo: the count stays readable over the marks
    c.strokeText(`×${k.rows.length}`, x, k.y);
    c.fillStyle = theme.fg;
    c.fillText(`×${k.rows.length}`, x, k.y);
  }
  c.lineWidth = 1;
  for (const k of layout.marks.filter((k) => k.outside)) {
    c.beginPath();
    c.arc(k.x, k.y, k.rows.length > 1 ? 3 : 2, 0, 2 * Math.PI);
    c.strokeStyle = colour(k);
    c.stroke();
  }
  return layout;
}

/**
 * What a thumbnail's hover adds about its marks. @param {{outside: number, stacked: number}} drawn
 */
function thumbTitle({ outside, stacked }) {
  const parts = [];
  if (outside) parts.push(`${outside} token${outside > 1 ? "s" : ""} off the scale, drawn as rings on the edge`);
  if (stacked > 1) parts.push(`ringed discs: several tokens on one spot (up to ${stacked})`);
  return parts.length ? `\n${parts.join("\n")}` : "";
}

/**
 * The atlas and its KLs from the state; `error` when they cannot be read.
 * @param {State} s
 */
function readAtlas(s) {
  try {
    const atlas = decodeArray(s.atlas ?? null);
    const k = decodeArray(s.atlas_kl ?? null);
    return { atlas, kl: k ? k.data : null, error: "" };
  } catch (err) {
    return { atlas: null, kl: null, error: `cannot read the atlas: ${/** @type {Error} */ (err).message}` };
  }
}

/**
 * What the thumbnails ran, next to the map's run: their KLs compare with the map's only when both are alike.
 * @param {State} s
 */
export function atlasNote(s) {
  const n = s.atlas_n_iter;
  if (n == null || (s.atlas_state === "idle" && !s.atlas)) return "";
  const seed = s.atlas_seed ?? 0;
  const same = n === s.n_iter && seed === s.seed;
  if (same) return `each thumbnail: ${n} iterations, seed ${seed}, as the map: their KLs compare with its KL`;
  return (
    `each thumbnail: ${n} iterations, seed ${seed}; the map: ${s.n_iter} iterations, seed ${s.seed}. ` +
    "A shorter run ends at a higher KL: compare the thumbnails' KLs with each other, not with the map's"
  );
}

/**
 * @param {{dom: {atlasPanel: HTMLElement, atlasTitle: HTMLElement}, store: import("./store.js").Store<State>,
 *   intents: import("./intents.js").Intents}} ctx
 */
export function createAtlas({ dom, store, intents }) {
  const panel = dom.atlasPanel;
  const scope = disposer();
  const note = el("div", { className: "hs-atlas-note", dataset: { testid: "headsne-atlas-note" } });
  const title = el("span", { className: "hs-atlas-title", text: "head atlas" });
  const run = el("button", {
    dataset: { testid: "headsne-atlas-run" },
    title: "a small t-SNE of every head of the layer",
  });
  const progress = el("span", { className: "hs-atlas-progress", dataset: { testid: "headsne-atlas-progress" } });
  const sort = el("select", { "aria-label": "sort thumbnails", dataset: { testid: "headsne-atlas-sort" } }, [
    el("option", { value: "head", text: "by head" }),
    el("option", { value: "kl", text: "by KL" }),
  ]);
  const thumbs = el("div", { className: "hs-atlas-thumbs" });
  dom.atlasTitle.append(title, run, progress, el("label", {}, ["sort", sort]));
  panel.append(note, thumbs);
  scope.listen(run, "click", () => intents.toggleAtlas());
  scope.listen(sort, "change", () => draw());

  /**
   * One thumbnail button (empty for a head not done).
   * @param {number} h @param {{data: Float32Array | Int32Array, shape: number[]}} atlas
   * @param {ArrayLike<number> | null} kl @param {boolean} done
   */
  function thumbnail(h, atlas, kl, done) {
    const s = store.state;
    const m = atlas.shape[1];
    const dpr = window.devicePixelRatio || 1;
    const canvas = el("canvas", { width: SIZE * dpr, height: SIZE * dpr });
    canvas.style.width = canvas.style.height = `${SIZE}px`;
    const data = atlas.data.subarray(h * m * 2, (h + 1) * m * 2);
    const colours = s.colours ? s.colours.colours : [];
    const theme = /** @type {import("./theme.js").Theme} */ (s.theme);
    const drawn = done
      ? paintThumb(/** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d")), {
          data,
          m,
          dpr,
          kept: s.rows.kept,
          colours,
          theme,
        })
      : null;
    const klText = done && kl && Number.isFinite(kl[h]) ? ` · KL ${kl[h].toFixed(2)}` : done ? "" : " · –";
    const sel = headOf(s);
    const isSel = !sel.hidden && h === sel.head && (s.atlas_layer ?? sel.layer) === sel.layer;
    const button = el(
      "button",
      {
        className: `hs-thumb${isSel ? " hs-thumb-selected" : ""}`,
        dataset: {
          head: String(h),
          done: String(done),
          outside: String(drawn ? drawn.outside : 0),
          stacked: String(drawn ? drawn.stacked : 0),
        },
        title: `select head ${h}${drawn ? thumbTitle(drawn) : ""}`,
      },
      [canvas, el("span", { text: `H${h}${klText}` })],
    );
    button.addEventListener("click", () => intents.selectAtlasHead(h));
    return button;
  }

  function draw() {
    const s = store.state;
    const state = s.atlas_state || "idle";
    const H = s.n_heads || 0;
    panel.dataset.state = state;
    run.textContent = state === "running" ? "■ stop" : state === "done" ? "↻ recompute" : "▦ compute atlas";
    run.disabled = Boolean(s.offline);
    if (s.offline) run.title = "a saved page: computing an atlas needs the notebook's kernel";
    const finished = new Set(s.atlas_heads ?? []);
    progress.textContent = state === "running" ? `${finished.size} / ${H} heads…` : state === "error" ? "failed" : "";
    title.textContent = `head atlas · layer ${s.atlas_layer ?? headOf(s).layer}`;
    setText(note, atlasNote(s));
    const { atlas, kl, error } = readAtlas(s);
    if (error) progress.textContent = error;
    if (!atlas || atlas.shape.length !== 3 || !s.theme) {
      thumbs.replaceChildren();
      panel.dataset.thumbnails = "0";
      return;
    }
    const order = Array.from({ length: atlas.shape[0] }, (_, h) => h);
    const klOf = (/** @type {number} */ h) => (kl && finished.has(h) ? kl[h] : Infinity); // missing heads last
    if (sort.value === "kl") order.sort((a, b) => klOf(a) - klOf(b));
    thumbs.replaceChildren(...order.map((h) => thumbnail(h, atlas, kl, finished.has(h))));
    panel.dataset.thumbnails = String(atlas.shape[0]);
  }

  /** @type {(keyof State)[]} */
  const keys = ["atlas", "atlas_kl", "atlas_state", "atlas_heads", "atlas_layer", "n_heads", "theme", "colours"];
  scope.add(
    store.watch([...keys, "layer", "head", "mode", "n_iter", "seed", "atlas_n_iter", "atlas_seed", "offline"], draw),
  );
  return { destroy: () => scope.dispose() };
}
