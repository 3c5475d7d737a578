// The t-SNE scatter: one point per kept token in its colour, labelled without overlap (js/labels.js),
// animated between received frames, autoscaled to the data until the user zooms (d3-zoom), with linear
// or quantile-equidistant axes, the hovered token's partners, the selection and search matches
// highlighted, and lasso (shift + drag) or box selection (js/lasso.js).

import { scaleLinear } from "d3-scale";
import { select } from "d3-selection";
import { zoom as d3zoom, zoomIdentity } from "d3-zoom";
import { easeDomains, fitDomains, robustExtent } from "./viewport.js";
import { quantileRescaleFrame } from "./rescaling.js";
import { nearestPoint, pointsInPolygon } from "./hittest.js";
import { chooseLabels } from "./labels.js";
import { partnerTokens, shownPartners } from "./partners.js";
import { createLasso } from "./lasso.js";
import { tweenMs } from "./schedule.js";
import {
  MARGIN,
  RADIUS,
  createPointRaster,
  drawAxes,
  drawEdges,
  drawLasso,
  drawPinned,
  drawPoints,
  haloFont,
  haloText,
  labelAtlas,
  ring,
} from "./scatter-paint.js";

const QUANTILE_DOMAIN = [-0.04, 1.06];
const LABEL_H = 14; // CSS px of a plain label's box
const BOXES_EVERY_MS = 150; // data-label-boxes is refreshed at most this often (and after the last draw)
// Frames received but not yet shown: one is shown per animation frame, so two that arrive within one
// display frame (network jitter) are both shown, one display frame apart, instead of the first never.
// At most this many wait (a frame is shown at most this many display frames late); older ones are dropped.
const MAX_WAITING = 3;

/**
 * `onDraw(count, ms, tag)` is called at the first paint that shows a newly received frame (`count` such
 * paints so far, `ms` that paint's main-thread time, `tag` the frame's setFrame tag); repaints of frames
 * already shown are not reported.
 * @param {{wrap: HTMLElement, onHover: (token: number, event?: MouseEvent) => void,
 *   onDraw: (count: number, ms: number, tag: any) => void, onSelect: (tokens: number[], event: MouseEvent) => void}} options
 */
export function createScatter({ wrap, onHover, onDraw, onSelect }) {
  const canvas = document.createElement("canvas");
  canvas.dataset.testid = "headsne-scatter";
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", "t-SNE map of the tokens");
  wrap.appendChild(canvas);
  const ctx = canvas.getContext("2d");
  const pointRaster = createPointRaster();

  let theme = null;
  let width = 0;
  let height = 0; // CSS px
  let tokens = [];
  let special = [];
  let colours = [];
  let subword = (_t) => false;
  let kept = [];
  let tokenRow = new Int32Array(0);
  /** @type {(token: number) => import("./partners.js").Partners} */
  let partnersFor = () => ({ to: [], from: [], near: [], hidden: false });
  let direction = "both";
  let quantile = false;
  let quantileK = 100;
  let knots = null;
  let selected = new Set();
  let matches = new Set();
  let density = 0.5;
  let boxMode = false;
  /** @type {[number, number][] | null} */
  let lassoPolygon = null;

  // positions (interleaved x, y) in display space: original units, or [0, 1] with quantile axes
  let m = 0;
  let raw = null; // the frame as received (original units)
  let from = new Float32Array(0);
  let to = new Float32Array(0);
  let cur = new Float32Array(0);
  let sx = new Float32Array(0);
  let sy = new Float32Array(0); // screen positions of the last draw
  let tweenStart = 0;
  let tweenDuration = 0;
  let lastFrameAt = 0;
  let hasDrawnPoints = false;
  let paintMs = 0; // main-thread ms of a screen paint with points, a running mean (decides the tween)

  let domains = null; // displayed base domains {x, y}
  let target = null;
  let transform = zoomIdentity;
  let userZoomed = false;
  let hoverToken = -1;
  let rafId = 0;
  let atlas = null; // token labels pre-rendered once: drawImage per label is far cheaper than fillText
  let framesDrawn = 0; // paints that showed a frame not shown before (tweens and repaints not counted)
  let freshFrame = false; // a frame arrived since the last paint
  /** @type {{data: Float32Array, count: number, animate: boolean, tag: any}[]} */
  const waiting = []; // received frames not shown yet, oldest first
  let shownTag = null; // tag of the frame on screen
  let boxesPending = [];
  let lastBoxes = [];
  let pinOutliers = false;
  const pinned = []; // rows of the far outliers pinned to the edge in the last draw
  let boxesWritten = 0;
  let boxesTimer = 0;

  const zoom = d3zoom()
    .scaleExtent([0.25, 200])
    .filter(
      (event) =>
        (!event.ctrlKey || event.type === "wheel") &&
        !event.button &&
        event.type !== "dblclick" &&
        !(event.type === "mousedown" && (event.shiftKey || boxMode)),
    )
    .on("zoom", (event) => {
      transform = event.transform;
      if (event.sourceEvent) userZoomed = true;
      request();
    });
  const selection = select(canvas).call(zoom);
  const onDblClick = () => resetView();
  canvas.addEventListener("dblclick", onDblClick);

  const lasso = createLasso({
    canvas,
    boxMode: () => boxMode,
    onChange: (polygon) => {
      lassoPolygon = polygon;
      request();
    },
    onDone: (polygon, _box, event) =>
      onSelect(
        pointsInPolygon(sx, sy, m, polygon).map((r) => kept[r]),
        event,
      ),
  });

  function ensureCapacity(count) {
    if (cur.length >= 2 * count) return;
    const grow = (a) => {
      const b = new Float32Array(2 * count);
      b.set(a.subarray(0, Math.min(a.length, b.length)));
      return b;
    };
    from = grow(from);
    to = grow(to);
    cur = grow(cur);
    sx = new Float32Array(count);
    sy = new Float32Array(count);
  }

  function plotSize() {
    return {
      w: Math.max(10, width - MARGIN.left - MARGIN.right),
      h: Math.max(10, height - MARGIN.top - MARGIN.bottom),
    };
  }

  /** Recompute display-space targets `to` (and knots) from the raw frame. */
  function project() {
    if (!raw) return;
    if (quantile && m > 0) {
      knots = quantileRescaleFrame(raw, m, quantileK, to);
      target = { x: QUANTILE_DOMAIN, y: QUANTILE_DOMAIN };
    } else {
      knots = null;
      to.set(raw.subarray(0, 2 * m));
      const { extent, clipped } = robustExtent(to, m);
      pinOutliers = clipped;
      const { w, h } = plotSize();
      if (extent) target = fitDomains(extent, w, h);
    }
  }

  function resize() {
    const w = Math.max(200, wrap.clientWidth);
    const h = Math.round(Math.min(620, Math.max(300, w * 0.78)));
    if (w === width && h === height) return;
    width = w;
    height = h;
    const dpr = window.devicePixelRatio || 1;
    canvas.style.height = `${h}px`;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    project();
    if (!userZoomed) domains = target;
    request();
  }

  function request() {
    if (!rafId) rafId = requestAnimationFrame(tick);
  }

  function tick(now) {
    rafId = 0;
    let busy = false;
    if (waiting.length) {
      applyFrame(/** @type {any} */ (waiting.shift()));
      if (waiting.length) busy = true;
    }
    if (tweenDuration > 0) {
      const t = Math.min(1, (now - tweenStart) / tweenDuration);
      const e = t * (2 - t); // ease-out
      for (let i = 0; i < 2 * m; i++) cur[i] = from[i] + (to[i] - from[i]) * e;
      if (t < 1) busy = true;
      else tweenDuration = 0;
    }
    if (target && !userZoomed) {
      let settled;
      [domains, settled] = easeDomains(domains, target, 0.3);
      if (!settled) busy = true;
    } else if (!domains) {
      domains = target;
    }
    paint(ctx, canvas.width / Math.max(width, 1), false);
    if (busy) request();
  }

  /** Label boxes of the tokens to label, collision-free, in priority order (CSS px). */
  function layoutLabels(c, hoverRow, partners, w, h, dpr) {
    if (!atlas || atlas.dpr !== dpr) atlas = theme && tokens.length ? labelAtlas(tokens, theme, dpr, LABEL_H) : null;
    if (!atlas) return [];
    return chooseLabels({
      points: { sx, sy, m, kept, tokenRow },
      plot: { x0: MARGIN.left, y0: MARGIN.top, x1: MARGIN.left + w, y1: MARGIN.top + h },
      hovered: hoverRow >= 0 ? hoverToken : -1,
      selected,
      partners,
      matches,
      subword,
      density,
      radius: RADIUS,
      size: (t, emphasis) => {
        if (!emphasis) return [atlas.boxes[4 * t + 2] / dpr, LABEL_H];
        c.font = haloFont(theme, emphasis === "main");
        return [c.measureText(tokens[t] ?? "").width + 3, emphasis === "main" ? 17 : 15];
      },
      labelH: LABEL_H,
    });
  }

  /** Draw the whole plot into `c` at `scale` device px per CSS px (the screen, or a 2x export). */
  function paint(c, scale, exporting) {
    if (!theme || !width) return;
    const t0 = performance.now();
    c.setTransform(scale, 0, 0, scale, 0, 0);
    c.fillStyle = theme.panel;
    c.fillRect(0, 0, width, height);
    const { w, h } = plotSize();
    if (!domains || m === 0) {
      c.fillStyle = theme.muted;
      c.font = `12px ${theme.font}`;
      c.textAlign = "center";
      c.textBaseline = "middle";
      c.fillText(tokens.length ? "waiting for the first t-SNE frame…" : "no text yet", width / 2, height / 2);
      if (!exporting) writeBoxes([]);
      return;
    }
    const x = transform.rescaleX(scaleLinear(domains.x, [MARGIN.left, MARGIN.left + w]));
    const y = transform.rescaleY(scaleLinear(domains.y, [MARGIN.top + h, MARGIN.top]));
    drawAxes(c, theme, x, y, w, h, quantile ? knots : null);

    c.save();
    c.beginPath();
    c.rect(MARGIN.left, MARGIN.top, w, h);
    c.clip();
    // far outliers (robustExtent) are pinned to the plot's edge while the view follows the data
    const pin = pinOutliers && !userZoomed;
    pinned.length = 0;
    for (let r = 0; r < m; r++) {
      sx[r] = x(cur[2 * r]);
      sy[r] = y(cur[2 * r + 1]);
      if (!pin) continue;
      const px = Math.min(MARGIN.left + w - 4, Math.max(MARGIN.left + 4, sx[r]));
      const py = Math.min(MARGIN.top + h - 4, Math.max(MARGIN.top + 4, sy[r]));
      if (px !== sx[r] || py !== sy[r]) {
        sx[r] = px;
        sy[r] = py;
        pinned.push(r);
      }
    }
    const hoverRow = hoverToken >= 0 && hoverToken < tokenRow.length ? tokenRow[hoverToken] : -1;
    const all = hoverRow >= 0 ? partnersFor(hoverToken) : { to: [], from: [], near: [], hidden: false };
    const shown = shownPartners(all, direction);
    const partners = partnerTokens(shown).filter((t) => tokenRow[t] >= 0);
    if (hoverRow >= 0) {
      const at = (list) => list.map((p) => ({ x: sx[tokenRow[p.token]], y: sy[tokenRow[p.token]], weight: p.weight }));
      const hx = sx[hoverRow];
      const hy = sy[hoverRow];
      drawEdges(c, hx, hy, at(shown.near), { colour: theme.highlight });
      drawEdges(c, hx, hy, at(shown.from), { colour: theme.highlight, dash: [5, 4], arrow: "in" });
      drawEdges(c, hx, hy, at(shown.to), { colour: theme.accent, arrow: "out" });
    }

    const points = { sx, sy, m, kept, tokenRow, colours, special };
    const dim = selected.size > 0 || hoverRow >= 0;
    // on screen the filled points are rasterised in script (js/scatter-paint.js): canvas arcs cost little
    // in the script but 3-4 µs each in chromium's raster at the commit (30-40 ms at 8192 points, never in
    // data-paint-ms); an export draws them all as arcs
    const box = { x0: MARGIN.left, y0: MARGIN.top, x1: MARGIN.left + w, y1: MARGIN.top + h };
    const rastered =
      !exporting && pointRaster.draw(c, theme, scale, box, points, (tok) => (!dim || selected.has(tok) ? 1 : 0.3));
    drawPoints(c, theme, points, { selected, matches, dim, filled: !rastered });
    drawPinned(c, theme, pinned, sx, sy);

    const boxes = layoutLabels(c, hoverRow, partners, w, h, scale);
    const emphasised = new Set([hoverToken, ...partners]);
    c.globalAlpha = hoverRow >= 0 ? 0.45 : 0.85;
    for (const b of boxes) {
      if (emphasised.has(b.key)) continue;
      const a = 4 * b.key;
      c.drawImage(
        atlas.canvas,
        atlas.boxes[a],
        atlas.boxes[a + 1],
        atlas.boxes[a + 2],
        atlas.boxes[a + 3],
        b.x,
        b.y,
        b.w,
        b.h,
      );
    }
    c.globalAlpha = 1;
    if (hoverRow >= 0) {
      for (const t of partners)
        ring(c, sx[tokenRow[t]], sy[tokenRow[t]], colours[t] || theme.muted, theme.highlight, false);
      ring(c, sx[hoverRow], sy[hoverRow], colours[hoverToken] || theme.muted, theme.fg, true);
      for (const b of boxes) {
        if (emphasised.has(b.key)) haloText(c, theme, tokens[b.key] ?? "", b.x, b.y, b.h, b.key === hoverToken);
      }
    }
    if (lassoPolygon && !exporting) drawLasso(c, theme, lassoPolygon);
    c.restore();
    if (exporting) return;
    const ms = performance.now() - t0;
    paintMs += (ms - paintMs) / 4;
    lastBoxes = boxes;
    if (canvas.dataset.pinned !== String(pinned.length)) canvas.dataset.pinned = String(pinned.length);
    writeBoxes(boxes);
    hasDrawnPoints = true;
    if (!freshFrame) return;
    // a frame counts once, at the first paint that shows it: frames that arrive between two paints are
    // drawn as one, and the tween's in-between paints and hover or zoom repaints are not counted
    freshFrame = false;
    framesDrawn++;
    onDraw(framesDrawn, ms, shownTag);
  }

  /** Publish the drawn label boxes as data-label-boxes (throttled; the last draw always lands). */
  function writeBoxes(boxes) {
    boxesPending = boxes;
    const flush = () => {
      boxesTimer = 0;
      boxesWritten = performance.now();
      const r = (v) => Math.round(v * 10) / 10;
      canvas.dataset.labelBoxes = JSON.stringify(boxesPending.map((b) => [r(b.x), r(b.y), r(b.w), r(b.h)]));
      canvas.dataset.labelTokens = JSON.stringify(boxesPending.map((b) => b.key));
    };
    if (performance.now() - boxesWritten >= BOXES_EVERY_MS) flush();
    else if (!boxesTimer) boxesTimer = setTimeout(flush, BOXES_EVERY_MS);
  }

  /** Make a received frame the shown one (positions, targets, tween). */
  function applyFrame({ data, count, animate, tag }) {
    const now = performance.now();
    ensureCapacity(count);
    // a tween only when frames come far enough apart and paints are cheap (js/schedule.js, tweenMs)
    const tween = animate && hasDrawnPoints && count === m ? tweenMs(now - lastFrameAt, paintMs) : 0;
    const canTween = tween > 0;
    if (canTween) from.set(cur.subarray(0, 2 * count));
    m = count;
    raw = data;
    project();
    if (canTween) {
      tweenStart = now;
      tweenDuration = tween;
    } else {
      cur.set(to.subarray(0, 2 * m));
      tweenDuration = 0;
      if (!userZoomed && !hasDrawnPoints) domains = target;
    }
    lastFrameAt = now;
    shownTag = tag;
    freshFrame = true;
  }

  function pointAt(event) {
    const rect = canvas.getBoundingClientRect();
    const r = nearestPoint(sx, sy, m, event.clientX - rect.left, event.clientY - rect.top, 10);
    return r >= 0 ? kept[r] : -1;
  }
  const onMove = (event) => {
    if (!lasso.active()) onHover(pointAt(event), event);
  };
  const onLeave = (event) => onHover(-1, event);
  canvas.addEventListener("mousemove", onMove);
  canvas.addEventListener("mouseleave", onLeave);

  function resetView() {
    userZoomed = false;
    selection.call(zoom.transform, zoomIdentity);
    request();
  }

  return {
    canvas,
    /** Token strings, special flags and which tokens continue a word (labelled last). */
    setTokens(tokenList, specialList, isSubword = (_t) => false) {
      tokens = tokenList;
      special = specialList;
      subword = isSubword;
      atlas = null;
      request();
    },
    setColours(list) {
      colours = list;
      request();
    },
    setKept(list, rows) {
      kept = list;
      tokenRow = rows;
    },
    /** Where the hovered token's partners come from (js/partners.js) and which directions to draw. */
    setPartners(provider, edgeDirection) {
      partnersFor = provider;
      direction = edgeDirection || "both";
      request();
    },
    setSelection(set) {
      selected = set;
      request();
    },
    setMatches(set) {
      matches = set;
      request();
    },
    setLabelDensity(value) {
      density = Math.max(0, Math.min(1, Number.isFinite(value) ? value : 0.5));
      request();
    },
    setBoxMode(on) {
      boxMode = Boolean(on);
      canvas.classList.toggle("hs-box-mode", boxMode);
    },
    /**
     * Show a frame (interleaved (m, 2) Float32Array in original units) at the next animation frame, after
     * the frames still waiting; animate from the last one. A frame with another `tag` (a new run) drops
     * the waiting ones.
     */
    setFrame(data, count, { animate = true, tag = null } = {}) {
      if (waiting.length && waiting[waiting.length - 1].tag !== tag) waiting.length = 0;
      if (waiting.length >= MAX_WAITING) waiting.shift();
      waiting.push({ data, count, animate, tag });
      request();
    },
    clear() {
      waiting.length = 0;
      m = 0;
      raw = null;
      hasDrawnPoints = false;
      domains = null;
      request();
    },
    setQuantile(on, k) {
      if (on === quantile && k === quantileK) return;
      const switched = on !== quantile;
      quantile = on;
      quantileK = k;
      project();
      cur.set(to.subarray(0, 2 * m));
      tweenDuration = 0;
      if (switched) {
        domains = target;
        resetView();
      }
      request();
    },
    setHover(token) {
      if (token === hoverToken) return;
      hoverToken = token;
      request();
    },
    setTheme(t) {
      theme = t;
      atlas = null;
      request();
    },
    /** The current view drawn afresh on a new canvas at `scale` device px per CSS px (an export). */
    render(scale) {
      const out = document.createElement("canvas");
      out.width = Math.round(width * scale);
      out.height = Math.round(height * scale);
      paint(out.getContext("2d"), scale, true);
      atlas = null; // built at the export's scale: rebuild for the screen
      request();
      return out;
    },
    get size() {
      return { width, height };
    },
    /** What is on screen, for the SVG export: points and label boxes in CSS px. */
    snapshot() {
      const points = [];
      for (let r = 0; r < m; r++) {
        const t = kept[r];
        points.push({ x: sx[r], y: sy[r], colour: colours[t] || "#888", special: Boolean(special[t]), token: t });
      }
      const labels = lastBoxes.map((b) => ({ ...b, text: tokens[b.key] ?? "" }));
      return { width, height, margin: MARGIN, radius: RADIUS, points, labels };
    },
    resize,
    resetView,
    get pointCount() {
      return m;
    },
    get framesDrawn() {
      return framesDrawn;
    },
    destroy() {
      if (rafId) cancelAnimationFrame(rafId);
      rafId = 0;
      clearTimeout(boxesTimer);
      selection.on(".zoom", null);
      lasso.destroy();
      canvas.removeEventListener("dblclick", onDblClick);
      canvas.removeEventListener("mousemove", onMove);
      canvas.removeEventListener("mouseleave", onLeave);
    },
  };
}
