// The scatter's plain labels, each rendered once into a cache canvas and drawn from it (drawImage per
// label is far cheaper than fillText): rendered when first drawn, not every token's up front (65536
// tokens took seconds and a canvas beyond the browser's limits), in a canvas of fixed size that starts
// over when full. Widths are measured once per distinct string.

const ATLAS_W = 2048; // device px
const ATLAS_H = 1024;

/**
 * Rows ("shelves") of boxes of one height, left to right, top to bottom, in a width x height area:
 * `place(w)` the top-left corner of a new box of w px, or null when it is full.
 * @param {number} width
 * @param {number} height
 * @param {number} lineH
 */
export function shelfPacker(width, height, lineH) {
  let x = 0;
  let y = 0;
  return {
    /** @param {number} w */
    place(w) {
      if (w > width) return null;
      if (x + w > width) [x, y] = [0, y + lineH];
      if (y + lineH > height) return null;
      const at = [x, y];
      x += w;
      return at;
    },
    reset() {
      [x, y] = [0, 0];
    },
  };
}

/**
 * The label cache of one theme and scale: `width(text)` a label's box width in CSS px, `draw(c, text,
 * box)` a label into its box {x, y, w, h} (CSS px) of the context `c`.
 * @param {import("../lib/theme.js").Theme} theme
 * @param {number} dpr device px per CSS px
 * @param {number} lineHeight CSS px of a label's box
 */
export function createLabelAtlas(theme, dpr, lineHeight) {
  const font = `10.5px ${theme.font}`;
  const canvas = document.createElement("canvas");
  canvas.width = ATLAS_W;
  canvas.height = ATLAS_H;
  const c = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
  const lineH = Math.ceil(lineHeight * dpr);
  const packer = shelfPacker(ATLAS_W, ATLAS_H, lineH);
  /** @type {Map<string, number>} device px */
  const widths = new Map();
  /** @type {Map<string, number[]>} [x, y] in the canvas, device px */
  const slots = new Map();
  let renders = 0;

  /** @param {string} text */
  function deviceWidth(text) {
    let w = widths.get(text);
    if (w === undefined) {
      c.font = font;
      w = Math.ceil((c.measureText(text).width + 2) * dpr);
      widths.set(text, w);
    }
    return w;
  }

  /** The label's [x, y] in the canvas, rendered there first if needed. @param {string} text */
  function slot(text) {
    let at = slots.get(text);
    if (at) return at;
    const w = Math.min(deviceWidth(text), ATLAS_W);
    let placed = packer.place(w);
    if (!placed) {
      // full: start over (what this frame drew from it is on the screen already)
      c.setTransform(1, 0, 0, 1, 0, 0);
      c.clearRect(0, 0, ATLAS_W, ATLAS_H);
      slots.clear();
      packer.reset();
      placed = /** @type {number[]} */ (packer.place(w));
    }
    at = placed;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.font = font;
    c.textBaseline = "middle";
    c.fillStyle = theme.fg;
    c.save();
    c.beginPath();
    c.rect(at[0] / dpr, at[1] / dpr, w / dpr, lineH / dpr);
    c.clip();
    c.fillText(text, at[0] / dpr + 1, (at[1] + lineH / 2) / dpr);
    c.restore();
    slots.set(text, at);
    renders++;
    return at;
  }

  return {
    dpr,
    /** A label's box width in CSS px. @param {string} text */
    width: (text) => deviceWidth(text) / dpr,
    /**
     * @param {CanvasRenderingContext2D} target
     * @param {string} text
     * @param {{x: number, y: number, w: number, h: number}} box CSS px
     */
    draw(target, text, box) {
      const [x, y] = slot(text);
      const w = Math.min(deviceWidth(text), ATLAS_W);
      target.drawImage(canvas, x, y, w, lineH, box.x, box.y, box.w, box.h);
    },
    /** Labels rendered so far (the tests count them). */
    get renders() {
      return renders;
    },
  };
}
