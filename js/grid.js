// The layer-wise maximum-attention grid: one h x n heat map per layer on a single canvas. The cells are
// painted once per data/theme into an n x (L*H) offscreen image (one pixel per cell) and scaled up with
// nearest-neighbour sampling, so hovering and selecting only redraw a cheap overlay.

import { max } from "d3-array";
import { scaleSequentialSqrt } from "d3-scale";
import { color as parseColor } from "d3-color";
import { gridGeometry, gridHit, layerTop } from "./layout.js";

/** 256-entry RGB lookup table of a sequential colour scale. */
function colourTable(interpolator) {
  const lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const c = parseColor(interpolator(i / 255)).rgb();
    lut.set([c.r, c.g, c.b], 3 * i);
  }
  return lut;
}

export function createGrid({ scroll, legend, legendMax, onHover, onSelect }) {
  const canvas = document.createElement("canvas");
  canvas.dataset.testid = "headsne-grid";
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", "layer-wise maximum attention: rows are heads, columns are tokens");
  scroll.appendChild(canvas);
  const ctx = canvas.getContext("2d");
  const image = document.createElement("canvas");

  let theme = null;
  let values = null; // Float32Array (L, H, n)
  let L = 0, H = 0, n = 0;
  let tokens = [];
  let vmax = 1;
  let geom = null;
  let selected = { layer: 0, head: 0 };
  let hoverToken = -1;
  let hoverCell = null;

  function paintImage() {
    if (!values || !theme) return;
    image.width = Math.max(n, 1);
    image.height = Math.max(L * H, 1);
    const ictx = image.getContext("2d");
    const pixels = ictx.createImageData(image.width, image.height);
    const lut = colourTable(theme.heat);
    const scale = scaleSequentialSqrt([0, vmax], (t) => t).clamp(true);
    for (let i = 0; i < L * H * n; i++) {
      const c = 3 * Math.round(255 * scale(values[i]));
      pixels.data[4 * i] = lut[c];
      pixels.data[4 * i + 1] = lut[c + 1];
      pixels.data[4 * i + 2] = lut[c + 2];
      pixels.data[4 * i + 3] = 255;
    }
    ictx.putImageData(pixels, 0, 0);
    paintLegend(lut);
  }

  function paintLegend(lut) {
    legend.width = 128;
    legend.height = 1;
    const lctx = legend.getContext("2d");
    const row = lctx.createImageData(128, 1);
    for (let i = 0; i < 128; i++) {
      const c = 3 * Math.round((255 * i) / 127);
      row.data.set([lut[c], lut[c + 1], lut[c + 2], 255], 4 * i);
    }
    lctx.putImageData(row, 0, 0);
    legendMax.textContent = vmax.toPrecision(2);
  }

  function resize() {
    if (!L || !H || !n) return;
    const width = Math.max(240, scroll.clientWidth);
    geom = gridGeometry(L, H, n, width);
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${geom.width}px`;
    canvas.style.height = `${geom.height}px`;
    canvas.width = Math.round(geom.width * dpr);
    canvas.height = Math.round(geom.height * dpr);
    Object.assign(canvas.dataset, {
      layers: L, heads: H, tokens: n, labelW: geom.labelW, cellW: geom.cellW, cellH: geom.cellH, gap: geom.gap,
    });
    draw();
  }

  function draw() {
    if (!geom || !theme) return;
    const dpr = canvas.width / geom.width;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = theme.panel;
    ctx.fillRect(0, 0, geom.width, geom.height);
    ctx.imageSmoothingEnabled = false;
    const w = geom.n * geom.cellW;
    const labelStep = geom.cellH >= 9 ? 1 : geom.cellH >= 6 ? 2 : 4;
    ctx.textBaseline = "middle";
    for (let l = 0; l < L; l++) {
      const top = layerTop(geom, l);
      ctx.drawImage(image, 0, l * H, n, H, geom.labelW, top, w, geom.blockH);
      ctx.font = `600 11px ${theme.font}`;
      ctx.textAlign = "left";
      ctx.fillStyle = l === selected.layer ? theme.accent : theme.fg;
      ctx.fillText(`Layer ${l}`, geom.labelW, top - geom.gap / 2);
      ctx.font = `9px ${theme.font}`;
      ctx.textAlign = "right";
      for (let h = 0; h < H; h++) {
        const isSel = l === selected.layer && h === selected.head;
        if (h % labelStep !== 0 && !isSel) continue;
        ctx.fillStyle = isSel ? theme.accent : theme.muted;
        ctx.fillText(`${isSel ? "▶ " : ""}H${h}`, geom.labelW - 4, top + (h + 0.5) * geom.cellH);
      }
    }
    // hovered token: a column band through every layer
    if (hoverToken >= 0 && hoverToken < n) {
      ctx.strokeStyle = theme.highlight;
      ctx.lineWidth = 1;
      const x = geom.labelW + hoverToken * geom.cellW;
      for (let l = 0; l < L; l++) {
        ctx.strokeRect(x - 1, layerTop(geom, l) - 1, geom.cellW + 2, geom.blockH + 2);
      }
    }
    // selected head: an outlined row
    const st = layerTop(geom, selected.layer) + selected.head * geom.cellH;
    ctx.strokeStyle = theme.accent;
    ctx.lineWidth = 2;
    ctx.strokeRect(geom.labelW - 1, st - 1, w + 2, geom.cellH + 2);
    if (hoverCell) {
      ctx.strokeStyle = theme.fg;
      ctx.lineWidth = 1;
      ctx.strokeRect(
        geom.labelW + hoverCell.token * geom.cellW - 0.5,
        layerTop(geom, hoverCell.layer) + hoverCell.head * geom.cellH - 0.5,
        geom.cellW + 1, geom.cellH + 1,
      );
    }
  }

  /** Scroll so that the selected layer's map is in view (only when it is not). */
  function revealSelected() {
    if (!geom) return;
    const top = layerTop(geom, selected.layer) - geom.gap;
    const bottom = top + geom.gap + geom.blockH;
    if (top < scroll.scrollTop || bottom > scroll.scrollTop + scroll.clientHeight) {
      scroll.scrollTop = Math.max(0, top - 4);
    }
  }

  function cellAt(event) {
    if (!geom) return null;
    const rect = canvas.getBoundingClientRect();
    return gridHit(geom, event.clientX - rect.left, event.clientY - rect.top);
  }

  const onMove = (event) => {
    const hit = cellAt(event);
    hoverCell = hit;
    if (hit) {
      const value = values[(hit.layer * H + hit.head) * n + hit.token];
      onHover(hit.token, { ...hit, value, source: "grid" }, event);
    } else {
      onHover(-1, null, event);
    }
    draw();
  };
  const onLeave = (event) => {
    hoverCell = null;
    onHover(-1, null, event);
    draw();
  };
  const onClick = (event) => {
    const hit = cellAt(event);
    if (hit) onSelect(hit.layer, hit.head);
  };
  canvas.addEventListener("mousemove", onMove);
  canvas.addEventListener("mouseleave", onLeave);
  canvas.addEventListener("click", onClick);

  return {
    canvas,
    /** New maximum-attention array {data, shape: [L, H, n]} (or null) and the token strings. */
    setData(array, tokenList) {
      tokens = tokenList || [];
      if (!array) {
        values = null;
        L = H = n = 0;
        geom = null;
        canvas.width = canvas.height = 0;
        return;
      }
      if (array.shape.length !== 3) throw new RangeError(`max_attention must be (L, H, n), got [${array.shape}]`);
      [L, H, n] = array.shape;
      values = array.data;
      vmax = Math.max(max(values) || 0, 1e-6);
      paintImage();
      resize();
    },
    setSelection(layer, head) {
      selected = { layer, head };
      draw();
      revealSelected();
    },
    setHover(token) {
      if (token === hoverToken) return;
      hoverToken = token;
      draw();
    },
    setTheme(t) {
      theme = t;
      paintImage();
      draw();
    },
    resize,
    tokenAt: (j) => tokens[j],
    destroy() {
      canvas.removeEventListener("mousemove", onMove);
      canvas.removeEventListener("mouseleave", onLeave);
      canvas.removeEventListener("click", onClick);
    },
  };
}
