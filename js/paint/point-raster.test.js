// The script rasteriser of the scatter's points: a disc of the right area, colour and place, dimmed
// points fainter, special tokens left to drawPoints.

import { test } from "node:test";
import assert from "node:assert/strict";
import { RADIUS } from "./scatter-paint.js";
import { createPointRaster } from "./point-raster.js";

/** A `document` whose canvases keep the last ImageData put on them; the screen context records drawImage. */
function stubCanvas() {
  const put = [];
  globalThis.document = /** @type {any} */ ({
    createElement: () => ({
      width: 0,
      height: 0,
      getContext: () => ({
        createImageData: (w, h) => ({ width: w, height: h, data: new Uint8ClampedArray(4 * w * h) }),
        putImageData: (image) => put.push(image),
      }),
    }),
  });
  const drawn = [];
  const screen = { save() {}, restore() {}, setTransform() {}, drawImage: (img, x, y) => drawn.push([img, x, y]) };
  return { put, drawn, screen };
}

const theme = { muted: "#808080" };
const box = { x0: 0, y0: 0, x1: 40, y1: 30 };

function alphaStats(image) {
  let sum = 0,
    mx = 0,
    my = 0;
  for (let i = 3; i < image.data.length; i += 4) {
    const a = image.data[i] / 255;
    const p = (i - 3) / 4;
    sum += a;
    mx += a * ((p % image.width) + 0.5);
    my += a * (Math.floor(p / image.width) + 0.5);
  }
  return { sum, x: mx / sum, y: my / sum };
}

test("a rasterised point is an antialiased disc of RADIUS at its place, in its colour", () => {
  const { put, drawn, screen } = stubCanvas();
  const raster = createPointRaster();
  const points = {
    sx: [10.3, 25],
    sy: [12.8, 20],
    m: 2,
    kept: [0, 1],
    colours: ["rgb(200, 40, 10)", "#000"],
    special: [false, true],
  };
  for (const scale of [1, 2]) {
    put.length = 0;
    assert.equal(raster.draw(screen, { theme, scale, box, points, alpha: () => 1 }), true);
    const image = put[0];
    assert.equal(image.width, 40 * scale);
    const { sum, x, y } = alphaStats(image);
    const area = Math.PI * (RADIUS * scale) ** 2;
    assert.ok(Math.abs(sum - area) / area < 0.03, `coverage ${sum.toFixed(1)} px vs a disc's ${area.toFixed(1)}`);
    assert.ok(Math.abs(x - 10.3 * scale) < 0.2 && Math.abs(y - 12.8 * scale) < 0.2, `centre ${x}, ${y}`);
    const o = 4 * (Math.round(12.8 * scale) * image.width + Math.round(10.3 * scale));
    assert.deepEqual([...image.data.slice(o, o + 4)], [200, 40, 10, 255]);
  }
  assert.equal(drawn.length, 2);
  // dimmed: the same disc at 0.3 opacity
  put.length = 0;
  raster.draw(screen, { theme, scale: 1, box, points, alpha: () => 0.3 });
  const dim = alphaStats(put[0]).sum;
  assert.ok(Math.abs(dim - 0.3 * Math.PI * RADIUS ** 2) < 1, `dimmed coverage ${dim}`);
});
