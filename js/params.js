// The parameter row: the affinities (attention head or hidden states), the t-SNE parameters and the
// display options. Every input writes its trait through the intents and follows the trait when Python
// changes it; invalid entries are marked and not sent.

import { disposer, el } from "./dom.js";
import { T } from "./model.js";

/** @param {number} min */
const int = (min) => (/** @type {string} */ s) => {
  const v = Number(s);
  if (!Number.isInteger(v) || v < min) throw new Error(`must be an integer >= ${min}`);
  return v;
};
const positive = (/** @type {string} */ s) => {
  const v = Number(s);
  if (!Number.isFinite(v) || v <= 0) throw new Error("must be a positive number");
  return v;
};
const learningRate = (/** @type {string} */ s) => {
  const t = String(s).trim().toLowerCase();
  return t === "" || t === "auto" ? null : positive(t);
};

/**
 * A parameter input: its trait, label, parser (text -> value, throws with the reason) and formatter.
 * @typedef {{trait: "perplexity" | "learning_rate" | "n_iter" | "seed" | "restarts" | "quantile_k" | "edge_k",
 *   label: string, parse: (s: string) => number | null, show?: (v: any) => string, title?: string}} Param
 */

/** @type {Param[]} */
export const PARAMS = [
  {
    trait: T.perplexity,
    label: "perplexity",
    parse: positive,
    title: "perplexity of the Gaussian affinities (hidden-state mode only)",
  },
  {
    trait: T.learning_rate,
    label: "learning rate",
    parse: learningRate,
    show: (v) => (v == null ? "auto" : String(v)),
    title: "gradient descent step size; 'auto' lets the backend choose it from n",
  },
  { trait: T.n_iter, label: "iterations", parse: int(1) },
  { trait: T.seed, label: "seed", parse: int(0) },
  { trait: T.restarts, label: "restarts", parse: int(1), title: "best of N runs by KL divergence" },
  { trait: T.quantile_k, label: "k", parse: int(2), title: "number of quantiles of the quantile-equidistant axes" },
  { trait: T.edge_k, label: "edges", parse: int(1), title: "attention edges drawn for the hovered token" },
];

/** @type {["exclude_special" | "quantile", string, string][]} */
const CHECKS = [
  [T.exclude_special, "exclude special tokens", "leave [CLS], [SEP], ... out of the map"],
  [T.quantile, "quantile axes", "quantile-equidistant rescaling of both axes (thesis, appendix A.3)"],
];

/**
 * @typedef {import("./state.js").State} State
 */

/**
 * @param {{dom: {paramRow: HTMLElement}, store: import("./store.js").Store<State>,
 *   intents: import("./intents.js").Intents}} ctx
 */
export function createParams({ dom, store, intents }) {
  const row = dom.paramRow;
  const scope = disposer();
  const mode = el(
    "select",
    {
      dataset: { testid: "headsne-mode" },
      title: "affinities from an attention head, or from a layer's hidden states",
    },
    [
      el("option", { value: "attention", text: "attention head" }),
      el("option", { value: "hidden", text: "hidden states" }),
    ],
  );
  scope.listen(mode, "change", () => intents.write({ mode: mode.value }));
  row.append(el("label", {}, ["affinities", mode]));

  /** @type {{input: HTMLInputElement, spec: Param}[]} */
  const inputs = PARAMS.map((spec) => {
    const input = el("input", {
      className: "hs-num",
      type: "text",
      inputMode: "decimal",
      title: spec.title || spec.label,
      "aria-label": spec.label,
    });
    // Enter applies the field at once (the change event alone waits for the focus to leave)
    scope.listen(input, "keydown", (/** @type {KeyboardEvent} */ event) => {
      if (event.key !== "Enter") return;
      event.preventDefault();
      input.dispatchEvent(new Event("change"));
    });
    scope.listen(input, "change", () => {
      try {
        const value = spec.parse(input.value);
        input.removeAttribute("aria-invalid");
        input.title = spec.title || spec.label;
        intents.write({ [spec.trait]: value });
      } catch (err) {
        input.setAttribute("aria-invalid", "true");
        input.title = `${spec.label} ${/** @type {Error} */ (err).message}`;
      }
    });
    row.append(el("label", {}, [spec.label, input]));
    return { input, spec };
  });
  const checks = CHECKS.map(([trait, label, title]) => {
    const box = el("input", { type: "checkbox", title });
    scope.listen(box, "change", () => intents.write({ [trait]: box.checked }));
    row.append(el("label", { title }, [box, label]));
    return { trait, box };
  });

  function sync() {
    const s = store.state;
    mode.value = s.mode;
    for (const { input, spec } of inputs) {
      const value = s[spec.trait];
      input.value = spec.show ? spec.show(value) : String(value);
      input.removeAttribute("aria-invalid");
    }
    for (const { trait, box } of checks) box.checked = Boolean(s[trait]);
    inputs[0].input.disabled = s.mode !== "hidden"; // perplexity: hidden-state mode only
  }
  /** @type {(keyof State)[]} */
  const keys = ["mode", "exclude_special", "quantile", ...PARAMS.map((p) => p.trait)];
  scope.add(store.watch(keys, sync));
  return { destroy: () => scope.dispose() };
}
