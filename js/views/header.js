// The header's subtitle (model, grid size, tokens; in word mode what the points are: 'bank' across texts · 20
// occurrences) and the map's caption (the head or the hidden-state layer on display).
import { sourceOf } from "../model/sources.js";

/**
 * @typedef {import("../store/state.js").State} State
 */

/**
 * @param {State} s
 * @returns {{subtitle: string, caption: string}}
 */
export function headerText(s) {
  // before the text is captured (state "loading") only what is known: no "0 layers × 0 heads"
  const shape = s.n_layers && s.n_heads ? `${s.n_layers} layers × ${s.n_heads} heads` : "";
  const n = s.doc.tokens.length;
  const tokens = n ? `${n} tokens` : "";
  const points = s.doc.word ? `'${s.doc.word}' across texts · ${n} occurrence${n === 1 ? "" : "s"}` : "";
  const subtitle = (points ? [s.model_name, points] : [s.model_name, shape, tokens]).filter(Boolean).join(" · ");
  const source = sourceOf(s.mode);
  const where = source.perHead ? `layer ${s.layer} · head ${s.head}` : `layer ${s.layer}`;
  const perplexity = source.usesPerplexity ? ` (perplexity ${s.perplexity})` : "";
  const of = s.doc.word ? ` of '${s.doc.word}'` : "";
  const caption = `${source.caption}${of} · ${where}${perplexity}`;
  return { subtitle, caption };
}

/**
 * The badge of a saved page: what it is, and which heads it can show.
 * @param {State} s
 */
export function badgeText(s) {
  if (!s.offline) return "";
  const others = s.offline.heads.length > 1;
  return others
    ? `${s.offline.label} · no kernel: the heads of its atlas can be shown`
    : `${s.offline.label} · no kernel`;
}

/**
 * @param {{dom: {subtitle: HTMLElement, scatterCaption: HTMLElement, badge: HTMLElement},
 *   store: import("../store/store.js").Store<State>}} ctx
 */
export function createHeader({ dom, store }) {
  dom.badge.textContent = badgeText(store.state);
  dom.badge.hidden = !store.state.offline;
  dom.badge.title = "a saved page: hover, selection, search and colours work; a new run needs the notebook";
  /** @type {(keyof State)[]} */
  const keys = ["model_name", "n_layers", "n_heads", "layer", "head", "mode", "perplexity", "doc"];
  const stop = store.watch(keys, (s) => {
    const { subtitle, caption } = headerText(s);
    dom.subtitle.textContent = subtitle;
    dom.scatterCaption.textContent = caption;
  });
  return { destroy: stop };
}
