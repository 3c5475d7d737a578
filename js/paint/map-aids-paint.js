// Canvas painting of the map's reading aids (js/views/scatter/map-aids.js): the density contours under the points,
// thin lines in the muted colour, denser levels darker; and the clusters' labels over everything, bold with a halo,
// each skipped where it would cover a larger cluster's label.

/**
 * @typedef {import("../lib/theme.js").Theme} Theme
 * @typedef {{value: number, coordinates: number[][][][]}} Contour a density level: polygons of rings of [x, y] in
 *   CSS px of the canvas
 * @typedef {{label: string, x: number, y: number, size: number, cluster: number}} ClusterPlace a cluster's label at
 *   the member nearest the members' centre (CSS px), and its count of members
 */

const LABEL_FONT = "700 12px";

/**
 * The contours' lines.
 * @param {CanvasRenderingContext2D} c
 * @param {Theme} theme
 * @param {Contour[]} contours
 */
export function drawContours(c, theme, contours) {
  c.save();
  c.strokeStyle = theme.muted;
  c.lineWidth = 1;
  contours.forEach((level, i) => {
    c.globalAlpha = 0.18 + (0.5 * (i + 1)) / Math.max(1, contours.length);
    c.beginPath();
    for (const polygon of level.coordinates) {
      for (const ring of polygon) {
        ring.forEach(([x, y], k) => (k ? c.lineTo(x, y) : c.moveTo(x, y)));
        c.closePath();
      }
    }
    c.stroke();
  });
  c.restore();
}

/**
 * The clusters' labels, centred on their places, largest clusters first; one that would overlap a label already
 * drawn is left out. Returns the labels drawn, with their boxes (CSS px).
 * @param {CanvasRenderingContext2D} c
 * @param {Theme} theme
 * @param {ClusterPlace[]} places
 */
export function drawClusterLabels(c, theme, places) {
  /** @type {{label: string, x: number, y: number, w: number, h: number}[]} */
  const drawn = [];
  c.save();
  c.font = `${LABEL_FONT} ${theme.font}`;
  c.textAlign = "center";
  c.textBaseline = "middle";
  c.lineJoin = "round";
  for (const { label, x, y } of places) {
    const w = c.measureText(label).width + 8;
    const box = { label, x: x - w / 2, y: y - 18, w, h: 16 };
    const clash = drawn.some((b) => box.x < b.x + b.w && b.x < box.x + w && box.y < b.y + b.h && b.y < box.y + box.h);
    if (clash) continue;
    c.lineWidth = 4;
    c.strokeStyle = theme.panel;
    c.strokeText(label, x, box.y + box.h / 2);
    c.fillStyle = theme.fg;
    c.fillText(label, x, box.y + box.h / 2);
    drawn.push(box);
  }
  c.restore();
  return drawn;
}
