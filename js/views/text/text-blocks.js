// The text strip drawn in blocks, only those near its scrolled view (virtualised): a text of 65536
// tokens is a few hundred block boxes, the ones in view (and a view's height above and below) filled
// with their spans, the others empty boxes of their measured or estimated height (up to ALL_UP_TO tokens
// every block is filled). A block ends at a line
// break once it has BLOCK_MIN tokens, else at a space between words from BLOCK_MAX tokens on (a text
// without line breaks gets one there), at the latest at 2 x BLOCK_MAX. The pure parts (blocks, the
// window) are tested in node; the strip's view (js/views/text/text.js) makes the spans.

const ALL_UP_TO = 4096; // tokens: a text this short has every block filled (find in page, copy work as ever)
const BLOCK_MIN = 128;
const BLOCK_MAX = 256;
const FALLBACK_VIEW_H = 150; // px: widget.css's max-height of the strip (no layout: node's DOM)
const FALLBACK_PX_PER_CHAR = 0.25; // px of height per character before a block was measured (21 px lines of 84)

/**
 * @typedef {{text: string, token: number, special?: boolean}} Piece js/lib/segments.js textSegments
 * @typedef {{start: number, end: number, first: number, last: number, chars: number}} Block pieces
 *   start .. end - 1; tokens first .. last - 1 (-1 .. -1: none); characters
 */

/**
 * The blocks of `pieces`: a block ends after a piece of text between tokens with a line break once it
 * holds `min` tokens, after one with a space once it holds `max`, or after its 2 x `max`-th token.
 * @param {Piece[]} pieces
 * @param {{min?: number, max?: number}} [sizes]
 * @returns {Block[]}
 */
export function textBlocks(pieces, { min = BLOCK_MIN, max = BLOCK_MAX } = {}) {
  /** @type {Block[]} */
  const blocks = [];
  let block = { start: 0, end: 0, first: -1, last: -1, chars: 0 };
  let tokens = 0;
  pieces.forEach((piece, i) => {
    block.chars += piece.text.length;
    if (piece.token >= 0) {
      if (block.first < 0) block.first = piece.token;
      block.last = piece.token + 1;
      tokens++;
    }
    const gap = piece.token < 0 ? piece.text : "";
    const end = (gap.includes("\n") && tokens >= min) || (/\s/.test(gap) && tokens >= max) || tokens >= 2 * max;
    if (end || i === pieces.length - 1) {
      blocks.push({ ...block, end: i + 1 });
      block = { start: i + 1, end: i + 1, first: -1, last: -1, chars: 0 };
      tokens = 0;
    }
  });
  return blocks;
}

/**
 * The blocks [b0, b1) to fill: those that meet the view (scrollTop .. scrollTop + viewH) widened by
 * `overscan` px each side, from the blocks' tops (`tops[b]`, `tops[B]` the whole height).
 * @param {ArrayLike<number>} tops
 * @param {number} scrollTop
 * @param {number} viewH
 * @param {number} overscan
 */
export function blockWindow(tops, scrollTop, viewH, overscan) {
  const B = tops.length - 1;
  const y0 = scrollTop - overscan;
  const y1 = scrollTop + viewH + overscan;
  // the first block whose bottom is below y0, the first whose top is at or below y1
  const search = (/** @type {(b: number) => boolean} */ past) => {
    let [lo, hi] = [0, B];
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (past(mid)) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  const b0 = search((b) => tops[b + 1] > y0);
  const b1 = Math.max(
    b0 + 1,
    search((b) => tops[b] >= y1),
  );
  return [Math.min(b0, Math.max(0, B - 1)), Math.min(b1, B)];
}

/**
 * The block that holds token `t`, or -1.
 * @param {Block[]} blocks
 * @param {number} t
 */
export function blockOf(blocks, t) {
  let [lo, hi] = [0, blocks.length - 1];
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const b = blocks[mid];
    if (b.first < 0 || t < b.first)
      hi = mid - 1; // a block without tokens is the last one
    else if (t >= b.last) lo = mid + 1;
    else return mid;
  }
  return -1;
}

/**
 * The virtualised strip in `container`: `build(pieces)` makes its blocks, `show(token)` fills the block
 * of a token and scrolls it into view; scrolling fills the blocks that come into view and empties those
 * that leave it. `fill(piece)` makes a piece's node, `emptied(first, last)` is told the tokens whose
 * spans left the DOM.
 * @param {HTMLElement} container
 * @param {{fill: (piece: Piece) => Node, emptied: (first: number, last: number) => void}} parts
 */
export function createTextBlocks(container, { fill, emptied }) {
  /** @type {Piece[]} */
  let pieces = [];
  /** @type {Block[]} */
  let blocks = [];
  /** @type {HTMLElement[]} */
  let boxes = [];
  let heights = new Float64Array(0); // measured (> 0) or 0
  let filled = [0, 0];
  let pxPerChar = FALLBACK_PX_PER_CHAR;
  let all = true; // a short text: every block filled

  const height = (/** @type {number} */ b) => heights[b] || Math.max(1, blocks[b].chars * pxPerChar);
  function tops() {
    const t = new Float64Array(blocks.length + 1);
    for (let b = 0; b < blocks.length; b++) t[b + 1] = t[b] + height(b);
    return t;
  }

  /** @param {number} b */
  function fillBlock(b) {
    const box = boxes[b];
    const fragment = document.createDocumentFragment();
    for (let i = blocks[b].start; i < blocks[b].end; i++) fragment.appendChild(fill(pieces[i]));
    box.replaceChildren(fragment);
    box.style.height = "";
    box.dataset.filled = "true";
  }
  /** @param {number} b */
  function emptyBlock(b) {
    const box = boxes[b];
    heights[b] = box.offsetHeight || heights[b];
    box.replaceChildren();
    box.style.height = `${height(b)}px`;
    delete box.dataset.filled;
    if (blocks[b].first >= 0) emptied(blocks[b].first, blocks[b].last);
  }
  /**
   * Learn the height of a character from the filled blocks (none without a layout); the empty blocks
   * never measured take the new estimate when it moved by more than 2%.
   */
  function measure() {
    let [h, chars] = [0, 0];
    for (let b = filled[0]; b < filled[1]; b++) {
      heights[b] = boxes[b].offsetHeight;
      if (heights[b] > 0) [h, chars] = [h + heights[b], chars + blocks[b].chars];
    }
    if (!(chars > 0) || Math.abs(h / chars - pxPerChar) <= 0.02 * pxPerChar) return;
    pxPerChar = h / chars;
    boxes.forEach((box, b) => {
      if (!heights[b] && (b < filled[0] || b >= filled[1])) box.style.height = `${height(b)}px`;
    });
  }

  /**
   * Fill the blocks in (and near) the view, empty the others that were filled; what was at the top of the
   * view stays there when blocks above it change height (the strip's own scroll anchoring: widget.css
   * turns the browser's off, which would follow other content).
   */
  function update() {
    if (!blocks.length) return;
    const viewH = container.clientHeight || FALLBACK_VIEW_H;
    const before = tops();
    const scrollTop = container.scrollTop;
    const [b0, b1] = all ? [0, blocks.length] : blockWindow(before, scrollTop, viewH, viewH);
    const anchor = blockWindow(before, scrollTop, 0, 0)[0];
    for (let b = filled[0]; b < filled[1]; b++) if (b < b0 || b >= b1) emptyBlock(b);
    for (let b = b0; b < b1; b++) if (b < filled[0] || b >= filled[1]) fillBlock(b);
    filled = [b0, b1];
    measure();
    const moved = tops()[anchor] - before[anchor];
    if (Math.abs(moved) >= 1) container.scrollTop = scrollTop + moved;
  }

  container.addEventListener("scroll", update);
  return {
    /** @param {Piece[]} next */
    build(next) {
      pieces = next;
      blocks = textBlocks(pieces);
      all = blocks.every((b) => b.last <= ALL_UP_TO);
      heights = new Float64Array(blocks.length);
      filled = [0, 0];
      boxes = blocks.map(() => document.createElement("div"));
      boxes.forEach((box, b) => {
        box.className = "hs-text-block";
        box.style.height = `${height(b)}px`;
      });
      container.replaceChildren(...boxes);
      update();
    },
    update,
    /** Fill the block of token `t` (scrolling the strip to it first when it is not filled). */
    show(/** @type {number} */ t) {
      const b = blockOf(blocks, t);
      // filling blocks measures them and moves what lies below: scroll again until it stays in view
      for (let tries = 0; tries < 3 && b >= 0 && !(b >= filled[0] && b < filled[1]); tries++) {
        container.scrollTop = Math.max(0, tops()[b] - (container.clientHeight || FALLBACK_VIEW_H) / 2);
        update();
      }
    },
    destroy: () => container.removeEventListener("scroll", update),
  };
}
