// The hovered token's syntax in the map: an arc to its word's syntactic head (solid) and one to each of its word's
// dependents (dashed), bowed to one side so that they never hide the straight attention edges they may share.

/**
 * A quadratic arc from (x0, y0) to (x1, y1), bowed by a quarter of its length to its left.
 * @param {CanvasRenderingContext2D} c
 * @param {number} x0 @param {number} y0 @param {number} x1 @param {number} y1
 */
function arc(c, x0, y0, x1, y1) {
  const [mx, my] = [(x0 + x1) / 2, (y0 + y1) / 2];
  c.beginPath();
  c.moveTo(x0, y0);
  c.quadraticCurveTo(mx - (y1 - y0) / 4, my + (x1 - x0) / 4, x1, y1);
  c.stroke();
}

/**
 * Draw the hovered token's syntax arcs (`scene.syntax`); returns how many were drawn.
 * @param {CanvasRenderingContext2D} c
 * @param {{syntax?: {head: number, dependents: number[]}, points: {sx: Float32Array, sy: Float32Array} | null,
 *   hoverRow: number, theme: import("../lib/theme.js").Theme}} scene the map's (js/paint/scatter-canvas.js Scene)
 */
export function drawSyntaxArcs(c, scene) {
  const { syntax, points, hoverRow, theme } = scene;
  if (!syntax || !points || hoverRow < 0) return 0;
  const { sx, sy } = points;
  const [x0, y0] = [sx[hoverRow], sy[hoverRow]];
  c.save();
  c.strokeStyle = theme.fg;
  c.globalAlpha = 0.8;
  c.lineWidth = 1.75;
  if (syntax.head >= 0) arc(c, x0, y0, sx[syntax.head], sy[syntax.head]);
  c.setLineDash([2, 3]);
  for (const row of syntax.dependents) arc(c, sx[row], sy[row], x0, y0);
  c.restore();
  return (syntax.head >= 0 ? 1 : 0) + syntax.dependents.length;
}
