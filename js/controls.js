// Run controls (play/pause/restart/stop, iteration, KL sparkline, timeline, replay, speed, export) and the
// parameter inputs. Every input writes its trait with model.set + save_changes and follows the trait when
// Python changes it; invalid entries are marked and not sent.

import { button, el } from "./dom.js";
import { T, changes, control, write as writeTraits } from "./model.js";
import { setText } from "./schedule.js";
import { canReplay } from "./replay.js";

const int = (min) => (s) => {
  const v = Number(s);
  if (!Number.isInteger(v) || v < min) throw new Error(`must be an integer >= ${min}`);
  return v;
};
const positive = (s) => {
  const v = Number(s);
  if (!Number.isFinite(v) || v <= 0) throw new Error("must be a positive number");
  return v;
};
const learningRate = (s) => {
  const t = String(s).trim().toLowerCase();
  return t === "" || t === "auto" ? null : positive(t);
};

/** The parameter inputs: trait, label, parser (text -> value, throws with the reason) and formatter. */
const PARAMS = [
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

const SPARK_W = 110;
const SPARK_H = 24; // CSS px of the KL sparkline

/**
 * The KL sparkline of `frames` in a `w` x `h` box: vertices (x, y interleaved) and the marker at frame
 * `shown`, or null with fewer than two finite KLs. A long run is thinned to the first, lowest, highest
 * and last point of each pixel column (what the line looks like at that width), so drawing it costs the
 * same at 100 frames and at 30000.
 * @param {{iteration: number, kl: number | null}[]} frames
 * @param {number} shown
 * @param {number} w
 * @param {number} h
 * @returns {{xy: number[], marker: [number, number] | null} | null}
 */
export function sparkLine(frames, shown, w, h) {
  let i0 = Infinity,
    i1 = -Infinity,
    k0 = Infinity,
    k1 = -Infinity,
    n = 0;
  for (const f of frames) {
    if (f.kl == null || !Number.isFinite(f.kl)) continue;
    n++;
    if (f.iteration < i0) i0 = f.iteration;
    if (f.iteration > i1) i1 = f.iteration;
    if (f.kl < k0) k0 = f.kl;
    if (f.kl > k1) k1 = f.kl;
  }
  if (n < 2) return null;
  // the scales of d3's scaleLinear(extent, range): a flat extent maps to the range's middle
  const lin = (a, b, r0, r1) => (v) => (b > a ? r0 + ((v - a) / (b - a)) * (r1 - r0) : (r0 + r1) / 2);
  const x = lin(i0, i1, 2, w - 2);
  const y = lin(k0, k1, h - 3, 3);
  /** @type {number[]} */
  const xy = [];
  let col = NaN,
    px = 0,
    first = 0,
    top = 0,
    bottom = 0,
    last = 0;
  const close = () => {
    for (const v of [first, top, bottom, last]) if (xy[xy.length - 1] !== v || xy[xy.length - 2] !== px) xy.push(px, v);
  };
  for (const f of frames) {
    if (f.kl == null || !Number.isFinite(f.kl)) continue;
    const fx = x(f.iteration);
    const fy = y(f.kl);
    if (Math.floor(fx) !== col) {
      if (!Number.isNaN(col)) close();
      col = Math.floor(fx);
      px = fx;
      first = top = bottom = last = fy;
    } else {
      top = Math.min(top, fy);
      bottom = Math.max(bottom, fy);
      last = fy;
    }
  }
  close();
  const f = frames[shown];
  const marker =
    f && f.kl != null && Number.isFinite(f.kl) ? /** @type {[number, number]} */ ([x(f.iteration), y(f.kl)]) : null;
  return { xy, marker };
}

export function createControls({ model, runRow, paramRow, onScrub, onReplay, onExport, onRecord, onResetView }) {
  const listeners = [];
  const on = (name, fn) => {
    model.on(name, fn);
    listeners.push([name, fn]);
  };
  const write = (values) => writeTraits(model, values);
  const send = (action) => control(model, action);

  // ---- run row
  const play = el("button", { dataset: { testid: "headsne-play" }, className: "hs-primary", title: "pause / resume" });
  const restart = el("button", { text: "↻", title: "restart the run", "aria-label": "restart" });
  const stop = el("button", { text: "■", title: "stop the run", "aria-label": "stop" });
  const counter = el("b", { dataset: { testid: "headsne-iteration" }, text: "0" });
  const total = el("span");
  const kl = el("span", { className: "hs-kl", title: "KL(P ‖ Q) of the shown frame" });
  const spark = el("canvas", { className: "hs-spark", title: "KL divergence over the run" });
  const timeline = el("input", {
    type: "range",
    min: "0",
    max: "0",
    step: "1",
    value: "0",
    className: "hs-timeline",
    dataset: { testid: "headsne-timeline" },
    title: "recorded frames of this run",
    "aria-label": "timeline",
  });
  // the label stays (no width change): a running replay shows as pressed
  const replay = button(
    "⟲ replay",
    "headsne-replay",
    "replay the recorded frames of this run from the first, one per display frame, in the browser only " +
      "(nothing is recomputed); click again or drag the timeline to stop; ● rec during a replay records a " +
      "smooth video",
    { className: "hs-replay", disabled: true, "aria-pressed": "false" },
  );
  const speed = el("select", { title: "playback speed (iterations per second)", "aria-label": "speed" });
  const exportPng = button("PNG", "headsne-export-png", "save the grid, the map and the legend as a PNG (2x)");
  const exportSvg = button("SVG", "headsne-export-svg", "save the map as an SVG");
  const record = button("● rec", "headsne-record", "record the map as a WebM video; click again to stop and save");
  const reset = el("button", { text: "⤢", title: "reset zoom (or double-click the map)", "aria-label": "reset zoom" });
  runRow.append(
    el("span", { className: "hs-group" }, [play, restart, stop]),
    el("span", { className: "hs-counter" }, ["iter ", counter, total]),
    el("span", { className: "hs-group" }, [kl, spark]),
    timeline,
    replay,
    el("label", {}, ["speed", speed]),
    el("span", { className: "hs-group" }, [reset, exportPng, exportSvg, record]),
  );

  play.addEventListener("click", () => {
    const state = model.get(T.state);
    send(state === "running" ? "pause" : state === "paused" ? "resume" : "restart");
  });
  restart.addEventListener("click", () => send("restart"));
  stop.addEventListener("click", () => send("stop"));
  replay.addEventListener("click", () => onReplay());
  timeline.addEventListener("input", () => {
    const last = Number(timeline.max);
    const i = Number(timeline.value);
    onScrub(i >= last ? null : i);
  });
  speed.addEventListener("change", () => write({ [T.speed]: Number(speed.value) }));
  exportPng.addEventListener("click", () => onExport("png"));
  exportSvg.addEventListener("click", () => onExport("svg"));
  record.addEventListener("click", () => {
    const recording = onRecord();
    record.textContent = recording ? "■ stop" : "● rec";
    record.setAttribute("aria-pressed", String(recording));
  });
  reset.addEventListener("click", () => onResetView());

  function syncSpeed() {
    const value = Number(model.get(T.speed) ?? 250);
    const options = SPEEDS.some(([v]) => v === value)
      ? SPEEDS
      : [...SPEEDS, /** @type {[number, string]} */ ([value, `${value} it/s`])].sort(
          (a, b) => (a[0] || Infinity) - (b[0] || Infinity),
        );
    speed.replaceChildren(...options.map(([v, label]) => el("option", { value: String(v), text: label })));
    speed.value = String(value);
  }

  function syncRun() {
    const state = model.get(T.state);
    play.textContent = state === "running" ? "❚❚" : "▶";
    play.setAttribute("aria-label", state === "running" ? "pause" : state === "paused" ? "resume" : "play");
    stop.disabled = !(state === "running" || state === "paused");
    total.textContent = ` / ${model.get(T.n_iter)}`;
  }

  // ---- parameter row
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
  mode.addEventListener("change", () => write({ [T.mode]: mode.value }));
  paramRow.append(el("label", {}, ["affinities", mode]));

  const inputs = {};
  for (const spec of PARAMS) {
    const input = el("input", {
      className: "hs-num",
      type: "text",
      inputMode: "decimal",
      title: spec.title || spec.label,
      "aria-label": spec.label,
    });
    // Enter applies the field at once (the change event alone waits for the focus to leave)
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        input.dispatchEvent(new Event("change"));
      }
    });
    input.addEventListener("change", () => {
      try {
        const value = spec.parse(input.value);
        input.removeAttribute("aria-invalid");
        input.title = spec.title || spec.label;
        write({ [spec.trait]: value });
      } catch (err) {
        input.setAttribute("aria-invalid", "true");
        input.title = `${spec.label} ${err.message}`;
      }
    });
    inputs[spec.trait] = { input, spec };
    paramRow.append(el("label", {}, [spec.label, input]));
  }
  const checks = {};
  for (const [trait, label, title] of [
    [T.exclude_special, "exclude special tokens", "leave [CLS], [SEP], ... out of the map"],
    [T.quantile, "quantile axes", "quantile-equidistant rescaling of both axes (thesis, appendix A.3)"],
  ]) {
    const box = el("input", { type: "checkbox", title });
    box.addEventListener("change", () => write({ [trait]: box.checked }));
    checks[trait] = box;
    paramRow.append(el("label", { title }, [box, label]));
  }

  function syncParams() {
    mode.value = model.get(T.mode);
    for (const { input, spec } of Object.values(inputs)) {
      const value = model.get(spec.trait);
      input.value = spec.show ? spec.show(value) : String(value);
      input.removeAttribute("aria-invalid");
    }
    for (const [trait, box] of Object.entries(checks)) box.checked = Boolean(model.get(trait));
    inputs.perplexity.input.disabled = model.get(T.mode) !== "hidden";
  }

  on(changes(T.mode, T.exclude_special, T.quantile, ...PARAMS.map((p) => p.trait)), syncParams);
  on(changes(T.state, T.n_iter), syncRun);
  on(changes(T.speed), syncSpeed);
  syncParams();
  syncRun();
  syncSpeed();

  return {
    /** Iteration and KL of the shown frame (the DOM is only touched where the text changes). */
    showFrame(iteration, klValue) {
      setText(counter, String(iteration ?? 0));
      setText(kl, klValue == null || !Number.isFinite(klValue) ? "KL –" : `KL ${klValue.toFixed(3)}`);
    },
    /** Timeline over `count` recorded frames with `index` shown. */
    setTimeline(count, index) {
      const max = String(Math.max(0, count - 1));
      const value = String(Math.max(0, index));
      if (timeline.max !== max) timeline.max = max;
      if (timeline.value !== value) timeline.value = value;
      if (timeline.disabled !== count < 2) timeline.disabled = count < 2;
      // a running replay stays stoppable
      const off = !canReplay(count) && replay.getAttribute("aria-pressed") !== "true";
      if (replay.disabled !== off) replay.disabled = off;
    },
    /** The replay button pressed while a replay runs. */
    setReplaying(on) {
      replay.setAttribute("aria-pressed", String(on));
      if (on) replay.disabled = false;
    },
    /** KL sparkline of the recorded frames with a marker at the shown one. */
    drawSpark(frames, shown, theme) {
      const dpr = window.devicePixelRatio || 1;
      if (spark.width !== SPARK_W * dpr) {
        spark.width = SPARK_W * dpr;
        spark.height = SPARK_H * dpr;
      }
      const c = spark.getContext("2d");
      c.setTransform(dpr, 0, 0, dpr, 0, 0);
      c.clearRect(0, 0, SPARK_W, SPARK_H);
      const line = sparkLine(frames, shown, SPARK_W, SPARK_H);
      if (!line || !theme) return;
      c.strokeStyle = theme.accent;
      c.lineWidth = 1.25;
      c.beginPath();
      for (let i = 0; i < line.xy.length; i += 2) {
        if (i) c.lineTo(line.xy[i], line.xy[i + 1]);
        else c.moveTo(line.xy[i], line.xy[i + 1]);
      }
      c.stroke();
      if (line.marker) {
        c.fillStyle = theme.highlight;
        c.beginPath();
        c.arc(line.marker[0], line.marker[1], 2.5, 0, 2 * Math.PI);
        c.fill();
      }
    },
    destroy() {
      for (const [name, fn] of listeners) model.off(name, fn);
    },
  };
}
