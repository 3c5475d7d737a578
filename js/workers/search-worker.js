// The searcher: runs a user's /regular expression/ over the text in a Web Worker, off the page's thread,
// and stops it after REGEX_MS. JavaScript's regular expressions backtrack: /(a+)+$/ on a 121-character
// word did not return in 60 s, and a page running it on its own thread would have frozen with it. A
// worker that is late is terminated (a fresh one takes the next query) and the search says why. Where a
// page may not start workers (a strict content security policy), only patterns without nested or
// repeated quantified groups and without back-references run, on the page's thread. The REGEX_MS clock
// starts when the worker says it has begun the query, not when the page asks: starting a worker and
// handing it a long text can take seconds on a loaded machine, and that is not the pattern's fault.

import { found, spanless } from "../lib/search.js";

export const REGEX_MS = 500;

/**
 * The worker's code, run as its own script (no imports, no closures): keeps the text, answers a query
 * with the [start, end) spans of its matches (flat) and the spanless tokens it matches.
 */
function workerMain() {
  /** @type {string} */
  let text = "";
  /** @type {[number, string][]} */
  let spanless = [];
  self.onmessage = (/** @type {MessageEvent} */ event) => {
    const m = event.data;
    if (m.type === "text") {
      text = m.text;
      spanless = m.spanless;
      return;
    }
    self.postMessage({ id: m.id, started: true });
    try {
      const all = new RegExp(m.source, `${m.flags}g`);
      const one = new RegExp(m.source, m.flags);
      const spans = [];
      for (const match of text.matchAll(all)) {
        if (match[0].length) spans.push(/** @type {number} */ (match.index), match.index + match[0].length);
      }
      const hits = spanless.filter(([, tok]) => one.test(tok)).map(([i]) => i);
      self.postMessage({ id: m.id, spans, hits });
    } catch (err) {
      self.postMessage({ id: m.id, error: String(/** @type {Error} */ (err).message) });
    }
  };
}

/** A Web Worker running `workerMain` (throws where the page may not start one). */
export function startWorker() {
  const source = `(${workerMain.toString()})()`;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  try {
    return new Worker(url);
  } finally {
    URL.revokeObjectURL(url);
  }
}

/**
 * Whether `source` can be run on the page's thread without a worker: no back-reference, no lookaround,
 * and no quantified group that holds a quantifier or an alternation (the shapes that backtrack
 * exponentially).
 * @param {string} source
 */
export function safeWithoutWorker(source) {
  if (/\\[1-9]|\\k<|\(\?<?[=!]/.test(source)) return false;
  const stack = [false]; // per open group: does it hold a quantifier or an alternation
  for (let i = 0; i < source.length; i++) {
    const ch = source[i];
    if (ch === "\\") i++;
    else if (ch === "[") while (i < source.length && source[i] !== "]") i += source[i] === "\\" ? 2 : 1;
    else if (ch === "(") stack.push(false);
    else if (ch === "|" || "*+?{".includes(ch)) stack[stack.length - 1] = true;
    else if (ch === ")") {
      const inner = stack.pop();
      if (inner && /^[*+?{]/.test(source.slice(i + 1))) return false;
      if (inner) stack[stack.length - 1] = true;
    }
  }
  return true;
}

/**
 * Run the pending regular-expression searches of the state (js/lib/search.js `searchOf` leaves them
 * `pending`): the newest only, in a worker, stopped after REGEX_MS.
 * @param {{store: import("../store/store.js").Store<import("../store/state.js").State>, clock: import("../lib/schedule.js").Clock,
 *   makeWorker?: () => Worker}} parts `makeWorker`: the tests' fake worker
 */
export function createSearcher({ store, clock, makeWorker = startWorker }) {
  /** @type {Worker | null} */
  let worker = null;
  let textSent = /** @type {import("../store/state.js").Doc | null} */ (null);
  let nextId = 1;
  /** @type {{id: number, search: import("../store/state.js").Search, doc: import("../store/state.js").Doc, timer: any} | null} */
  let running = null;

  const finish = (/** @type {Partial<import("../store/state.js").Search>} */ result) => {
    if (!running) return;
    const { search, timer } = running;
    if (timer !== null) clock.cancel(timer);
    running = null;
    if (store.state.search === search) store.set({ search: { ...search, ...result, pending: false } });
  };
  function overrun() {
    stopWorker();
    finish({ error: `the pattern ran over ${REGEX_MS / 1000} s and was stopped: make it simpler` });
  }
  function stopWorker() {
    if (worker) worker.terminate();
    worker = null;
    textSent = null;
  }

  /** @param {import("../store/state.js").Search} search @param {import("../store/state.js").Doc} doc */
  function run(search, doc) {
    const match = /^\/(.+)\/([a-z]*)$/s.exec(search.query.trim());
    if (!match) return;
    const [source, flags] = [match[1], match[2].replace(/[gy]/g, "")];
    if (running) stopWorker(); // a query still running may never end: its worker goes
    running = null;
    try {
      if (!worker) worker = makeWorker();
    } catch {
      runHere(search, doc, source, flags);
      return;
    }
    const id = nextId++;
    running = { id, search, doc, timer: null };
    worker.onmessage = (/** @type {MessageEvent} */ event) => {
      const answer = event.data;
      if (!running || answer.id !== running.id) return;
      if (answer.started) running.timer = clock.later(overrun, REGEX_MS);
      else if (answer.error) finish({ error: answer.error });
      else finish(found(search.query, running.doc, answer.spans, answer.hits));
    };
    worker.onerror = () => {
      // the worker could not start after all (a policy refusing it shows only here): the page's thread
      stopWorker();
      running = null;
      runHere(search, doc, source, flags);
    };
    if (textSent !== doc) worker.postMessage({ type: "text", text: doc.text, spanless: spanless(doc) });
    textSent = doc;
    worker.postMessage({ type: "query", id, source, flags });
  }

  /** No worker here: a pattern that cannot backtrack badly runs on the page's thread, others are refused. */
  function runHere(
    /** @type {any} */ search,
    /** @type {import("../store/state.js").Doc} */ doc,
    /** @type {string} */ source,
    /** @type {string} */ flags,
  ) {
    if (!safeWithoutWorker(source)) {
      store.set({
        search: {
          ...search,
          pending: false,
          error: "this page cannot run a worker: nested repeats and back-references are refused",
        },
      });
      return;
    }
    const spans = [];
    for (const m of doc.text.matchAll(new RegExp(source, `${flags}g`))) {
      if (m[0].length) spans.push(/** @type {number} */ (m.index), m.index + m[0].length);
    }
    const one = new RegExp(source, flags);
    const hits = spanless(doc)
      .filter(([, tok]) => one.test(tok))
      .map(([i]) => i);
    store.set({ search: found(search.query, doc, spans, hits) });
  }

  const stop = store.subscribe(["search", "doc"], (s) => {
    if (s.search.pending && (!running || running.search !== s.search)) run(s.search, s.doc);
  });
  return {
    destroy() {
      stop();
      if (running && running.timer !== null) clock.cancel(running.timer);
      running = null;
      stopWorker();
    },
  };
}
