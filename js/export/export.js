// Exports of what the widget shows: a PNG of the title, the grid, the map and the legend at twice the CSS
// size on an opaque background, the same as an SVG (js/export/svg.js: the map's axes, points and labels as vectors),
// and a WebM video of the map (MediaRecorder on the canvas).
// Files are handed to the browser as downloads (an <a download> click on an object URL). The exporter
// answers the store's "export" and "record" events (js/store/intents.js).

import { paintLegend } from "../views/legend.js";
import { composeSvg } from "./svg.js";
import { realClock } from "../lib/schedule.js";

/**
 * Offer `blob` as a download named `name` from inside `parent`.
 * @param {Blob} blob
 * @param {string} name
 * @param {HTMLElement} parent
 * @param {import("../lib/schedule.js").Clock} [clock]
 */
export function download(blob, name, parent, clock = realClock) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.style.display = "none";
  parent.appendChild(a);
  a.click();
  a.remove();
  clock.later(() => URL.revokeObjectURL(url), 10000);
}

export const PNG_SCALE = 2;

/**
 * The title, the grid and the scatter side by side, and the legend, at PNG_SCALE device px per CSS px
 * on the theme's opaque background. `scatter` is the map drawn afresh at that scale.
 * @param {{grid: HTMLCanvasElement, gridSize: {width: number, height: number}, scatter: HTMLCanvasElement,
 *   scatterSize: {width: number, height: number},
 *   paintLegend: (c: CanvasRenderingContext2D, x: number, y: number) => number, theme: any, title: string}} parts
 */
export function composePng({ grid, gridSize, scatter, scatterSize, paintLegend, theme, title }) {
  const s = PNG_SCALE;
  const pad = 10;
  const head = 26;
  const legendH = 22;
  const width = gridSize.width + scatterSize.width + 3 * pad;
  const height = head + Math.max(gridSize.height, scatterSize.height) + legendH + pad;
  const out = document.createElement("canvas");
  out.width = Math.round(width * s);
  out.height = Math.round(height * s);
  const c = /** @type {CanvasRenderingContext2D} */ (out.getContext("2d"));
  c.setTransform(s, 0, 0, s, 0, 0);
  c.fillStyle = theme.bg;
  c.fillRect(0, 0, width, height);
  c.fillStyle = theme.fg;
  c.font = `600 13px ${theme.font}`;
  c.textBaseline = "middle";
  c.fillText(title, pad, head / 2 + 2);
  if (grid.width && grid.height) {
    c.imageSmoothingEnabled = false;
    c.drawImage(grid, pad, head, gridSize.width, gridSize.height);
  }
  c.imageSmoothingEnabled = true;
  if (scatter.width && scatter.height)
    c.drawImage(scatter, gridSize.width + 2 * pad, head, scatterSize.width, scatterSize.height);
  paintLegend(c, gridSize.width + 2 * pad, head + Math.max(gridSize.height, scatterSize.height) + 4);
  return out;
}

/**
 * Record `canvas` as a WebM video until `stop()` is called; `onDone(blob)` gets the video.
 * @param {HTMLCanvasElement} canvas
 * @param {(blob: Blob) => void} onDone
 * @param {(message: string) => void} onError
 */
export function recordCanvas(canvas, onDone, onError) {
  if (typeof MediaRecorder === "undefined" || !canvas.captureStream) {
    onError("video export needs MediaRecorder and canvas.captureStream, which this browser lacks");
    return null;
  }
  const type = ["video/webm;codecs=vp9", "video/webm;codecs=vp8", "video/webm"].find((t) =>
    MediaRecorder.isTypeSupported(t),
  );
  if (!type) {
    onError("this browser cannot record WebM video");
    return null;
  }
  const stream = canvas.captureStream(30);
  const recorder = new MediaRecorder(stream, { mimeType: type });
  /** @type {Blob[]} */
  const chunks = [];
  recorder.ondataavailable = (event) => event.data.size && chunks.push(event.data);
  recorder.onstop = () => {
    stream.getTracks().forEach((track) => track.stop());
    onDone(new Blob(chunks, { type: "video/webm" }));
  };
  recorder.start(250);
  return { stop: () => recorder.state !== "inactive" && recorder.stop() };
}

/**
 * Encode `canvas` as a PNG and download it; `onError` gets a message when the browser cannot.
 * @param {HTMLCanvasElement} canvas
 * @param {string} name
 * @param {HTMLElement} parent
 * @param {(message: string) => void} onError
 */
export function downloadCanvas(canvas, name, parent, onError) {
  canvas.toBlob((blob) => {
    if (!blob) onError("PNG export failed: the browser could not encode the image");
    else download(blob, name, parent);
  }, "image/png");
}

/**
 * @typedef {import("../store/state.js").State} State
 * @typedef {{canvas: HTMLCanvasElement, render: (scale: number) => HTMLCanvasElement,
 *   size: {width: number, height: number}, snapshot: () => any}} ScatterView
 */

/**
 * The widget's exports: a PNG or SVG on the store's "export" event, a WebM video started or stopped
 * and saved on "record" (the state's `recording`).
 * @param {{dom: {root: HTMLElement, subtitle: HTMLElement, scatterCaption: HTMLElement},
 *   store: import("../store/store.js").Store<State>, clock: import("../lib/schedule.js").Clock,
 *   recorder: import("../model/recorder.js").FrameRecorder}} ctx
 * @param {{grid: {canvas: HTMLCanvasElement}, scatter: ScatterView}} views
 */
export function createExporter({ dom, store, clock, recorder }, { grid, scatter }) {
  const { root } = dom;
  /** @type {{stop: () => void} | null} */
  let video = null;
  const onError = (/** @type {string} */ message) => store.emit("error", message);
  const theme = () => /** @type {import("../lib/theme.js").Theme} */ (store.state.theme);
  const shown = () => recorder.frames[recorder.shown];
  const title = () => {
    const f = shown();
    const parts = [dom.subtitle.textContent, dom.scatterCaption.textContent, f ? `iteration ${f.iteration}` : ""];
    return [...parts, f && f.kl != null ? `KL ${f.kl.toFixed(3)}` : ""].filter(Boolean).join(" · ");
  };
  const name = (/** @type {string} */ ext) => {
    const f = shown();
    return `headsne-layer${store.state.layer}-head${store.state.head}-iter${f ? f.iteration : 0}.${ext}`;
  };

  function png() {
    const gridRect = grid.canvas.getBoundingClientRect();
    const legend = store.state.colours ? store.state.colours.legend : null;
    const out = composePng({
      grid: grid.canvas,
      gridSize: { width: gridRect.width, height: gridRect.height },
      scatter: scatter.render(PNG_SCALE),
      scatterSize: scatter.size,
      paintLegend: (c, x, y) => paintLegend(c, legend, { x, y }, theme()),
      theme: theme(),
      title: title(),
    });
    downloadCanvas(out, name("png"), root, onError);
  }

  function svg() {
    const gridRect = grid.canvas.getBoundingClientRect();
    const hasGrid = grid.canvas.width > 0 && gridRect.width > 0;
    const measure = /** @type {CanvasRenderingContext2D} */ (document.createElement("canvas").getContext("2d"));
    measure.font = `11px ${theme().font}`;
    const text = composeSvg({
      snap: scatter.snapshot(),
      theme: theme(),
      title: title(),
      legend: store.state.colours ? store.state.colours.legend : null,
      grid: hasGrid
        ? { href: grid.canvas.toDataURL("image/png"), width: gridRect.width, height: gridRect.height }
        : null,
      measure: (t) => measure.measureText(t).width,
    });
    download(new Blob([text], { type: "image/svg+xml" }), name("svg"), root, clock);
  }

  function toggleVideo() {
    if (video) {
      video.stop();
      video = null;
    } else {
      const file = name("webm");
      video = recordCanvas(scatter.canvas, (blob) => download(blob, file, root, clock), onError);
    }
    store.set({ recording: video != null });
  }

  const stops = [
    store.on("export", (/** @type {"png" | "svg"} */ kind) => (kind === "svg" ? svg() : png())),
    store.on("record", toggleVideo),
  ];
  return {
    destroy() {
      if (video) video.stop();
      for (const stop of stops) stop();
    },
  };
}
