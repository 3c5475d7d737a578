// The model's traits, declared once: their types (JSDoc, checked by `tsc --checkJs` in `npm run lint`) and their
// names (`T.layer`, not "layer"). The Python half is headsne_widget/widget/protocol.py; meanings: js/PROTOCOL.md.

/**
 * An array on the wire (js/model/codecs.js): little-endian, C order. Edges: top-k partners per token, indices int32
 * (n, k) and weights float32 (n, k).
 * @typedef {{dtype: "float32" | "int32", shape: number[], buffer: DataView | ArrayBuffer}} WireArray
 * @typedef {{indices: WireArray, weights: WireArray}} WireEdges
 * @typedef {"position" | "kind" | "sentence" | "max_attention" | "user"} ColorMode
 * @typedef {"both" | "to" | "from" | "off"} EdgeDirection
 * @typedef {"loading" | "idle" | "running" | "paused" | "done" | "error"} RunState
 * @typedef {"idle" | "running" | "done" | "error"} AtlasState
 */

/**
 * Every synced trait. Traits added after the first version may be missing (undefined) when the Python
 * side is older: readers default them.
 * @typedef {object} Traits
 * @property {string} text
 * @property {string[]} tokens
 * @property {([number, number] | null)[]} offsets
 * @property {boolean[]} special
 * @property {string} model_name
 * @property {number} n_layers
 * @property {number} n_heads
 * @property {WireArray | null} max_attention float32 (L, H, n)
 * @property {number} kv_groups query heads per key/value head (GQA); 1 = none
 * @property {number} layer
 * @property {number} head
 * @property {"attention" | "hidden" | "query-key"} mode query-key: frame rows 0..query_rows-1 are queries, the rest keys
 * @property {number} perplexity
 * @property {number | null} learning_rate
 * @property {number} n_iter
 * @property {number} early_exaggeration
 * @property {number} exaggeration_iters
 * @property {number} seed
 * @property {number} restarts
 * @property {boolean} exclude_special
 * @property {boolean} quantile
 * @property {number} quantile_k
 * @property {number} speed
 * @property {number} edge_k
 * @property {WireArray | null} frame float32 (m, 2)
 * @property {number[]} kept
 * @property {number} iteration
 * @property {number | null} kl
 * @property {number} run_id
 * @property {string} status
 * @property {RunState} state
 * @property {WireEdges | null} edges
 * @property {number[]} selected token indices, both ways
 * @property {number | null} hovered token index, both ways
 * @property {[number, number] | null} hovered_head [layer, head] of the grid row the pointer rests on (long texts)
 * @property {ColorMode} color_mode
 * @property {WireArray | null} color_values float32 (n,)
 * @property {string[]} color_categories non-empty: color_values are integer codes into it
 * @property {number} label_density 0 = no labels, 1 = as many as fit
 * @property {EdgeDirection} edge_direction
 * @property {WireEdges | null} attends_to row i of A: token i's top-k keys
 * @property {WireEdges | null} attended_by column i of A: token i's top-k queries
 * @property {WireArray | null} atlas float32 (H, m, 2): one small t-SNE per head of `atlas_layer`
 * @property {WireArray | null} atlas_kl float32 (H,), 0 where not done
 * @property {number[]} atlas_heads the heads of the atlas done so far
 * @property {number | null} atlas_layer the layer the atlas shows
 * @property {AtlasState} atlas_state
 * @property {number | null} atlas_n_iter iterations of each atlas thumbnail's run
 * @property {number | null} atlas_seed the seed of the atlas thumbnails' runs
 * @property {number | null} progress fraction done of what `status` names, or null
 * @property {number | null} best_kl best KL of a background best-of-restarts check
 * @property {WireArray | null} max_attention_above_uniform float32 (L, H, n): the grid above uniform attention
 * @property {string[]} score_names the scores of `scores`
 * @property {WireArray | null} scores float32 (L, H, S): every head's scores, -1 where undefined
 * @property {string[]} head_kinds per head (layer * H + head): sink, previous, next, self, special, local, broad, focused
 * @property {WireArray | null} head_map float32 (L * H, 2) in [-1, 1]: every head placed by similarity, or null
 * @property {"raw" | "above_uniform"} grid_norm which grid to draw (the legend names it)
 * @property {string} sort_heads "" (model order) or a score name: the grid sorts each layer's heads by it
 * @property {WireArray | null} head_order int32 (L, H): row k of layer l shows head head_order[l][k]
 * @property {object[]} related the heads most like the selected one: {layer, head, similarity}, most similar first
 * @property {number} query_rows query-key mode: the first query_rows frame rows are queries; 0 otherwise
 */

/** @typedef {keyof Traits} TraitName */

/**
 * The anywidget model as the views use it.
 * @typedef {object} Model
 * @property {<K extends TraitName>(name: K) => Traits[K]} get
 * @property {<K extends TraitName>(name: K, value: Traits[K]) => void} set
 * @property {() => void} save_changes
 * @property {(event: string, fn: (...args: any[]) => void) => void} on
 * @property {(event: string, fn: (...args: any[]) => void) => void} off
 * @property {(message: object) => void} send
 */

/** Trait names: `T.layer === "layer"`; tsc checks that every trait has its name and no other. */
/** @type {{readonly [K in TraitName]: K}} */
export const T = Object.freeze({
  text: "text",
  tokens: "tokens",
  offsets: "offsets",
  special: "special",
  model_name: "model_name",
  n_layers: "n_layers",
  n_heads: "n_heads",
  max_attention: "max_attention",
  kv_groups: "kv_groups",
  layer: "layer",
  head: "head",
  mode: "mode",
  perplexity: "perplexity",
  learning_rate: "learning_rate",
  n_iter: "n_iter",
  early_exaggeration: "early_exaggeration",
  exaggeration_iters: "exaggeration_iters",
  seed: "seed",
  restarts: "restarts",
  exclude_special: "exclude_special",
  quantile: "quantile",
  quantile_k: "quantile_k",
  speed: "speed",
  edge_k: "edge_k",
  frame: "frame",
  kept: "kept",
  iteration: "iteration",
  kl: "kl",
  run_id: "run_id",
  status: "status",
  state: "state",
  edges: "edges",
  selected: "selected",
  hovered: "hovered",
  hovered_head: "hovered_head",
  color_mode: "color_mode",
  color_values: "color_values",
  color_categories: "color_categories",
  label_density: "label_density",
  edge_direction: "edge_direction",
  attends_to: "attends_to",
  attended_by: "attended_by",
  atlas: "atlas",
  atlas_kl: "atlas_kl",
  atlas_heads: "atlas_heads",
  atlas_layer: "atlas_layer",
  atlas_state: "atlas_state",
  atlas_n_iter: "atlas_n_iter",
  atlas_seed: "atlas_seed",
  progress: "progress",
  best_kl: "best_kl",
  max_attention_above_uniform: "max_attention_above_uniform",
  score_names: "score_names",
  scores: "scores",
  head_kinds: "head_kinds",
  head_map: "head_map",
  grid_norm: "grid_norm",
  sort_heads: "sort_heads",
  head_order: "head_order",
  related: "related",
  query_rows: "query_rows",
});

/**
 * The event string for `model.on` that fires when any of `names` changes: "change:a change:b".
 * @param {...TraitName} names
 */
export function changes(...names) {
  return names.map((name) => `change:${name}`).join(" ");
}

/**
 * The traits the browser may write: what a user may set (Python's roles selection, parameter and display in
 * headsne_widget/widget/protocol.py; tests/test_protocol.py checks that the two lists agree). Every other
 * trait is Python's: `write` and `preview` refuse it, and Python would refuse it too.
 */
export const WRITABLE = Object.freeze(
  new Set(
    /** @type {TraitName[]} */ ([
      "layer",
      "head",
      "mode",
      "perplexity",
      "learning_rate",
      "n_iter",
      "early_exaggeration",
      "exaggeration_iters",
      "seed",
      "restarts",
      "exclude_special",
      "quantile",
      "quantile_k",
      "speed",
      "edge_k",
      "selected",
      "hovered",
      "hovered_head",
      "color_mode",
      "label_density",
      "edge_direction",
      "grid_norm",
      "sort_heads",
    ]),
  ),
);

/**
 * The bounds of the numbers the browser writes, Python's (headsne_widget/widget/protocol.py; tests/test_protocol.py
 * checks that they agree): [min, max], `int` for integers, `above` when the min itself is refused, `gap`: the
 * numbers strictly between min and this are refused too (speed: 0, or at least 0.1).
 * @type {Readonly<Record<string, {min: number, max: number, int?: boolean, above?: boolean, gap?: number}>>}
 */
export const BOUNDS = Object.freeze({
  layer: { min: 0, max: Number.MAX_SAFE_INTEGER, int: true },
  head: { min: 0, max: Number.MAX_SAFE_INTEGER, int: true },
  perplexity: { min: 0, max: 1e4, above: true },
  learning_rate: { min: 0, max: 1e9, above: true },
  n_iter: { min: 1, max: 100000, int: true },
  early_exaggeration: { min: 1, max: 1000 },
  exaggeration_iters: { min: 0, max: 100000, int: true },
  seed: { min: 0, max: 4294967295, int: true },
  restarts: { min: 1, max: 1000, int: true },
  quantile_k: { min: 2, max: 1000, int: true },
  speed: { min: 0, max: 1e6, gap: 0.1 },
  edge_k: { min: 1, max: 100, int: true },
  label_density: { min: 0, max: 1 },
  hovered: { min: 0, max: Number.MAX_SAFE_INTEGER, int: true },
});

/**
 * Why the browser may not send `value` for trait `name` ("" when it may): a number out of its bounds.
 * @param {string} name
 * @param {unknown} value
 */
export function outOfBounds(name, value) {
  const b = BOUNDS[name];
  if (!b || typeof value !== "number") return "";
  const range = `${b.above ? "(" : "["}${b.min}, ${b.max}]`;
  if (!Number.isFinite(value) || (b.int && !Number.isInteger(value)))
    return `must be ${b.int ? "an integer" : "a number"} in ${range}`;
  if (value < b.min || value > b.max || (b.above && value === b.min)) return `must be in ${range}`;
  if (b.gap && value > b.min && value < b.gap) return `must be ${b.min} or at least ${b.gap}`;
  return "";
}

/**
 * Set traits in the page without sending them (see `write`); a trait the browser may not write, or a number
 * out of its bounds (one Python would refuse), is refused.
 * @param {Model} model
 * @param {Partial<Traits>} values
 */
export function preview(model, values) {
  for (const [name, value] of Object.entries(values)) {
    if (!WRITABLE.has(/** @type {TraitName} */ (name))) throw new Error(`the browser may not write ${name}`);
    const why = outOfBounds(name, value);
    if (why) throw new RangeError(`${name} ${why}, got ${value}`);
  }
  for (const [name, value] of Object.entries(values)) model.set(/** @type {TraitName} */ (name), value);
}

/**
 * Write several traits and send them in one message (one `save_changes`).
 * @param {Model} model
 * @param {Partial<Traits>} values
 */
export function write(model, values) {
  preview(model, values);
  model.save_changes();
}

/**
 * A control message to Python (`{"type": "control", "action": ...}`).
 * @param {Model} model
 * @param {"pause" | "resume" | "restart" | "stop" | "atlas" | "atlas_stop"} action
 */
export function control(model, action) {
  model.send({ type: "control", action });
}

/**
 * The host's model with `on`/`off` that also take several space-separated events ("change:a change:b",
 * what `changes()` makes). Backbone (JupyterLab, Notebook 7) splits such a string itself; the anywidget
 * front-end module spec does not, and marimo's model keys its listeners by the whole string, so no
 * "change:x" it emits would ever reach them: nothing Python sets after the first render would show.
 * Registering each event on its own is what Backbone does, so both hosts behave the same.
 * @param {Model} host
 * @returns {Model}
 */
export function oneEventAtATime(host) {
  const each = (/** @type {string} */ events, /** @type {(name: string) => void} */ fn) => {
    for (const name of events.split(/\s+/)) if (name) fn(name);
  };
  return {
    get: (name) => host.get(name),
    set: (name, value) => host.set(name, value),
    save_changes: () => host.save_changes(),
    send: (message) => host.send(message),
    on: (events, fn) => each(events, (name) => host.on(name, fn)),
    off: (events, fn) => each(events, (name) => host.off(name, fn)),
  };
}
