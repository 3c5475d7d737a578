// The model as the views use it: `write` (set + one `save_changes`), `preview`, `control`, and the host's events.
// The trait names, types, writable set and bounds are generated from headsne_widget/widget/protocol.py into
// js/model/protocol.generated.js (python -m headsne_widget.widget.codegen) and re-exported here; meanings:
// js/PROTOCOL.md.

import { BOUNDS, T, WRITABLE } from "./protocol.generated.js";

export { BOUNDS, T, WRITABLE };

/**
 * @typedef {import("./protocol.generated.js").WireArray} WireArray
 * @typedef {import("./protocol.generated.js").WireEdges} WireEdges
 * @typedef {import("./protocol.generated.js").Traits} Traits
 * @typedef {import("./protocol.generated.js").TraitName} TraitName
 * @typedef {Traits["color_mode"]} ColorMode
 * @typedef {Traits["edge_direction"]} EdgeDirection
 * @typedef {Traits["state"]} RunState
 * @typedef {Traits["atlas_state"]} AtlasState
 */

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

/**
 * The event string for `model.on` that fires when any of `names` changes: "change:a change:b".
 * @param {...TraitName} names
 */
export function changes(...names) {
  return names.map((name) => `change:${name}`).join(" ");
}

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
 * @param {import("./protocol.generated.js").ControlAction} action
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
