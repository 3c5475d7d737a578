import { test, before } from "node:test";
import assert from "node:assert/strict";
import { installDom } from "../test-helpers/fake-dom.js";

let composeSvg;
before(async () => {
  installDom();
  composeSvg = (await import("./svg.js")).composeSvg;
});

const THEME = { font: "sans-serif", fg: "#111", bg: "#fff", panel: "#f7f7f7", border: "#ccc", muted: "#666" };
const SNAP = {
  width: 400,
  height: 300,
  margin: { top: 10, right: 12, bottom: 24, left: 48 },
  radius: 3.6,
  points: [
    { x: 100, y: 100, colour: "#f00", special: false },
    { x: 5, y: 5, colour: "#0f0", special: false }, // in the margin: left out
    { x: 200, y: 150, colour: "#00f", special: true },
  ],
  labels: [{ x: 104, y: 94, w: 20, h: 14, text: "<b>t-SNE</b>" }],
  axes: {
    x: {
      ticks: [
        { pos: 100, text: "−1" },
        { pos: 200, text: "0" },
      ],
      note: "",
    },
    y: {
      ticks: [
        { pos: 50, text: "−1.0" },
        { pos: 150, text: "0.0" },
      ],
      note: "×1e−4",
    },
  },
};

test("the SVG holds the title, the grid, the map's axes, points and labels, and the colour legend", () => {
  const legend = {
    kind: "sequential",
    title: "position in the text",
    low: "first token",
    high: "token #270",
    colour: () => "#123456",
  };
  const text = composeSvg({
    snap: SNAP,
    theme: THEME,
    title: "MiniLM · layer 3 · head 8",
    legend,
    grid: { href: "data:image/png;base64,AAAA", width: 300, height: 500 },
    measure: (t) => 6 * t.length,
  });
  const svg = new window.DOMParser().parseFromString(text, "image/svg+xml").documentElement;
  const texts = (sel) => [...svg.querySelectorAll(sel)].map((e) => e.textContent);
  assert.equal(svg.querySelector("title").textContent, "MiniLM · layer 3 · head 8");
  assert.ok(texts("text").includes("MiniLM · layer 3 · head 8"), "the title is drawn");
  assert.equal(svg.querySelector("image.grid, image[class=grid]").getAttribute("href"), "data:image/png;base64,AAAA");
  assert.deepEqual(texts(".axes text"), ["−1", "0", "−1.0", "0.0", "y ×1e−4"]);
  assert.equal(svg.querySelectorAll(".axes line").length, 4);
  assert.equal(svg.querySelectorAll(".points circle").length, 2);
  assert.deepEqual(texts(".labels text"), ["<b>t-SNE</b>"], "a label is text, never markup");
  assert.deepEqual(texts(".legend text"), ["position in the text", "first token", "token #270"]);
  assert.ok(svg.querySelector(".legend rect").getAttribute("fill").startsWith("url(#"));
  assert.equal(Number(svg.getAttribute("height")), 26 + 500 + 22 + 10, "laid out as the PNG");
});

test("categories get a swatch each; no grid and no axes still make a valid SVG", () => {
  const legend = {
    kind: "categorical",
    title: "token kind",
    entries: [
      { label: "special", colour: "#f00" },
      { label: "word", colour: "#0f0" },
    ],
    more: 0,
  };
  const text = composeSvg({
    snap: { ...SNAP, axes: null },
    theme: THEME,
    title: "t",
    legend,
    grid: null,
    measure: () => 10,
  });
  const svg = new window.DOMParser().parseFromString(text, "image/svg+xml").documentElement;
  assert.deepEqual(
    [...svg.querySelectorAll(".legend rect")].map((r) => r.getAttribute("fill")),
    ["#f00", "#0f0"],
  );
  assert.equal(svg.querySelectorAll("image").length, 0);
  assert.equal(svg.querySelectorAll(".axes rect").length, 1, "the frame");
});
