// The header's subtitle (model, grid size, tokens) and the map's caption (the head or the hidden-state
// layer on display).

/**
 * @typedef {import("./state.js").State} State
 */

/**
 * @param {State} s
 * @returns {{subtitle: string, caption: string}}
 */
export function headerText(s) {
  const subtitle = [s.model_name, `${s.n_layers} layers × ${s.n_heads} heads`, `${s.doc.tokens.length} tokens`]
    .filter(Boolean)
    .join(" · ");
  const caption =
    s.mode === "hidden"
      ? `t-SNE of the hidden states of layer ${s.layer} (perplexity ${s.perplexity})`
      : `attention-head t-SNE · layer ${s.layer} · head ${s.head}`;
  return { subtitle, caption };
}

/**
 * @param {{dom: {subtitle: HTMLElement, scatterCaption: HTMLElement},
 *   store: import("./store.js").Store<State>}} ctx
 */
export function createHeader({ dom, store }) {
  /** @type {(keyof State)[]} */
  const keys = ["model_name", "n_layers", "n_heads", "layer", "head", "mode", "perplexity", "doc"];
  const stop = store.watch(keys, (s) => {
    const { subtitle, caption } = headerText(s);
    dom.subtitle.textContent = subtitle;
    dom.scatterCaption.textContent = caption;
  });
  return { destroy: stop };
}
