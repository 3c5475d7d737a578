// The layer-wise maximum-attention grid: one h x n heat map per layer on a single canvas. The cells of
// the shown token range are painted once per data/theme/zoom into an offscreen image (one pixel per
// column; bins of several tokens, each its maximum, when there are more tokens than pixels) and scaled
// up with nearest-neighbour sampling, so hovering and selecting only redraw a cheap overlay.
// Every head is labelled; a click on a cell or a head label selects the head (the layer in hidden-state
// mode); arrows move a cursor and Enter selects when the grid has focus; ctrl/alt + wheel zooms the
// token axis (double-click resets), with token labels once columns are wide enough.

import { max } from "d3-array";
import { scaleSequentialSqrt } from "d3-scale";
import { color as parseColor } from "d3-color";
import { binColumns, gridGeometry, kvGroup, layerTop, zoomRange } from "./grid-geometry.js";
import { gridHit } from "./hittest.js";

const TOKEN_LABEL_W = 12; // columns at least this wide get token labels

/** 256-entry RGB lookup table of a sequential colour scale. */
function colourTable(interpolator) {
  const lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const c = parseColor(interpolator(i / 255)).rgb();
    lut.set([c.r, c.g, c.b], 3 * i);
  }
  return lut;
}

/**
 * @param {{scroll: HTMLElement, legend: HTMLCanvasElement, legendMax: HTMLElement,
 *   onHover: (token: number, info: any, event?: MouseEvent) => void,
 *   onSelect: (layer: number, head: number) => void, onRow?: (layer: number | null, head?: number) => void}} options
 */
export function createGrid({ scroll, legend, legendMax, onHover, onSelect, onRow = () => {} }) {
  const canvas = document.createElement("canvas");
  canvas.dataset.testid = "headsne-grid";
  canvas.tabIndex = 0;
  canvas.setAttribute("role", "grid");
  canvas.setAttribute(
    "aria-label",
    "layer-wise maximum attention: rows are heads, columns are tokens; arrows move, Enter selects",
  );
  scroll.appendChild(canvas);
  const ctx = canvas.getContext("2d");
  const image = document.createElement("canvas");

  let theme = null;
  let values = null; // Float32Array (L, H, n)
  let L = 0;
  let H = 0;
  let n = 0;
  let tokens = [];
  let vmax = 1;
  let geom = null;
  let view = [0, 0]; // token range [t0, t1); [0, 0] = everything
  let selected = { layer: 0, head: 0 };
  let cursor = null; // keyboard cursor {layer, head}
  let hidden = false; // hidden-state mode: the grid selects layers
  let kvGroups = 0;
  let hoverToken = -1;
  let hoverCell = null;
  let marked = { selected: new Set(), matches: new Set() };
  let painted = ""; // what the offscreen image holds

  function paintImage() {
    if (!values || !theme || !geom) return;
    const key = `${geom.t0}:${geom.t1}:${geom.columns}:${theme.dark}:${vmax}`;
    if (key === painted) return;
    painted = key;
    const cols = geom.columns;
    const data = geom.binned || geom.count < n ? binColumns(values, L * H, n, geom.t0, geom.t1, cols) : values;
    image.width = cols;
    image.height = Math.max(L * H, 1);
    const ictx = image.getContext("2d");
    const pixels = ictx.createImageData(image.width, image.height);
    const lut = colourTable(theme.heat);
    const scale = scaleSequentialSqrt([0, vmax], (t) => t).clamp(true);
    for (let i = 0; i < L * H * cols; i++) {
      const c = 3 * Math.round(255 * scale(data[i]));
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
    const width = Math.max(200, scroll.clientWidth);
    const [t0, t1] = view[1] > view[0] ? view : [0, n];
    geom = gridGeometry(L, H, n, width, { t0, t1 });
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${geom.width}px`;
    canvas.style.height = `${geom.height}px`;
    canvas.width = Math.round(geom.width * dpr);
    canvas.height = Math.round(geom.height * dpr);
    Object.assign(canvas.dataset, {
      layers: L,
      heads: H,
      tokens: n,
      labelW: geom.labelW,
      cellW: geom.cellW,
      cellH: geom.cellH,
      gap: geom.gap,
      tokenStart: geom.t0,
      tokenEnd: geom.t1,
      overview: geom.binned ? `max over bins of ${(geom.count / geom.columns).toFixed(1)} tokens` : "",
    });
    paintImage();
    draw();
  }

  /** Marks under every layer block: selected tokens (fg) and search matches (highlight). */
  function drawMarks(top) {
    const y = top + geom.blockH + 1;
    const mark = (set, colour, dy) => {
      ctx.fillStyle = colour;
      for (const t of set) {
        if (t < geom.t0 || t >= geom.t1) continue;
        ctx.fillRect(geom.labelW + (t - geom.t0) * geom.cellW, y + dy, Math.max(1.5, geom.cellW), 2.5);
      }
    };
    mark(marked.matches, theme.highlight, 0);
    mark(marked.selected, theme.fg, 3);
  }

  function draw() {
    if (!geom || !theme) return;
    const dpr = canvas.width / geom.width;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = theme.panel;
    ctx.fillRect(0, 0, geom.width, geom.height);
    ctx.imageSmoothingEnabled = false;
    const w = geom.count * geom.cellW;
    const perGroup = kvGroup(0, H, kvGroups) >= 0 ? kvGroups : 0;
    const labelTokens = geom.cellW >= TOKEN_LABEL_W;
    ctx.textBaseline = "middle";
    for (let l = 0; l < L; l++) {
      const top = layerTop(geom, l);
      ctx.drawImage(image, 0, l * H, geom.columns, H, geom.labelW, top, w, geom.blockH);
      ctx.font = `600 11px ${theme.font}`;
      ctx.textAlign = "left";
      ctx.fillStyle = l === selected.layer ? theme.accent : theme.fg;
      ctx.fillText(`Layer ${l}`, 2, top - geom.gap / 2);
      if (labelTokens) {
        ctx.font = `9px ${theme.font}`;
        ctx.fillStyle = theme.muted;
        for (let t = geom.t0; t < geom.t1; t++) {
          const x = geom.labelW + (t - geom.t0) * geom.cellW;
          ctx.save();
          ctx.beginPath();
          ctx.rect(x, top - geom.gap, geom.cellW - 1, geom.gap);
          ctx.clip();
          ctx.fillText(tokens[t] ?? "", x + 1, top - geom.gap / 2 + 1);
          ctx.restore();
        }
      }
      ctx.font = `${Math.min(10, geom.cellH)}px ${theme.font}`;
      ctx.textAlign = "right";
      for (let h = 0; h < H; h++) {
        const isSel = !hidden && l === selected.layer && h === selected.head;
        ctx.fillStyle = isSel ? theme.accent : theme.muted;
        ctx.fillText(`${isSel ? "▶ " : ""}H${h}`, geom.labelW - 4, top + (h + 0.5) * geom.cellH);
      }
      if (perGroup) {
        ctx.strokeStyle = theme.panel;
        ctx.lineWidth = 1.5;
        ctx.beginPath();
        for (let g = perGroup; g < H; g += perGroup) {
          const y = top + g * geom.cellH;
          ctx.moveTo(geom.labelW - 30, y);
          ctx.lineTo(geom.labelW + w, y);
        }
        ctx.stroke();
      }
      drawMarks(top);
    }
    if (geom.binned || geom.count < n) {
      ctx.font = `9px ${theme.font}`;
      ctx.textAlign = "right";
      ctx.fillStyle = theme.muted;
      const what = geom.binned ? `overview: max of ${(geom.count / geom.columns).toFixed(1)} tokens per column · ` : "";
      ctx.fillText(`${what}tokens ${geom.t0}–${geom.t1 - 1} of ${n}`, geom.labelW + w, geom.gap / 2);
    }
    // hovered token: a column band through every layer
    if (hoverToken >= geom.t0 && hoverToken < geom.t1) {
      ctx.strokeStyle = theme.highlight;
      ctx.lineWidth = 1;
      const x = geom.labelW + (hoverToken - geom.t0) * geom.cellW;
      for (let l = 0; l < L; l++) ctx.strokeRect(x - 1, layerTop(geom, l) - 1, geom.cellW + 2, geom.blockH + 2);
    }
    // selected head (attention mode) or layer (hidden-state mode): outlined
    ctx.strokeStyle = theme.accent;
    ctx.lineWidth = 2;
    if (hidden) {
      ctx.strokeRect(geom.labelW - 1, layerTop(geom, selected.layer) - 1, w + 2, geom.blockH + 2);
    } else {
      const st = layerTop(geom, selected.layer) + selected.head * geom.cellH;
      ctx.strokeRect(geom.labelW - 1, st - 1, w + 2, geom.cellH + 2);
    }
    if (cursor && document.activeElement === canvas) {
      ctx.strokeStyle = theme.fg;
      ctx.setLineDash([3, 2]);
      ctx.lineWidth = 1;
      const ct = layerTop(geom, cursor.layer) + (hidden ? 0 : cursor.head * geom.cellH);
      ctx.strokeRect(1, ct - 0.5, geom.labelW + w - 1, hidden ? geom.blockH + 1 : geom.cellH + 1);
      ctx.setLineDash([]);
    }
    if (hoverCell && hoverCell.token >= 0) {
      ctx.strokeStyle = theme.fg;
      ctx.lineWidth = 1;
      ctx.strokeRect(
        geom.labelW + (hoverCell.token - geom.t0) * geom.cellW - 0.5,
        layerTop(geom, hoverCell.layer) + hoverCell.head * geom.cellH - 0.5,
        geom.cellW + 1,
        geom.cellH + 1,
      );
    }
    canvas.dataset.markedSelected = String(marked.selected.size);
    canvas.dataset.markedMatches = String(marked.matches.size);
  }

  /** Scroll so that layer `layer`'s map is in view (only when it is not). */
  function reveal(layer) {
    if (!geom) return;
    const top = layerTop(geom, layer) - geom.gap;
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

  const select = (layer, head) => onSelect(layer, hidden ? selected.head : head);

  const onMove = (event) => {
    const hit = cellAt(event);
    hoverCell = hit;
    onRow(hit ? hit.layer : null, hit ? hit.head : undefined);
    if (hit && hit.token >= 0) {
      const value = values[(hit.layer * H + hit.head) * n + hit.token];
      const group = kvGroup(hit.head, H, kvGroups);
      onHover(hit.token, { ...hit, value, group, hidden, source: "grid" }, event);
    } else {
      onHover(-1, null, event);
    }
    draw();
  };
  const onLeave = (event) => {
    hoverCell = null;
    onRow(null);
    onHover(-1, null, event);
    draw();
  };
  const onClick = (event) => {
    const hit = cellAt(event);
    if (hit) {
      cursor = { layer: hit.layer, head: hit.head };
      select(hit.layer, hit.head);
    }
  };
  const onKey = (event) => {
    if (!geom) return;
    const c = cursor ?? { ...selected };
    const moves = {
      ArrowUp: () => (c.head > 0 ? c.head-- : c.layer > 0 && (c.layer--, (c.head = H - 1))),
      ArrowDown: () => (c.head < H - 1 ? c.head++ : c.layer < L - 1 && (c.layer++, (c.head = 0))),
      ArrowLeft: () => c.layer > 0 && c.layer--,
      ArrowRight: () => c.layer < L - 1 && c.layer++,
    };
    if (hidden && (event.key === "ArrowUp" || event.key === "ArrowDown")) {
      moves[event.key === "ArrowUp" ? "ArrowLeft" : "ArrowRight"]();
    } else if (moves[event.key]) {
      moves[event.key]();
    } else if (event.key === "Enter" || event.key === " ") {
      select(c.layer, c.head);
    } else if (event.key === "Escape") {
      view = [0, 0];
      resize();
    } else {
      return;
    }
    event.preventDefault();
    cursor = c;
    reveal(c.layer);
    draw();
  };
  const onWheel = (event) => {
    if (!geom || !(event.ctrlKey || event.altKey || event.metaKey)) return;
    event.preventDefault();
    const hit = cellAt(event);
    const at = hit && hit.token >= 0 ? hit.token : (geom.t0 + geom.t1) / 2;
    view = zoomRange(geom.t0, geom.t1, n, event.deltaY < 0 ? 0.8 : 1.25, at);
    if (view[0] === 0 && view[1] === n) view = [0, 0];
    resize();
  };
  const onDblClick = () => {
    view = [0, 0];
    resize();
  };
  const onFocus = () => draw();
  canvas.addEventListener("mousemove", onMove);
  canvas.addEventListener("mouseleave", onLeave);
  canvas.addEventListener("click", onClick);
  canvas.addEventListener("keydown", onKey);
  canvas.addEventListener("wheel", onWheel, { passive: false });
  canvas.addEventListener("dblclick", onDblClick);
  canvas.addEventListener("focus", onFocus);
  canvas.addEventListener("blur", onFocus);

  return {
    canvas,
    /** New maximum-attention array {data, shape: [L, H, n]} (or null) and the token strings. */
    setData(array, tokenList) {
      tokens = tokenList || [];
      painted = "";
      if (!array) {
        values = null;
        L = H = n = 0;
        geom = null;
        canvas.width = canvas.height = 0;
        return;
      }
      if (array.shape.length !== 3) throw new RangeError(`max_attention must be (L, H, n), got [${array.shape}]`);
      if (array.shape[2] !== n) view = [0, 0];
      [L, H, n] = array.shape;
      values = array.data;
      vmax = Math.max(max(values) || 0, 1e-6);
      resize();
    },
    /** The selected head, and whether the grid selects layers (hidden-state mode). */
    setSelection(layer, head, hiddenMode = false) {
      const moved = layer !== selected.layer;
      selected = { layer, head };
      hidden = hiddenMode;
      cursor = null;
      draw();
      if (moved || !geom) reveal(layer);
    },
    setKvGroups(groups) {
      kvGroups = Number(groups) || 0;
      draw();
    },
    /** Token index sets to mark: the selection and the search matches. */
    setMarks(selectedSet, matchSet) {
      marked = { selected: selectedSet, matches: matchSet };
      draw();
    },
    setHover(token) {
      if (token === hoverToken) return;
      hoverToken = token;
      draw();
    },
    setTheme(t) {
      theme = t;
      painted = "";
      paintImage();
      draw();
    },
    resize,
    tokenAt: (j) => tokens[j],
    destroy() {
      canvas.removeEventListener("mousemove", onMove);
      canvas.removeEventListener("mouseleave", onLeave);
      canvas.removeEventListener("click", onClick);
      canvas.removeEventListener("keydown", onKey);
      canvas.removeEventListener("wheel", onWheel);
      canvas.removeEventListener("dblclick", onDblClick);
      canvas.removeEventListener("focus", onFocus);
      canvas.removeEventListener("blur", onFocus);
    },
  };
}
