// The state store (js/store/store.js): a `set` runs the subscribers of the keys it changed, each once, in the
// order they subscribed; nested sets; `watch`; unsubscribing; events. And the state's update helpers
// (js/store/state.js) and the intents that write it (js/store/intents.js), with a fake model and a fake clock.

import { test } from "node:test";
import assert from "node:assert/strict";
import { changed, createStore } from "./store.js";
import { hoverOf, initialState, selectionOf } from "./state.js";
import { searchOf } from "../lib/search.js";
import { createIntents } from "./intents.js";
import { fakeModel } from "../test-helpers/fake-dom.js";
import { fakeClock } from "../test-helpers/testing.js";

test("set runs the subscribers of the changed keys once each, in order, with the state they saw", () => {
  const store = createStore({ a: 1, b: 2, c: 3 });
  const calls = [];
  store.subscribe(["a", "b"], (s, prev) => calls.push(["ab", s.a, s.b, prev.a, prev.b]));
  store.subscribe(["c"], (s) => calls.push(["c", s.c]));
  store.subscribe(["b"], (s) => calls.push(["b", s.b]));
  store.set({ a: 10, b: 20 });
  assert.deepEqual(calls, [
    ["ab", 10, 20, 1, 2],
    ["b", 20],
  ]);
  calls.length = 0;
  store.set({ a: 10, c: 3 }); // nothing changed: nobody runs
  assert.deepEqual(calls, []);
  store.set({ c: 4 });
  assert.deepEqual(calls, [["c", 4]]);
  assert.deepEqual(store.state, { a: 10, b: 20, c: 4 });
});

test("the state is replaced, never mutated: an old state stays as it was", () => {
  const store = createStore({ a: 1, b: [1] });
  const before = store.state;
  store.set({ a: 2 });
  assert.equal(before.a, 1);
  assert.notEqual(store.state, before);
  assert.equal(store.state.b, before.b, "untouched keys keep their values");
});

test("a set inside a subscriber reaches everyone at once; the outer set does not run them again", () => {
  const store = createStore({ text: "", rows: 0, shown: 0 });
  const calls = [];
  store.subscribe(["text"], (s) => {
    calls.push(`text ${s.text}`);
    store.set({ rows: s.text.length });
  });
  store.subscribe(["text", "rows"], (s, prev) => calls.push(`view ${s.text} ${s.rows} (was ${prev.rows})`));
  store.subscribe(["rows"], (s) => calls.push(`rows ${s.rows}`));
  store.set({ text: "abc" });
  assert.deepEqual(calls, ["text abc", "view abc 3 (was 0)", "rows 3"]);
});

test("watch runs at once with prev null; unsubscribing stops a subscriber, also during a set", () => {
  const store = createStore({ a: 1 });
  const seen = [];
  const stop = store.watch(["a"], (s, prev) => seen.push([s.a, prev && prev.a]));
  assert.deepEqual(seen, [[1, null]]);
  let stopOther = () => {};
  store.subscribe(["a"], () => stopOther()); // runs first: removes the next one before it runs
  stopOther = store.subscribe(["a"], () => seen.push("removed one ran"));
  store.set({ a: 2 });
  stop();
  store.set({ a: 3 });
  assert.deepEqual(seen, [
    [1, null],
    [2, 1],
  ]);
});

test("changed() is true for a first render and for a different value only", () => {
  const a = { x: 1, y: [1] };
  assert.equal(changed(a, null, "x"), true);
  assert.equal(changed({ ...a }, a, "y"), false);
  assert.equal(changed({ ...a, x: 2 }, a, "x"), true);
});

test("events go to their handlers in order, until a handler stops", () => {
  const store = createStore({});
  const got = [];
  const stop = store.on("export", (kind) => got.push(`1 ${kind}`));
  store.on("export", (kind) => got.push(`2 ${kind}`));
  store.emit("export", "png");
  stop();
  store.emit("export", "svg");
  store.emit("nobody listens");
  assert.deepEqual(got, ["1 png", "2 png", "2 svg"]);
});

test("the state's update helpers: selection inside the text, search matches, hover of a trait value", () => {
  assert.deepEqual([...selectionOf([3, 1, 7, -1, 1.5, "2", 1], 5)], [3, 1]);
  const offsets = [
    [0, 1],
    [2, 5],
    [5, 6],
    [7, 8],
    [9, 12],
    [12, 13],
  ];
  const doc = { ...initialState().doc, text: "a cat. a dog.", tokens: ["a", "cat", ".", "a", "dog", "."], offsets };
  assert.deepEqual([...searchOf("a", doc).matches], [0, 1, 3]);
  assert.equal(searchOf("/(/", doc).error.length > 0, true);
  assert.deepEqual([...searchOf("/(/", doc).matches], []);
  assert.deepEqual([hoverOf(2, 5), hoverOf(5, 5), hoverOf(null, 5), hoverOf(-1, 5)], [2, -1, -1, -1]);
});

test("intents: a selection is stored filtered and written sorted; a hover is written at its window's end", () => {
  const store = createStore(initialState());
  store.set({
    doc: {
      ...store.state.doc,
      text: "a b c",
      tokens: ["a", "b", "c"],
      offsets: [
        [0, 1],
        [2, 3],
        [4, 5],
      ],
    },
  });
  const model = fakeModel({ layer: 0, head: 0, run_id: 1, hovered: null, mode: "attention" });
  const clock = fakeClock();
  const intents = createIntents({ model, store, clock, metrics: { clicked() {} } });
  intents.select([2, 0, 9, 2]);
  assert.deepEqual([...store.state.selected], [0, 2]);
  assert.deepEqual(model.calls, [["set", "selected", [0, 2]], ["save_changes"]], "token 9 is not sent: no such token");
  intents.select([1], { add: true });
  assert.deepEqual([...store.state.selected], [0, 1, 2]);
  model.calls.length = 0;
  intents.hover(1, { source: "text", x: 0, y: 0 });
  assert.equal(store.state.hover, 1);
  assert.deepEqual(model.calls, [], "not at once");
  clock.advance(50);
  assert.deepEqual(model.calls, [["set", "hovered", 1], ["save_changes"]]);
  intents.search("b");
  assert.deepEqual([...store.state.search.matches], [1]);
  intents.destroy();
  assert.equal(clock.timers, 0);
});
