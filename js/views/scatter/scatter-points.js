// The scatter's points over time, without drawing: received frames waiting to be shown, the tween from
// the last frame to the new one, the display-space positions (original units, or [0, 1] with quantile
// axes), the autoscaled data domains and their animation, and the screen positions of the last draw
// (for hit testing and the lasso, whatever draws them). Until the user zooms, the view holds every point
// shown, from the first frame on: it grows at once when the points spread or move away (they move no
// faster than the tween between frames takes them) and eases in, in log-span, when they gather, drawing
// them to its middle (js/views/scatter/viewport.js approachDomains).

import { approachDomains, coverExtent, fitDomains, frameExtent } from "./viewport.js";
import { quantileRescaleFrame } from "../../lib/rescaling.js";
import { tweenMs } from "../../lib/schedule.js";

const QUANTILE_DOMAIN = [-0.04, 1.06];
const ZOOM_IN = 0.12; // share of the way (in log-span) towards the data's extent the view zooms in per display frame
const COVER_PAD = 0.04; // the least margin round the points (the target's is fitDomains' 0.06)
// Frames received but not yet shown: one is shown per animation frame, so two that arrive within one
// display frame (network jitter) are both shown, one display frame apart, instead of the first never.
// At most this many wait (a frame is shown at most this many display frames late); older ones are dropped.
const MAX_WAITING = 3;

/**
 * @typedef {{x: number[], y: number[]}} Domains
 * @typedef {import("../../store/state.js").ShownFrame} Frame
 * @typedef {{w: number, h: number}} PlotSize
 */

/** @param {Float32Array} a @param {number} count */
function grown(a, count) {
  const b = new Float32Array(2 * count);
  b.set(a.subarray(0, Math.min(a.length, b.length)));
  return b;
}

export class ScatterPoints {
  constructor() {
    this.m = 0; // rows shown
    /** @type {Float32Array | null} the frame as received (original units) */
    this.raw = null;
    this.from = new Float32Array(0);
    this.to = new Float32Array(0);
    this.cur = new Float32Array(0);
    this.sx = new Float32Array(0);
    this.sy = new Float32Array(0); // screen positions of the last draw (CSS px)
    this.outside = 0; // points outside the plot in the last draw (only when the user zoomed in)
    this.tweenStart = 0;
    this.tweenDuration = 0;
    this.lastFrameAt = 0;
    this.hasDrawnPoints = false;
    this.paintMs = 0; // main-thread ms of a screen paint with points, a running mean (decides the tween)
    /** @type {Domains | null} displayed base domains */
    this.domains = null;
    /** @type {Domains | null} */
    this.target = null;
    /** @type {{x: any, y: any} | null} quantile knots */
    this.knots = null;
    this.quantile = false;
    this.quantileK = 100;
    /** @type {Frame[]} received frames not shown yet, oldest first */
    this.waiting = [];
    this.shownTag = null; // tag of the frame on screen
    this.freshFrame = false; // a frame was applied since the last paint
  }

  /** @param {number} count */
  ensureCapacity(count) {
    if (this.cur.length >= 2 * count) return;
    this.from = grown(this.from, count);
    this.to = grown(this.to, count);
    this.cur = grown(this.cur, count);
    this.sx = new Float32Array(count);
    this.sy = new Float32Array(count);
  }

  /**
   * Queue a frame for the next animation frame, after the frames still waiting; a frame with another tag
   * (a new run) drops the waiting ones.
   * @param {Frame} frame
   */
  enqueue(frame) {
    const waiting = this.waiting;
    if (waiting.length && waiting[waiting.length - 1].tag !== frame.tag) waiting.length = 0;
    if (waiting.length >= MAX_WAITING) waiting.shift();
    waiting.push(frame);
  }

  /** No points (a new text, or the frame went empty). */
  clear() {
    this.waiting.length = 0;
    this.m = 0;
    this.raw = null;
    this.hasDrawnPoints = false;
    this.domains = null;
  }

  /**
   * Recompute the display-space targets `to` (and knots, target domains) from the raw frame.
   * @param {PlotSize} plot
   */
  project(plot) {
    if (!this.raw) return;
    if (this.quantile && this.m > 0) {
      this.knots = quantileRescaleFrame(this.raw, this.m, this.quantileK, this.to);
      this.target = { x: QUANTILE_DOMAIN, y: QUANTILE_DOMAIN };
      return;
    }
    this.knots = null;
    this.to.set(this.raw.subarray(0, 2 * this.m));
    const extent = frameExtent(this.to, this.m);
    if (extent) this.target = fitDomains(extent, plot.w, plot.h);
  }

  /**
   * Make a received frame the shown one (positions, targets, tween).
   * @param {Frame} frame
   * @param {{now: number, plot: PlotSize, userZoomed: boolean}} at
   */
  apply({ data, count, animate, tag }, { now, plot, userZoomed }) {
    this.ensureCapacity(count);
    // a tween only when frames come far enough apart and paints are cheap (js/lib/schedule.js, tweenMs)
    const tween =
      animate && this.hasDrawnPoints && count === this.m ? tweenMs(now - this.lastFrameAt, this.paintMs) : 0;
    if (tween > 0) this.from.set(this.cur.subarray(0, 2 * count));
    this.m = count;
    this.raw = data;
    this.project(plot);
    if (tween > 0) {
      this.tweenStart = now;
      this.tweenDuration = tween;
    } else {
      this.cur.set(this.to.subarray(0, 2 * this.m));
      this.tweenDuration = 0;
      if (!userZoomed && !this.hasDrawnPoints) this.domains = this.target;
    }
    this.lastFrameAt = now;
    this.shownTag = tag;
    this.freshFrame = true;
  }

  /**
   * One animation frame: show the next waiting frame, move the tween on, ease the domains towards the
   * data. Returns whether another animation frame is needed.
   * @param {{frameTime: number, now: number, plot: PlotSize, userZoomed: boolean}} at `frameTime`: the
   *   animation frame's time (the tween's clock), `now`: the time a frame is applied at
   */
  step({ frameTime, now, plot, userZoomed }) {
    let busy = false;
    const next = this.waiting.shift();
    if (next) {
      this.apply(next, { now, plot, userZoomed });
      if (this.waiting.length) busy = true;
    }
    if (this.tweenDuration > 0) {
      const t = Math.min(1, (frameTime - this.tweenStart) / this.tweenDuration);
      const e = t * (2 - t); // ease-out
      for (let i = 0; i < 2 * this.m; i++) this.cur[i] = this.from[i] + (this.to[i] - this.from[i]) * e;
      if (t < 1) busy = true;
      else this.tweenDuration = 0;
    }
    if (this.target && !userZoomed) {
      const [eased, settled] = approachDomains(this.domains, this.target, ZOOM_IN);
      const [domains, grown] = this.quantile ? [eased, false] : this.cover(eased, plot);
      this.domains = domains;
      if (!settled || grown) busy = true;
    } else if (!this.domains) {
      this.domains = this.target;
    }
    return busy;
  }

  /**
   * `domains` grown to hold every point as shown now (mid-tween too).
   * @param {Domains} domains
   * @param {PlotSize} plot
   */
  cover(domains, plot) {
    return coverExtent(domains, frameExtent(this.cur, this.m), plot.w, plot.h, COVER_PAD);
  }

  /**
   * Linear or quantile-equidistant axes with `k` quantiles; returns whether the axes' kind switched.
   * @param {boolean} on
   * @param {number} k
   * @param {PlotSize} plot
   */
  setQuantile(on, k, plot) {
    const switched = on !== this.quantile;
    this.quantile = on;
    this.quantileK = k;
    this.project(plot);
    this.cur.set(this.to.subarray(0, 2 * this.m));
    this.tweenDuration = 0;
    if (switched) this.domains = this.target;
    return switched;
  }

  /**
   * The screen positions (sx, sy) of the shown positions through the linear scales `x`, `y` (applied as
   * v * a + b: a call of a d3 scale per point and axis cost 2-6 ms a frame at 65536 points), and how many
   * fall outside the plot's box (CSS px).
   * @param {(v: number) => number} x
   * @param {(v: number) => number} y
   * @param {{x0: number, y0: number, x1: number, y1: number}} box
   */
  toScreen(x, y, box) {
    const { sx, sy, cur } = this;
    const [bx, by] = [x(0), y(0)];
    const [ax, ay] = [x(1) - bx, y(1) - by];
    let outside = 0;
    for (let r = 0; r < this.m; r++) {
      sx[r] = cur[2 * r] * ax + bx;
      sy[r] = cur[2 * r + 1] * ay + by;
      if (!(sx[r] >= box.x0 && sx[r] <= box.x1 && sy[r] >= box.y0 && sy[r] <= box.y1)) outside++;
    }
    this.outside = outside;
  }
}
