import { test, before } from "node:test";
import assert from "node:assert/strict";
import { createStore } from "../store/store.js";
import { initialState } from "../store/state.js";
import { searchOf } from "../lib/search.js";
import { REGEX_MS, createSearcher, safeWithoutWorker } from "./search-worker.js";
import { fakeClock } from "../test-helpers/testing.js";

const TEXT = "We present t-SNE. " + "a".repeat(121) + "b";
const DOC = {
  text: TEXT,
  tokens: ["we", "present", "t", "-", "s", "##ne", ".", "[UNK]"],
  offsets: [[0, 2], [3, 10], [11, 12], [12, 13], [13, 14], [14, 16], [16, 17], [18, 140]],
  special: [],
  subword: () => false,
}; // prettier-ignore

/**
 * A worker that runs the query as the real one does: says it has started after `startup` ms of the fake
 * clock (a worker starting and taking the text on a loaded machine), then answers `delay` ms later, or never
 * (`delay` Infinity: a catastrophic pattern); `terminated` counts its ends.
 */
function fakeWorkers(clock, delay, startup = 0) {
  const made = [];
  const make = () => {
    let text = "";
    const worker = {
      terminated: false,
      onmessage: null,
      postMessage(m) {
        if (m.type === "text") return void (text = m.text);
        const answer = (data) => !worker.terminated && worker.onmessage({ data });
        clock.later(() => {
          answer({ id: m.id, started: true });
          if (!Number.isFinite(delay)) return;
          const spans = [];
          for (const x of text.matchAll(new RegExp(m.source, `${m.flags}g`)))
            spans.push(x.index, x.index + x[0].length);
          clock.later(() => answer({ id: m.id, spans, hits: [] }), delay);
        }, startup);
      },
      terminate() {
        worker.terminated = true;
      },
    };
    made.push(worker);
    return worker;
  };
  return { make, made };
}

let store;
before(() => {
  store = createStore(initialState());
});

test("a regular expression runs in the worker and its matches come back", () => {
  store.set({ doc: DOC, search: searchOf("", DOC) });
  const clock = fakeClock();
  const { make } = fakeWorkers(clock, 20);
  const searcher = createSearcher({ store, clock, makeWorker: make });
  store.set({ search: searchOf("/t-?sne/i", DOC) });
  assert.equal(store.state.search.pending, true);
  clock.advance(30);
  assert.deepEqual([...store.state.search.matches], [2, 3, 4, 5]);
  assert.equal(store.state.search.count, 1);
  searcher.destroy();
});

test("a catastrophic pattern is stopped after REGEX_MS and says so; the next query gets a fresh worker", () => {
  store.set({ doc: DOC, search: searchOf("", DOC) });
  const clock = fakeClock();
  const never = fakeWorkers(clock, Infinity);
  const searcher = createSearcher({ store, clock, makeWorker: never.make });
  store.set({ search: searchOf("/(a+)+$/", DOC) });
  clock.advance(REGEX_MS - 1);
  assert.equal(store.state.search.pending, true);
  clock.advance(2);
  assert.equal(store.state.search.pending, false);
  assert.match(store.state.search.error, /stopped/);
  assert.equal(never.made[0].terminated, true, "the runaway worker is ended");
  store.set({ search: searchOf("/present/", DOC) });
  assert.equal(never.made.length, 2, "a fresh worker");
  clock.advance(1); // the fresh worker starts the query: its REGEX_MS clock runs
  searcher.destroy();
  assert.equal(clock.timers, 0);
});

test("a worker slow to start is not charged for it: REGEX_MS counts from the query's start in the worker", () => {
  store.set({ doc: DOC, search: searchOf("", DOC) });
  const clock = fakeClock();
  const loaded = fakeWorkers(clock, 20, 10 * REGEX_MS);
  const searcher = createSearcher({ store, clock, makeWorker: loaded.make });
  store.set({ search: searchOf("/t-?sne/i", DOC) });
  clock.advance(10 * REGEX_MS + 10);
  assert.equal(store.state.search.pending, true, "still starting, not stopped");
  clock.advance(20);
  assert.equal(store.state.search.error, "");
  assert.deepEqual([...store.state.search.matches], [2, 3, 4, 5]);
  assert.equal(loaded.made[0].terminated, false);
  searcher.destroy();
  assert.equal(clock.timers, 0);
});

test("a newer query ends the one still running; only the newest answer lands", () => {
  store.set({ doc: DOC, search: searchOf("", DOC) });
  const clock = fakeClock();
  const slow = fakeWorkers(clock, 100);
  const searcher = createSearcher({ store, clock, makeWorker: slow.make });
  store.set({ search: searchOf("/we/i", DOC) });
  clock.advance(50);
  store.set({ search: searchOf("/present/", DOC) });
  assert.equal(slow.made[0].terminated, true);
  clock.advance(200);
  assert.deepEqual([...store.state.search.matches], [1]);
  searcher.destroy();
});

test("without a worker only patterns that cannot backtrack badly run on the page's thread", () => {
  for (const safe of ["t-?sne", "\\b(hello|world)\\b", "[a+]+", "a+b*", "(ab)+"])
    assert.ok(safeWithoutWorker(safe), safe);
  for (const bad of ["(a+)+$", "(a|aa)+", "(\\w*)*", "(a)\\1", "(?=a)a", "((ab)*c)+"])
    assert.ok(!safeWithoutWorker(bad), bad);
  store.set({ doc: DOC, search: searchOf("", DOC) });
  const clock = fakeClock();
  const searcher = createSearcher({ store, clock, makeWorker: () => { throw new Error("no workers here"); } }); // prettier-ignore
  store.set({ search: searchOf("/(a+)+$/", DOC) });
  assert.match(store.state.search.error, /refused/);
  store.set({ search: searchOf("/t-?sne/i", DOC) });
  assert.deepEqual([...store.state.search.matches], [2, 3, 4, 5]);
  searcher.destroy();
});
