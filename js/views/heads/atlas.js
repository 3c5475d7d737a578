// The head atlas (data-testid="headsne-atlas", the inspector's atlas tab): a small t-SNE thumbnail for every head of
// a layer (the one shown when it was asked for: `atlas_layer`), computed by Python in the background on request
// (control "atlas", cancelled by "atlas_stop"), with its progress, sortable by head or by KL; its caption
// (data-testid="headsne-atlas-caption") names the layer it shows and says when the map shows another, and the button
// then computes the map's layer (issue 52); heads not done yet (or
// never, after a stop) show as empty; a click on a thumbnail selects that layer and head. Its note says
// with how many iterations and which seed the thumbnails ran, and whether their KLs compare with the
// map's (a run of other length or seed ends at another KL). The thumbnails are drawn by js/views/heads/atlas-thumb.js;
// each button carries data-outside (tokens off the scale) and data-stacked (the most tokens of one mark).

import { decodeArray } from "../../model/codecs.js";
import { disposer, el } from "../../lib/dom.js";
import { setText } from "../../lib/schedule.js";
import { headOf } from "../../store/state.js";
import { SIZE, paintThumb } from "./atlas-thumb.js";

/**
 * @typedef {import("../../store/state.js").State} State
 */

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
 * The atlas's caption, and whether its layer is not the map's (`stale`).
 * @param {State} s
 */
export function atlasCaption(s) {
  const map = headOf(s).layer;
  const shown = s.atlas_layer;
  if (shown == null || (!s.atlas && s.atlas_state !== "running")) {
    return { text: `head atlas of layer ${map}: a small t-SNE of each of its heads`, stale: false };
  }
  if (shown === map) return { text: `head atlas of layer ${shown}, the map's layer`, stale: false };
  return { text: `head atlas of layer ${shown}; the map shows layer ${map}`, stale: true };
}

/**
 * The button's text: stop a running atlas, compute one, or compute the map's layer where the atlas shows another.
 * @param {State} s
 * @param {boolean} stale
 */
function runText(s, stale) {
  const state = s.atlas_state || "idle";
  if (state === "running") return "■ stop";
  if (stale) return `▦ compute layer ${headOf(s).layer}`;
  return state === "done" ? "↻ recompute" : "▦ compute atlas";
}

/**
 * @param {{dom: {atlasPanel: HTMLElement, atlasTitle: HTMLElement}, store: import("../../store/store.js").Store<State>,
 *   intents: import("../../store/intents.js").Intents}} ctx
 */
export function createAtlas({ dom, store, intents }) {
  const panel = dom.atlasPanel;
  const scope = disposer();
  const note = el("div", { className: "hs-atlas-note", dataset: { testid: "headsne-atlas-note" } });
  const title = el("span", {
    className: "hs-atlas-title",
    text: "head atlas",
    dataset: { testid: "headsne-atlas-caption" },
  });
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
    const theme = /** @type {import("../../lib/theme.js").Theme} */ (s.theme);
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
    const caption = atlasCaption(s);
    run.textContent = runText(s, caption.stale);
    run.disabled = Boolean(s.offline);
    if (s.offline) run.title = "a saved page: computing an atlas needs the notebook's kernel";
    const finished = new Set(s.atlas_heads ?? []);
    progress.textContent = state === "running" ? `${finished.size} / ${H} heads…` : state === "error" ? "failed" : "";
    setText(title, caption.text);
    title.dataset.stale = String(caption.stale);
    title.dataset.layer = String(s.atlas_layer ?? "");
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

  // word mode: an atlas maps one text's heads; the occurrences are in texts of their own
  scope.add(store.watch(["doc"], (s) => (panel.hidden = Boolean(s.doc.word))));
  /** @type {(keyof State)[]} */
  const keys = ["atlas", "atlas_kl", "atlas_state", "atlas_heads", "atlas_layer", "n_heads", "theme", "colours"];
  scope.add(
    store.watch([...keys, "layer", "head", "mode", "n_iter", "seed", "atlas_n_iter", "atlas_seed", "offline"], draw),
  );
  return { destroy: () => scope.dispose() };
}
