// The run row: play/pause/restart/stop, the iteration counter, KL and its sparkline, the timeline of
// recorded frames and replay; the playback speed in the inspector's settings tab; and in the map's title bar the
// help, reset zoom and the exports. Buttons call the intents; the row follows the state (run state, speed, replaying,
// recording); the readout is written by the run panel (js/views/controls/run-panel.js) at its own pace.

import { button, disposer, el } from "../../lib/dom.js";
import { canReplay } from "../../store/replay.js";
import { changed } from "../../store/store.js";
import { createRunPanel } from "./run-panel.js";

/** @type {[number, string][]} */
const SPEEDS = [
  [25, "25 it/s"],
  [50, "50 it/s"],
  [100, "100 it/s"],
  [250, "250 it/s"],
  [500, "500 it/s"],
  [1000, "1000 it/s"],
  [0, "max"],
];

/**
 * @typedef {import("../../store/state.js").State} State
 */

/** The run row's elements. */
function buildRow() {
  const e = {
    play: el("button", { dataset: { testid: "headsne-play" }, className: "hs-primary", title: "pause / resume" }),
    restart: el("button", { text: "↻", title: "restart the run", "aria-label": "restart" }),
    stop: el("button", { text: "■", title: "stop the run", "aria-label": "stop" }),
    counter: el("b", { dataset: { testid: "headsne-iteration" }, text: "0" }),
    total: el("span"),
    kl: el("span", { className: "hs-kl", title: "KL(P ‖ Q) of the shown frame" }),
    spark: el("canvas", { className: "hs-spark", title: "KL divergence over the run" }),
    timeline: el("input", {
      type: "range",
      min: "0",
      max: "0",
      step: "1",
      value: "0",
      className: "hs-timeline",
      dataset: { testid: "headsne-timeline" },
      title: "recorded frames of this run",
      "aria-label": "timeline",
    }),
    // the label stays (no width change): a running replay shows as pressed
    replay: button(
      "⟲ replay",
      "headsne-replay",
      "replay the recorded frames of this run from the first, one per display frame, in the browser only " +
        "(nothing is recomputed); click again or drag the timeline to stop; ● rec during a replay records a " +
        "smooth video",
      { className: "hs-replay", disabled: true, "aria-pressed": "false" },
    ),
    speed: el("select", { title: "playback speed (iterations per second)", "aria-label": "speed" }),
    exportPng: button("PNG", "headsne-export-png", "save the title, the grid, the map and the legends as a PNG (2x)"),
    exportSvg: button(
      "SVG",
      "headsne-export-svg",
      "save the title, the grid, the map with its axes and the legends as an SVG",
    ),
    record: button("● rec", "headsne-record", "record the map as a WebM video; click again to stop and save"),
    reset: el("button", { text: "⤢", title: "reset zoom (or double-click the map)", "aria-label": "reset zoom" }),
    help: el("span", {
      className: "hs-help",
      text: "?",
      title:
        "the map: scroll to zoom · drag to pan · shift + drag to lasso · double-click to reset the zoom · click a " +
        "point: the inspector shows its partners and what wrote it; click a partner: why the head attends\n" +
        "a word across many texts: HeadSNE.contexts(word, texts) maps its occurrences",
    }),
  };
  const row = [
    el("span", { className: "hs-group" }, [e.play, e.restart, e.stop]),
    el("span", { className: "hs-counter" }, ["iter ", e.counter, e.total]),
    el("span", { className: "hs-group" }, [e.kl, e.spark]),
    e.timeline,
    e.replay,
  ];
  const playback = [el("span", { className: "hs-param-head", text: "playback" }), el("label", {}, ["speed", e.speed])];
  return { e, row, playback, bar: [e.help, e.reset, e.exportPng, e.exportSvg, e.record] };
}

/**
 * The speed options: the usual ones, and the trait's value when it is none of them.
 * @param {number} value
 */
export function speedOptions(value) {
  if (SPEEDS.some(([v]) => v === value)) return SPEEDS;
  const options = [...SPEEDS, /** @type {[number, string]} */ ([value, `${value} it/s`])];
  return options.sort((a, b) => (a[0] || Infinity) - (b[0] || Infinity));
}

/**
 * @param {{dom: {runRow: HTMLElement, exportBar: HTMLElement, playbackRow: HTMLElement, status: HTMLElement,
 *   hint: HTMLElement}, store: import("../../store/store.js").Store<State>, intents: import("../../store/intents.js").Intents,
 *   clock: import("../../lib/schedule.js").Clock, recorder: import("../../model/recorder.js").FrameRecorder}} ctx
 */
export function createControls({ dom, store, intents, clock, recorder }) {
  const { e, row, playback, bar } = buildRow();
  dom.runRow.append(...row);
  dom.playbackRow.append(...playback);
  dom.exportBar.append(...bar);
  const scope = disposer();
  scope.listen(e.play, "click", () => intents.togglePlay());
  scope.listen(e.restart, "click", () => intents.run("restart"));
  scope.listen(e.stop, "click", () => intents.run("stop"));
  scope.listen(e.replay, "click", () => intents.toggleReplay());
  scope.listen(e.timeline, "input", () => {
    const i = Number(e.timeline.value);
    intents.scrub(i >= Number(e.timeline.max) ? null : i);
  });
  scope.listen(e.speed, "change", () => intents.write({ speed: Number(e.speed.value) }));
  scope.listen(e.exportPng, "click", () => intents.exportImage("png"));
  scope.listen(e.exportSvg, "click", () => intents.exportImage("svg"));
  scope.listen(e.record, "click", () => intents.toggleRecording());
  scope.listen(e.reset, "click", () => intents.resetView());

  /** Timeline over `count` recorded frames with `index` shown. @param {number} count @param {number} index */
  function setTimeline(count, index) {
    const max = String(Math.max(0, count - 1));
    const value = String(Math.max(0, index));
    if (e.timeline.max !== max) e.timeline.max = max;
    if (e.timeline.value !== value) e.timeline.value = value;
    // aria-disabled, not disabled: a disabled element drops the keyboard focus, and the keys a user was
    // pressing on the timeline (arrows, a, b) went to JupyterLab, moving or inserting cells, whenever a new run
    // started; with one frame the range (max 0) cannot move anyway
    const inert = String(count < 2);
    if (e.timeline.getAttribute("aria-disabled") !== inert) e.timeline.setAttribute("aria-disabled", inert);
    // a running replay stays stoppable
    const off = !canReplay(count) && e.replay.getAttribute("aria-pressed") !== "true";
    if (e.replay.disabled !== off) e.replay.disabled = off;
  }

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    const is = (/** @type {keyof State} */ key) => changed(s, prev, key);
    if (is("state") || is("n_iter")) {
      const state = s.state;
      e.play.textContent = state === "running" ? "❚❚" : "▶";
      e.play.setAttribute("aria-label", state === "running" ? "pause" : state === "paused" ? "resume" : "play");
      e.stop.disabled = !(state === "running" || state === "paused") || Boolean(s.offline);
      // a saved page has no kernel to run t-SNE: its recorded frames still replay
      e.play.disabled = e.restart.disabled = Boolean(s.offline) || state === "loading";
      e.total.textContent = ` / ${s.n_iter}`;
    }
    if (is("speed")) {
      const value = Number(s.speed ?? 250);
      e.speed.replaceChildren(
        ...speedOptions(value).map(([v, label]) => el("option", { value: String(v), text: label })),
      );
      e.speed.value = String(value);
    }
    if (is("replaying")) {
      // the replay button pressed while a replay runs
      e.replay.setAttribute("aria-pressed", String(s.replaying));
      if (s.replaying) e.replay.disabled = false;
    }
  }
  scope.add(store.watch(["state", "n_iter", "speed", "replaying"], update));
  scope.add(
    store.subscribe(["recording"], (s) => {
      e.record.textContent = s.recording ? "■ stop" : "● rec";
      e.record.setAttribute("aria-pressed", String(s.recording));
    }),
  );
  const panel = createRunPanel({
    store,
    clock,
    recorder,
    status: dom.status,
    hint: dom.hint,
    readout: { counter: e.counter, kl: e.kl, spark: e.spark, setTimeline },
  });
  scope.add(() => panel.destroy());
  return { destroy: () => scope.dispose() };
}
