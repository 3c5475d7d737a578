// The t-SNE scatter: one point per kept token, coloured by its position in the text, labelled with its
// text, animated between received frames, autoscaled to the data until the user zooms (d3-zoom), with
// linear or quantile-equidistant axes and the hovered token's strongest attention edges.

import { scaleLinear } from "d3-scale";
import { format } from "d3-format";
import { select } from "d3-selection";
import { zoom as d3zoom, zoomIdentity } from "d3-zoom";
import {
  easeDomains, fitDomains, frameExtent, nearestPoint, quantileRescaleFrame, quantileTicks, topEdges,
} from "./layout.js";

const MARGIN = { top: 10, right: 12, bottom: 24, left: 48 };
const LABEL_CAP = 400; // draw every label only when at most this many points are in view (the 271-token abstract: all)
const RADIUS = 3.6;
const QUANTILE_DOMAIN = [-0.04, 1.06];
const tickLabel = format(".3~g");

export function createScatter({ wrap, onHover, onDraw }) {
  const canvas = document.createElement("canvas");
  canvas.dataset.testid = "headsne-scatter";
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", "t-SNE map of the tokens");
  wrap.appendChild(canvas);
  const ctx = canvas.getContext("2d");

  let theme = null;
  let width = 0, height = 0; // CSS px
  let tokens = [], special = [], colours = [];
  let kept = [], tokenRow = new Int32Array(0);
  let edges = null, edgeK = 5;
  let quantile = false, quantileK = 100, knots = null;

  // positions (interleaved x, y) in display space: original units, or [0, 1] with quantile axes
  let m = 0;
  let raw = null; // the frame as received (original units)
  let from = new Float32Array(0), to = new Float32Array(0), cur = new Float32Array(0);
  let sx = new Float32Array(0), sy = new Float32Array(0); // screen positions of the last draw
  let tweenStart = 0, tweenDuration = 0, lastFrameAt = 0;
  let hasDrawnPoints = false;

  let domains = null; // displayed base domains {x, y}
  let target = null;
  let transform = zoomIdentity;
  let userZoomed = false;
  let hoverToken = -1;
  let rafId = 0;
  let atlas = null; // token labels pre-rendered once: drawImage per point is far cheaper than fillText
  let framesDrawn = 0;

  const zoom = d3zoom()
    .scaleExtent([0.25, 200])
    .filter((event) => (!event.ctrlKey || event.type === "wheel") && !event.button && event.type !== "dblclick")
    .on("zoom", (event) => {
      transform = event.transform;
      if (event.sourceEvent) userZoomed = true;
      request();
    });
  const selection = select(canvas).call(zoom);
  const onDblClick = () => resetView();
  canvas.addEventListener("dblclick", onDblClick);

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

  /** Render every token's label into one offscreen canvas; returns {canvas, boxes: [x, y, w, h] per token}. */
  function buildAtlas() {
    if (!theme || !tokens.length) return null;
    const dpr = window.devicePixelRatio || 1;
    const font = `10.5px ${theme.font}`;
    const measure = document.createElement("canvas").getContext("2d");
    measure.font = font;
    const lineH = Math.ceil(14 * dpr), maxW = 2048;
    const boxes = new Float32Array(4 * tokens.length);
    let x = 0, y = 0;
    tokens.forEach((tok, i) => {
      const w = Math.ceil((measure.measureText(tok).width + 2) * dpr);
      if (x + w > maxW) {
        x = 0;
        y += lineH;
      }
      boxes.set([x, y, w, lineH], 4 * i);
      x += w;
    });
    const c = document.createElement("canvas");
    c.width = maxW;
    c.height = Math.max(1, y + lineH);
    const actx = c.getContext("2d");
    actx.scale(dpr, dpr);
    actx.font = font;
    actx.textBaseline = "middle";
    actx.fillStyle = theme.fg;
    tokens.forEach((tok, i) => actx.fillText(tok, boxes[4 * i] / dpr + 1, (boxes[4 * i + 1] + lineH / 2) / dpr));
    return { canvas: c, boxes, dpr };
  }

  function plotSize() {
    return { w: Math.max(10, width - MARGIN.left - MARGIN.right), h: Math.max(10, height - MARGIN.top - MARGIN.bottom) };
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
      const extent = frameExtent(to, m);
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
    draw();
    if (busy) request();
  }

  function draw() {
    if (!theme || !width) return;
    const dpr = canvas.width / width;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = theme.panel;
    ctx.fillRect(0, 0, width, height);
    const { w, h } = plotSize();
    if (!domains || m === 0) {
      ctx.fillStyle = theme.muted;
      ctx.font = `12px ${theme.font}`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText(tokens.length ? "waiting for the first t-SNE frame…" : "no text yet", width / 2, height / 2);
      return;
    }
    const x = transform.rescaleX(scaleLinear(domains.x, [MARGIN.left, MARGIN.left + w]));
    const y = transform.rescaleY(scaleLinear(domains.y, [MARGIN.top + h, MARGIN.top]));
    drawAxes(x, y, w, h);

    ctx.save();
    ctx.beginPath();
    ctx.rect(MARGIN.left, MARGIN.top, w, h);
    ctx.clip();
    let inView = 0;
    for (let r = 0; r < m; r++) {
      const px = x(cur[2 * r]), py = y(cur[2 * r + 1]);
      sx[r] = px;
      sy[r] = py;
      if (px >= MARGIN.left && px <= MARGIN.left + w && py >= MARGIN.top && py <= MARGIN.top + h) inView++;
    }
    const hoverRow = hoverToken >= 0 && hoverToken < tokenRow.length ? tokenRow[hoverToken] : -1;
    const partners = hoverRow >= 0 ? topEdges(edges, hoverToken, edgeK, tokenRow) : [];
    drawEdges(hoverRow, partners);

    ctx.globalAlpha = hoverRow >= 0 ? 0.55 : 1;
    for (let r = 0; r < m; r++) {
      const tok = kept[r];
      ctx.beginPath();
      ctx.arc(sx[r], sy[r], RADIUS, 0, 2 * Math.PI);
      if (special[tok]) {
        ctx.strokeStyle = colours[tok] || theme.muted;
        ctx.lineWidth = 1.5;
        ctx.stroke();
      } else {
        ctx.fillStyle = colours[tok] || theme.muted;
        ctx.fill();
      }
    }
    if (inView <= LABEL_CAP) {
      if (!atlas || atlas.dpr !== (window.devicePixelRatio || 1)) atlas = buildAtlas();
      ctx.globalAlpha = hoverRow >= 0 ? 0.35 : 0.8;
      for (let r = 0; atlas && r < m; r++) {
        if (sx[r] < MARGIN.left - 40 || sx[r] > MARGIN.left + w || sy[r] < MARGIN.top || sy[r] > MARGIN.top + h) continue;
        const b = 4 * kept[r];
        const bw = atlas.boxes[b + 2], bh = atlas.boxes[b + 3];
        if (!bw) continue;
        ctx.drawImage(atlas.canvas, atlas.boxes[b], atlas.boxes[b + 1], bw, bh,
          sx[r] + RADIUS + 1, sy[r] - bh / atlas.dpr / 2, bw / atlas.dpr, bh / atlas.dpr);
      }
    }
    ctx.globalAlpha = 1;
    if (hoverRow >= 0) {
      for (const p of partners) haloLabel(tokenRow[p.token], false);
      haloLabel(hoverRow, true);
    }
    ctx.restore();
    framesDrawn++;
    hasDrawnPoints = true;
    onDraw(framesDrawn);
  }

  function drawEdges(hoverRow, partners) {
    if (hoverRow < 0 || !partners.length) return;
    const wmax = partners[0].weight;
    ctx.strokeStyle = theme.highlight;
    ctx.lineCap = "round";
    for (const p of partners) {
      const r = tokenRow[p.token];
      ctx.globalAlpha = 0.35 + 0.65 * (p.weight / wmax);
      ctx.lineWidth = 0.75 + 3 * (p.weight / wmax);
      ctx.beginPath();
      ctx.moveTo(sx[hoverRow], sy[hoverRow]);
      ctx.lineTo(sx[r], sy[r]);
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
  }

  /** A point ring and a label with a background halo, for the hovered token and its partners. */
  function haloLabel(r, main) {
    const tok = kept[r];
    ctx.beginPath();
    ctx.arc(sx[r], sy[r], main ? RADIUS + 3 : RADIUS + 1.5, 0, 2 * Math.PI);
    ctx.fillStyle = colours[tok] || theme.muted;
    ctx.fill();
    ctx.strokeStyle = main ? theme.fg : theme.highlight;
    ctx.lineWidth = main ? 2 : 1.5;
    ctx.stroke();
    ctx.font = `${main ? "700 12.5px" : "600 11px"} ${theme.font}`;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    ctx.lineJoin = "round";
    ctx.lineWidth = 3;
    ctx.strokeStyle = theme.panel;
    const text = tokens[tok] ?? "";
    ctx.strokeText(text, sx[r] + RADIUS + 5, sy[r]);
    ctx.fillStyle = theme.fg;
    ctx.fillText(text, sx[r] + RADIUS + 5, sy[r]);
  }

  function drawAxes(x, y, w, h) {
    let xt, yt;
    if (quantile && knots) {
      xt = quantileTicks(knots.x, ...x.domain(), 6).map((t) => ({ pos: x(t.t), text: tickLabel(t.value) }));
      yt = quantileTicks(knots.y, ...y.domain(), 6).map((t) => ({ pos: y(t.t), text: tickLabel(t.value) }));
    } else {
      const fx = x.tickFormat(6), fy = y.tickFormat(6);
      xt = x.ticks(6).map((v) => ({ pos: x(v), text: fx(v) }));
      yt = y.ticks(6).map((v) => ({ pos: y(v), text: fy(v) }));
    }
    ctx.lineWidth = 1;
    ctx.strokeStyle = theme.border;
    ctx.globalAlpha = 0.55;
    ctx.beginPath();
    for (const t of xt) {
      ctx.moveTo(Math.round(t.pos) + 0.5, MARGIN.top);
      ctx.lineTo(Math.round(t.pos) + 0.5, MARGIN.top + h);
    }
    for (const t of yt) {
      ctx.moveTo(MARGIN.left, Math.round(t.pos) + 0.5);
      ctx.lineTo(MARGIN.left + w, Math.round(t.pos) + 0.5);
    }
    ctx.stroke();
    ctx.globalAlpha = 1;
    ctx.strokeRect(MARGIN.left + 0.5, MARGIN.top + 0.5, w - 1, h - 1);
    ctx.fillStyle = theme.muted;
    ctx.font = `10px ${theme.font}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (const t of xt) ctx.fillText(t.text, t.pos, MARGIN.top + h + 5);
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const t of yt) ctx.fillText(t.text, MARGIN.left - 5, t.pos);
  }

  function pointAt(event) {
    const rect = canvas.getBoundingClientRect();
    const r = nearestPoint(sx, sy, m, event.clientX - rect.left, event.clientY - rect.top, 10);
    return r >= 0 ? kept[r] : -1;
  }
  const onMove = (event) => onHover(pointAt(event), event);
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
    /** Token strings, special flags and per-token colours of a new text. */
    setTokens(tokenList, specialList, colourList) {
      tokens = tokenList;
      special = specialList;
      colours = colourList;
      atlas = null;
      request();
    },
    setKept(list, rows) {
      kept = list;
      tokenRow = rows;
    },
    setEdges(e, k) {
      edges = e;
      edgeK = k;
      request();
    },
    /** Show a frame (interleaved (m, 2) Float32Array in original units); animate from the last one. */
    setFrame(data, count, { animate = true } = {}) {
      const now = performance.now();
      ensureCapacity(count);
      const canTween = animate && hasDrawnPoints && count === m;
      if (canTween) from.set(cur.subarray(0, 2 * count));
      m = count;
      raw = data;
      project();
      if (canTween) {
        tweenStart = now;
        tweenDuration = Math.min(140, Math.max(0, now - lastFrameAt));
      } else {
        cur.set(to.subarray(0, 2 * m));
        tweenDuration = 0;
        if (!userZoomed && !hasDrawnPoints) domains = target;
      }
      lastFrameAt = now;
      request();
    },
    clear() {
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
    partnersOf: (token) => topEdges(edges, token, edgeK, tokenRow),
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
      selection.on(".zoom", null);
      canvas.removeEventListener("dblclick", onDblClick);
      canvas.removeEventListener("mousemove", onMove);
      canvas.removeEventListener("mouseleave", onLeave);
    },
  };
}
