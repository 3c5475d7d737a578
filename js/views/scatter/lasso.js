// Lasso (shift + drag) and box (drag in box mode) selection on a canvas: tracks the pointer, reports the
// growing polygon for drawing and the final one (CSS px relative to the canvas) when the button is let go.

/**
 * @param {{canvas: HTMLCanvasElement, boxMode: () => boolean,
 *   onChange: (polygon: [number, number][] | null, box: boolean) => void,
 *   onDone: (polygon: [number, number][], box: boolean, event: MouseEvent) => void}} options
 */
export function createLasso({ canvas, boxMode, onChange, onDone }) {
  /** @type {{points: [number, number][], box: boolean} | null} */
  let drag = null;
  const at = (/** @type {MouseEvent} */ event) => {
    const rect = canvas.getBoundingClientRect();
    return /** @type {[number, number]} */ ([event.clientX - rect.left, event.clientY - rect.top]);
  };
  const polygon = () => {
    if (!drag) return null;
    if (!drag.box) return drag.points;
    const [[x0, y0]] = drag.points;
    const [x1, y1] = drag.points[drag.points.length - 1];
    return /** @type {[number, number][]} */ ([
      [x0, y0],
      [x1, y0],
      [x1, y1],
      [x0, y1],
    ]);
  };
  const onMove = (/** @type {MouseEvent} */ event) => {
    if (!drag) return;
    const p = at(event);
    const last = drag.points[drag.points.length - 1];
    if (Math.hypot(p[0] - last[0], p[1] - last[1]) < 2) return;
    if (drag.box) drag.points = [drag.points[0], p];
    else drag.points.push(p);
    onChange(polygon(), drag.box);
    event.preventDefault();
  };
  const onUp = (/** @type {MouseEvent} */ event) => {
    if (!drag) return;
    onMove(event);
    const done = /** @type {[number, number][]} */ (polygon());
    const box = drag.box;
    drag = null;
    window.removeEventListener("mousemove", onMove);
    window.removeEventListener("mouseup", onUp);
    onChange(null, box);
    const [x0, y0] = done[0];
    const moved = done.some(([x, y]) => Math.hypot(x - x0, y - y0) >= 4);
    if (moved) onDone(done, box, event);
  };
  const onDown = (/** @type {MouseEvent} */ event) => {
    if (event.button !== 0 || !(event.shiftKey || boxMode())) return;
    drag = { points: [at(event)], box: !event.shiftKey };
    window.addEventListener("mousemove", onMove);
    window.addEventListener("mouseup", onUp);
    event.preventDefault();
    event.stopPropagation();
  };
  canvas.addEventListener("mousedown", onDown);
  return {
    /** Whether a lasso or box is being dragged. */
    active: () => drag != null,
    destroy() {
      canvas.removeEventListener("mousedown", onDown);
      window.removeEventListener("mousemove", onMove);
      window.removeEventListener("mouseup", onUp);
    },
  };
}
