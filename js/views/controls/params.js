// The settings: the mode control, on view in the map's view row ("map of": attention head, hidden states, ...),
// and in the inspector's settings tab the t-SNE parameters, then the display options (labels, edges per token,
// quantile axes and their knots). Every input writes its trait through the intents and follows the trait when Python
// changes it; an entry out of Python's bounds (js/model/model.js BOUNDS) is marked, says why, and is not sent.

import { disposer, el } from "../../lib/dom.js";
import { BOUNDS, T, outOfBounds } from "../../model/model.js";
import { MODE_NAMES, sourceOf } from "../../model/sources.js";

/**
 * A number typed in a field, checked against the trait's bounds (throws with the reason).
 * @param {string} trait
 * @returns {(s: string) => number}
 */
const bounded = (trait) => (s) => {
  const text = String(s).trim();
  const v = text === "" ? NaN : Number(text);
  const why = outOfBounds(trait, v);
  if (why) throw new Error(why);
  return v;
};
const learningRate = (/** @type {string} */ s) => {
  const t = String(s).trim().toLowerCase();
  return t === "" || t === "auto" ? null : bounded(T.learning_rate)(t);
};

/**
 * A parameter input: its trait, label, parser (text -> value, throws with the reason) and formatter.
 * @typedef {{trait: "perplexity" | "learning_rate" | "n_iter" | "seed" | "restarts" | "quantile_k" | "edge_k",
 *   label: string, parse: (s: string) => number | null, show?: (v: any) => string, title?: string}} Param
 */

/**
 * `title` with the trait's bounds.
 * @param {string} trait
 * @param {string} title
 */
const within = (trait, title) => `${title} (${BOUNDS[trait].min} to ${BOUNDS[trait].max})`;

/** @type {Param[]} the t-SNE parameters */
export const PARAMS = [
  {
    trait: T.perplexity,
    label: "perplexity",
    parse: bounded(T.perplexity),
    title: within(T.perplexity, "perplexity of the Gaussian affinities (hidden-state mode only)"),
  },
  {
    trait: T.learning_rate,
    label: "learning rate",
    parse: learningRate,
    show: (v) => (v == null ? "auto" : String(v)),
    title: "gradient descent step size, up to 1e9; 'auto' lets the backend choose it from n",
  },
  { trait: T.n_iter, label: "iterations", parse: bounded(T.n_iter), title: within(T.n_iter, "iterations of a run") },
  { trait: T.seed, label: "seed", parse: bounded(T.seed), title: within(T.seed, "the run's random seed") },
  {
    trait: T.restarts,
    label: "restarts",
    parse: bounded(T.restarts),
    title: within(T.restarts, "best of N runs by KL divergence"),
  },
];

/** @type {Param[]} the display options' numbers */
export const DISPLAY = [
  {
    trait: T.edge_k,
    label: "edges per token",
    parse: bounded(T.edge_k),
    title: within(T.edge_k, "how many partners of the hovered token its edges go to"),
  },
  {
    trait: T.quantile_k,
    label: "quantile knots",
    parse: bounded(T.quantile_k),
    title: within(T.quantile_k, "knots per axis of the quantile-equidistant axes"),
  },
];

/** @type {["exclude_special" | "quantile" | "contours" | "cluster_labels", string, string][]} */
const CHECKS = [
  [T.exclude_special, "exclude special tokens", "leave [CLS], [SEP], ... out of the map"],
  [T.quantile, "quantile axes", "quantile-equidistant rescaling of both axes (thesis, appendix A.3)"],
  [T.contours, "density contours", "lines of equal density of the map's points, drawn once a run ends (w.contours)"],
  [
    T.cluster_labels,
    "cluster names",
    "the names of the map's clusters, each by its most characteristic tokens, where Python sent them (w.cluster_labels)",
  ],
];

/**
 * @typedef {import("../../store/state.js").State} State
 */

/**
 * A text field for `spec`: Enter applies it at once, a change writes the trait or marks the field invalid.
 * @param {Param} spec
 * @param {ReturnType<typeof disposer>} scope
 * @param {import("../../store/intents.js").Intents} intents
 */
function field(spec, scope, intents) {
  const title = spec.title || spec.label;
  const input = el("input", {
    className: "hs-num",
    type: "text",
    inputMode: "decimal",
    title,
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
      input.title = title;
      intents.write({ [spec.trait]: value });
    } catch (err) {
      input.setAttribute("aria-invalid", "true");
      input.title = `${spec.label} ${/** @type {Error} */ (err).message}`;
    }
  });
  return input;
}

/**
 * @param {{dom: {paramRow: HTMLElement, modeSlot: HTMLElement}, store: import("../../store/store.js").Store<State>,
 *   intents: import("../../store/intents.js").Intents}} ctx
 */
export function createParams({ dom, store, intents }) {
  const scope = disposer();
  const mode = el(
    "select",
    {
      dataset: { testid: "headsne-mode" },
      title: MODE_NAMES.map((name) => `${sourceOf(name).option}: ${sourceOf(name).describes}`).join("\n"),
    },
    MODE_NAMES.map((name) => el("option", { value: name, text: sourceOf(name).option })),
  );
  scope.listen(mode, "change", () => intents.write({ mode: mode.value }));
  const labels = el("input", {
    type: "range",
    min: "0",
    max: "1",
    step: "0.05",
    className: "hs-density",
    dataset: { testid: "headsne-labels" },
    title: "label density (0 = no labels)",
    "aria-label": "label density",
  });
  scope.listen(labels, "input", () => intents.preview(T.label_density, Number(labels.value)));
  scope.listen(labels, "change", () => intents.write({ [T.label_density]: Number(labels.value) }));

  const inputs = [...PARAMS, ...DISPLAY].map((spec) => ({ input: field(spec, scope, intents), spec }));
  const labelled = (/** @type {HTMLElement} */ input, /** @type {string} */ text) => el("label", {}, [text, input]);
  const checks = CHECKS.map(([trait, label, title]) => {
    const box = el("input", { type: "checkbox", title });
    scope.listen(box, "change", () => intents.write({ [trait]: box.checked }));
    return { trait, box, node: el("label", { title }, [box, label]) };
  });
  const [exclude, quantile, contours, clusters] = checks;
  const modeLabel = labelled(mode, "map of");
  dom.modeSlot.append(modeLabel);
  const group = (/** @type {string} */ name, /** @type {HTMLElement[]} */ items) =>
    el("div", { className: "hs-param-group" }, [el("span", { className: "hs-param-head", text: name }), ...items]);
  dom.paramRow.append(
    group("t-SNE", [
      ...inputs.slice(0, PARAMS.length).map(({ input, spec }) => labelled(input, spec.label)),
      exclude.node,
    ]),
    group("display", [
      labelled(labels, "labels"),
      ...inputs.slice(PARAMS.length, PARAMS.length + 1).map(({ input, spec }) => labelled(input, spec.label)),
      quantile.node,
      ...inputs.slice(PARAMS.length + 1).map(({ input, spec }) => labelled(input, spec.label)),
      contours.node,
      clusters.node,
    ]),
  );

  function sync() {
    const s = store.state;
    mode.value = s.mode;
    // word mode: the occurrences of a word across texts have no attention between them, only hidden states
    modeLabel.hidden = Boolean(s.doc.word);
    for (const { input, spec } of inputs) {
      const value = s[spec.trait];
      input.value = spec.show ? spec.show(value) : String(value);
      input.removeAttribute("aria-invalid");
    }
    for (const { trait, box } of checks) box.checked = Boolean(s[trait]);
    labels.value = String(s.label_density ?? 0.5);
    inputs[0].input.disabled = !sourceOf(s.mode).usesPerplexity; // perplexity: the modes of points only
    if (s.offline) {
      // a saved page: what needs the kernel (a new run, new partners) is off
      for (const node of [
        mode,
        exclude.box,
        ...inputs.filter(({ spec }) => spec.trait !== T.quantile_k).map((i) => i.input),
      ]) {
        node.disabled = true;
        node.title = "a saved page: this needs the notebook's kernel";
      }
    }
  }
  /** @type {(keyof State)[]} */
  const keys = [
    "doc",
    "mode",
    "exclude_special",
    "quantile",
    "label_density",
    "contours",
    "cluster_labels",
    ...[...PARAMS, ...DISPLAY].map((p) => p.trait),
  ];
  scope.add(store.watch(keys, sync));
  return { destroy: () => scope.dispose() };
}
