// The head atlas (data-testid="headsne-atlas"): a small t-SNE thumbnail for every head of the current
// layer, computed by Python in the background on request (control "atlas", cancelled by "atlas_stop"),
// with its progress, sortable by head or by KL; a click on a thumbnail selects that head.

import { decodeArray } from "./codecs.js";
import { el } from "./dom.js";
import { T, changes, control } from "./model.js";
import { frameExtent, fitDomains } from "./viewport.js";

const SIZE = 92; // CSS px of a thumbnail

/**
 * @param {{model: import("./model.js").Model, panel: HTMLElement, onSelect: (head: number) => void}} options
 */
export function createAtlas({ model, panel, onSelect }) {
  const listeners = [];
  const on = (name, fn) => {
    model.on(name, fn);
    listeners.push([name, fn]);
  };
  const title = el("span", { className: "hs-atlas-title", text: "head atlas" });
  const run = el("button", {
    dataset: { testid: "headsne-atlas-run" },
    title: "a small t-SNE of every head of the layer",
  });
  const progress = el("span", { className: "hs-atlas-progress", dataset: { testid: "headsne-atlas-progress" } });
  const sort = el("select", { "aria-label": "sort thumbnails", dataset: { testid: "headsne-atlas-sort" } }, [
    el("option", { value: "head", text: "by head" }),
    el("option", { value: "kl", text: "by KL" }),
  ]);
  const thumbs = el("div", { className: "hs-atlas-thumbs" });
  panel.append(
    el("div", { className: "hs-panel-title" }, [title, run, progress, el("label", {}, ["sort", sort])]),
    thumbs,
  );

  let theme = null;
  let colours = [];
  let kept = [];
  let selection = { layer: 0, head: 0, hidden: false };

  run.addEventListener("click", () => control(model, model.get(T.atlas_state) === "running" ? "atlas_stop" : "atlas"));
  sort.addEventListener("change", () => draw());

  function draw() {
    const state = model.get(T.atlas_state) || "idle";
    const H = model.get(T.n_heads) || 0;
    panel.dataset.state = state;
    run.textContent = state === "running" ? "■ stop" : state === "done" ? "↻ recompute" : "▦ compute atlas";
    const done = model.get(T.atlas_progress) ?? 0;
    progress.textContent = state === "running" ? `${done} / ${H} heads…` : state === "error" ? "failed" : "";
    title.textContent = `head atlas · layer ${selection.layer}`;
    let atlas = null;
    let kl = null;
    try {
      atlas = decodeArray(model.get(T.atlas) ?? null);
      const k = decodeArray(model.get(T.atlas_kl) ?? null);
      kl = k ? k.data : null;
    } catch (err) {
      progress.textContent = `cannot read the atlas: ${err.message}`;
    }
    if (!atlas || atlas.shape.length !== 3 || !theme) {
      thumbs.replaceChildren();
      panel.dataset.thumbnails = "0";
      return;
    }
    const [heads, m] = atlas.shape;
    const order = Array.from({ length: heads }, (_, h) => h);
    if (sort.value === "kl" && kl) order.sort((a, b) => (kl[a] ?? Infinity) - (kl[b] ?? Infinity));
    const dpr = window.devicePixelRatio || 1;
    thumbs.replaceChildren(
      ...order.map((h) => {
        const canvas = el("canvas", { width: SIZE * dpr, height: SIZE * dpr });
        canvas.style.width = canvas.style.height = `${SIZE}px`;
        const data = atlas.data.subarray(h * m * 2, (h + 1) * m * 2);
        paintThumb(canvas.getContext("2d"), data, m, dpr);
        const klText = kl && Number.isFinite(kl[h]) ? ` · KL ${kl[h].toFixed(2)}` : "";
        const isSel = !selection.hidden && h === selection.head;
        const button = el(
          "button",
          {
            className: `hs-thumb${isSel ? " hs-thumb-selected" : ""}`,
            dataset: { head: String(h) },
            title: `select head ${h}`,
          },
          [canvas, el("span", { text: `H${h}${klText}` })],
        );
        button.addEventListener("click", () => onSelect(h));
        return button;
      }),
    );
    panel.dataset.thumbnails = String(heads);
  }

  function paintThumb(c, data, m, dpr) {
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = theme.panel;
    c.fillRect(0, 0, SIZE, SIZE);
    const extent = frameExtent(data, m);
    if (!extent) return;
    const d = fitDomains(extent, SIZE, SIZE, 0.08);
    const sx = (x) => ((x - d.x[0]) / (d.x[1] - d.x[0])) * SIZE;
    const sy = (y) => SIZE - ((y - d.y[0]) / (d.y[1] - d.y[0])) * SIZE;
    for (let r = 0; r < m; r++) {
      c.fillStyle = colours[kept[r]] || theme.muted;
      c.fillRect(sx(data[2 * r]) - 1.25, sy(data[2 * r + 1]) - 1.25, 2.5, 2.5);
    }
  }

  on(changes(T.atlas, T.atlas_kl, T.atlas_state, T.atlas_progress, T.n_heads), draw);
  draw();

  return {
    setTheme(t) {
      theme = t;
      draw();
    },
    setColours(list) {
      colours = list;
      draw();
    },
    setKept(list) {
      kept = list;
    },
    setSelection(layer, head, hidden) {
      if (layer === selection.layer && head === selection.head && hidden === selection.hidden) return;
      selection = { layer, head, hidden };
      draw();
    },
    destroy() {
      for (const [name, fn] of listeners) model.off(name, fn);
    },
  };
}
