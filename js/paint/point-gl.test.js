import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../test-helpers/fake-dom.js";
import { WEBGL_MIN_POINTS, chooseBackend, markedRows, pointStyles } from "./point-gl.js";
import { packColours } from "./point-raster.js";

before(() => installDom());

test("the backend: WebGL from WEBGL_MIN_POINTS on where it runs on the GPU; forced either way, never without it", () => {
  const asked = [];
  const kind = (k) => () => (asked.push(k), k);
  assert.equal(chooseBackend(WEBGL_MIN_POINTS - 1, undefined, kind("hardware")), "canvas");
  assert.deepEqual(asked, [], "few points: WebGL is not even asked for");
  assert.equal(chooseBackend(WEBGL_MIN_POINTS, undefined, kind("hardware")), "webgl");
  assert.equal(chooseBackend(65536, undefined, kind("software")), "canvas");
  assert.equal(chooseBackend(65536, undefined, kind("none")), "canvas");
  assert.equal(chooseBackend(10, "webgl", kind("software")), "webgl");
  assert.equal(chooseBackend(10, "webgl", kind("none")), "canvas");
  assert.equal(chooseBackend(65536, "canvas", kind("hardware")), "canvas");
});

test("point styles: each row its token's colour, dimmed outside the selection, special tokens as rings", () => {
  const colours = ["#ff0000", "", "rgb(0, 0, 255)", "#00ff00"];
  const rgb = packColours(colours, "#808080");
  const points = { m: 3, kept: [2, 0, 1], special: [false, true, false, false] };
  const plain = pointStyles(points, rgb, { dim: false, selected: new Set() });
  assert.deepEqual([...plain.colour], [0, 0, 255, 255, 255, 0, 0, 255, 128, 128, 128, 255]);
  assert.deepEqual([...plain.kind], [0, 0, 1]);
  const dimmed = pointStyles(points, rgb, { dim: true, selected: new Set([0]) });
  assert.deepEqual(
    [3, 7, 11].map((i) => dimmed.colour[i]),
    [77, 255, 77],
  );
});

test("marked rows: the matches' first, then the selection's (drawn on top); tokens without a point left out", () => {
  const tokenRow = Int32Array.from([2, -1, 0, 1, 3]);
  const { rows, split } = markedRows(tokenRow, 3, new Set([3, 1]), new Set([0, 4, 9, 2]));
  assert.deepEqual([...rows], [1, 2, 0]);
  assert.equal(split, 1);
});

/** The 2D backend with a stand-in for the WebGL layer. */
async function backendWith(gl) {
  const { createCanvasBackend } = await import("./scatter-canvas.js");
  const backend = createCanvasBackend({ gl });
  backend.resize(400, 300);
  return backend;
}

/** A scene of m points, nothing marked. */
function scene(m) {
  const kept = Array.from({ length: m }, (_, i) => i);
  const theme = {
    panel: "#fff",
    fg: "#000",
    muted: "#888",
    border: "#ccc",
    accent: "#00f",
    highlight: "#f80",
    font: "x",
  };
  const identity = Object.assign((v) => v, { ticks: () => [], tickFormat: () => String, domain: () => [0, 1] });
  return {
    theme,
    width: 400,
    height: 300,
    plot: { x0: 40, y0: 10, x1: 390, y1: 280 },
    x: identity,
    y: identity,
    knots: null,
    points: {
      sx: new Float32Array(m).fill(100),
      sy: new Float32Array(m).fill(100),
      m,
      kept,
      tokenRow: Int32Array.from(kept),
      colours: kept.map(() => "#123456"),
      special: kept.map(() => false),
    },
    message: "",
    hover: -1,
    hoverRow: -1,
    shown: { to: [], from: [], near: [] },
    partners: [],
    selected: new Set(),
    matches: new Set(),
    density: 0,
    subword: () => false,
    tokens: kept.map(String),
    lasso: null,
  };
}

test("the screen canvas says which backend drew; a lost WebGL context falls back to the canvas", async () => {
  let lost = false;
  const draws = [];
  const gl = { kind: () => "hardware", draw: (_c, s) => (draws.push(s.points.m), !lost) };
  const backend = await backendWith(gl);
  backend.draw(/** @type {any} */ (scene(100)));
  assert.equal(backend.canvas.dataset.backend, "canvas");
  assert.deepEqual(draws, []);
  backend.draw(/** @type {any} */ (scene(5000)));
  assert.deepEqual([backend.canvas.dataset.backend, backend.canvas.dataset.webgl], ["webgl", "hardware"]);
  backend.canvas.dataset.backendForce = "canvas";
  backend.draw(/** @type {any} */ (scene(5000)));
  assert.equal(backend.canvas.dataset.backend, "canvas");
  delete backend.canvas.dataset.backendForce;
  lost = true;
  backend.draw(/** @type {any} */ (scene(5000)));
  assert.equal(backend.canvas.dataset.backend, "canvas", "the context was lost");
  assert.deepEqual(draws, [5000, 5000]);
  const exported = backend.render(/** @type {any} */ (scene(5000)), 2); // an export draws arcs, never WebGL
  assert.equal(exported.width, 800);
  assert.deepEqual(draws, [5000, 5000]);
});

test("without WebGL2 (node's DOM has none) the map's canvas draws and says so", async () => {
  const { createGlPoints } = await import("./point-gl.js");
  const gl = createGlPoints();
  assert.equal(gl.kind(), "none");
  const backend = await backendWith(gl);
  backend.canvas.dataset.backendForce = "webgl";
  backend.draw(/** @type {any} */ (scene(5000)));
  assert.deepEqual([backend.canvas.dataset.backend, backend.canvas.dataset.webgl], ["canvas", "none"]);
});
