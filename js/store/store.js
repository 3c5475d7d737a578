// A small store: one state object, replaced (never mutated) by `set(patch)`, with subscriptions by key,
// and one-shot events (`emit` / `on`) for what is no state (reset the zoom, export a PNG, an error).
// The widget's state and its update functions are in js/store/state.js; who writes what is in js/PROTOCOL.md.

/**
 * @template {object} S
 * @typedef {object} Store
 * @property {S} state the current state (read only: change it with `set`)
 * @property {(patch: Partial<S>) => void} set merge `patch` into the state; the subscribers of the keys whose
 *   value changed (!==) run at once, each once, in the order they subscribed
 * @property {(keys: (keyof S)[], fn: (state: S, prev: S | null) => void) => () => void} subscribe run
 *   `fn(state, prev)` whenever one of `keys` changes (`prev`: the state this subscriber saw last); returns
 *   the unsubscribe function
 * @property {(keys: (keyof S)[], fn: (state: S, prev: S | null) => void) => () => void} watch `subscribe`,
 *   and run `fn(state, null)` at once (null: everything is new)
 * @property {(event: string, payload?: any) => void} emit tell the handlers of `event` (in order)
 * @property {(event: string, fn: (payload: any) => void) => () => void} on handle `event`; returns the
 *   function that stops it
 */

/**
 * Whether `key` differs between `state` and `prev` (always true when `prev` is null: a first render).
 * @template {object} S
 * @param {S} state
 * @param {S | null} prev
 * @param {keyof S} key
 */
export function changed(state, prev, key) {
  return prev === null || state[key] !== prev[key];
}

/**
 * @template {object} S
 * @param {S} initial
 * @returns {Store<S>}
 */
export function createStore(initial) {
  let state = initial;
  /** @type {{keys: (keyof S)[], fn: (state: S, prev: S | null) => void, seen: S, live: boolean}[]} */
  let subscribers = [];
  /** @type {Map<string, ((payload: any) => void)[]>} */
  const handlers = new Map();

  // A subscriber runs when one of its keys differs from the state it saw last: a `set` inside a
  // subscriber notifies everyone at once, and the outer `set` then skips those already up to date.
  function notify() {
    for (const sub of subscribers) {
      if (!sub.live || sub.seen === state) continue;
      const seen = sub.seen;
      if (!sub.keys.some((key) => state[key] !== seen[key])) {
        sub.seen = state;
        continue;
      }
      sub.seen = state;
      sub.fn(state, seen);
    }
  }

  /** @type {Store<S>} */
  const store = {
    get state() {
      return state;
    },
    set(patch) {
      const keys = /** @type {(keyof S)[]} */ (Object.keys(patch));
      if (!keys.some((key) => patch[key] !== state[key])) return;
      state = { ...state, ...patch };
      notify();
    },
    subscribe(keys, fn) {
      const sub = { keys, fn, seen: state, live: true };
      subscribers = [...subscribers, sub];
      return () => {
        sub.live = false;
        subscribers = subscribers.filter((s) => s !== sub);
      };
    },
    watch(keys, fn) {
      const stop = store.subscribe(keys, fn);
      fn(state, null);
      return stop;
    },
    emit(event, payload) {
      for (const fn of handlers.get(event) ?? []) fn(payload);
    },
    on(event, fn) {
      handlers.set(event, [...(handlers.get(event) ?? []), fn]);
      return () =>
        handlers.set(
          event,
          (handlers.get(event) ?? []).filter((f) => f !== fn),
        );
    },
  };
  return store;
}
