// Map reading aids (issue 52, after Embedding Atlas): the density contours of the points as drawn (d3-contour's
// kernel density on the plot, in CSS px) and where the labels of Python's clusters go (`clusters`: a density
// clustering of the 2-D map, each cluster named by its most characteristic tokens or senses). Both are computed from
// the screen positions, so they hold for linear and quantile axes and any zoom. Contours cost a pass over the points
// and a blur of a grid of the plot: they are computed only while no run streams, and again only when the points
// moved on screen (`createMapAids` keeps the last).

import { contourDensity } from "d3-contour";

export const CONTOUR_LEVELS = 8;
const CELL = 4; // CSS px of the density grid's cells

/**
 * @typedef {{sx: ArrayLike<number>, sy: ArrayLike<number>, m: number}} ScreenPoints
 * @typedef {{x0: number, y0: number, x1: number, y1: number}} Box
 * @typedef {import("../../paint/map-aids-paint.js").Contour} Contour
 * @typedef {import("../../paint/map-aids-paint.js").ClusterPlace} ClusterPlace
 * @typedef {{labels: string[], members: {data: ArrayLike<number>, shape: number[]} | null}} Clusters the decoded
 *   `clusters` trait
 */

/**
 * The density contours of the points inside `plot`: CONTOUR_LEVELS levels of a Gaussian kernel density whose
 * bandwidth is a 28th of the plot's smaller side.
 * @param {ScreenPoints} points
 * @param {Box} plot
 * @returns {Contour[]}
 */
export function densityContours(points, plot) {
  const w = Math.max(1, plot.x1 - plot.x0);
  const h = Math.max(1, plot.y1 - plot.y0);
  if (points.m < 3) return [];
  const rows = Array.from({ length: points.m }, (_, r) => r);
  const levels = contourDensity()
    .x((/** @type {number} */ r) => points.sx[r] - plot.x0)
    .y((/** @type {number} */ r) => points.sy[r] - plot.y0)
    .size([w, h])
    .cellSize(CELL)
    .bandwidth(Math.max(4, Math.min(w, h) / 28))
    .thresholds(CONTOUR_LEVELS)(rows);
  return levels.map((level) => ({
    value: level.value,
    coordinates: level.coordinates.map((polygon) =>
      polygon.map((ring) => ring.map(([x, y]) => [x + plot.x0, y + plot.y0])),
    ),
  }));
}

/**
 * Where each cluster's label goes: at the member point nearest the mean of its members' screen positions (a point
 * of the cluster, never the empty middle of a ring), largest clusters first; none when `members` is not one entry
 * per point (a frame of another run) or a cluster has no label.
 * @param {Clusters | null} clusters
 * @param {ScreenPoints} points
 * @returns {ClusterPlace[]}
 */
export function clusterPlaces(clusters, points) {
  const members = clusters?.members?.data;
  if (!clusters || !members || members.length !== points.m || !clusters.labels.length) return [];
  const c = clusters.labels.length;
  const { mean, count } = memberMeans(members, c, points);
  const best = new Int32Array(c).fill(-1);
  const dist = new Float64Array(c).fill(Infinity);
  for (let r = 0; r < points.m; r++) {
    const k = members[r];
    if (!(k >= 0 && k < c)) continue;
    const d = Math.hypot(points.sx[r] - mean[2 * k], points.sy[r] - mean[2 * k + 1]);
    if (d < dist[k]) [dist[k], best[k]] = [d, r];
  }
  const places = [];
  for (let k = 0; k < c; k++) {
    const label = String(clusters.labels[k] ?? "");
    if (best[k] >= 0 && label) {
      places.push({ label, x: points.sx[best[k]], y: points.sy[best[k]], size: count[k], cluster: k });
    }
  }
  return places.sort((a, b) => b.size - a.size || a.cluster - b.cluster);
}

/**
 * The mean screen position of each cluster's members, and their count (members outside [0, c) belong to none).
 * @param {ArrayLike<number>} members
 * @param {number} c
 * @param {ScreenPoints} points
 */
function memberMeans(members, c, points) {
  const mean = new Float64Array(2 * c);
  const count = new Float64Array(c);
  for (let r = 0; r < points.m; r++) {
    const k = members[r];
    if (!(k >= 0 && k < c)) continue;
    mean[2 * k] += points.sx[r];
    mean[2 * k + 1] += points.sy[r];
    count[k] += 1;
  }
  for (let k = 0; k < c; k++) {
    mean[2 * k] /= Math.max(1, count[k]);
    mean[2 * k + 1] /= Math.max(1, count[k]);
  }
  return { mean, count };
}

/**
 * The scene with its reading aids, as the state asks for them: the token clicked last (`pinned`, ringed: the one the
 * inspector shows), the density contours (`contours`) and the clusters' names (`cluster_labels`, from
 * `cluster_names` and the decoded `cluster_of`), neither of these two while a run streams (the contours would follow
 * every frame; the clusters are the last run's).
 * @param {import("../../paint/scatter-canvas.js").Scene | null} scene
 * @param {import("../../store/state.js").State} s
 * @param {ReturnType<typeof createMapAids>} aids
 */
export function withAids(scene, s, aids) {
  const points = scene?.points;
  if (!scene || !points) return scene;
  const pinnedRow = s.pinned >= 0 && s.pinned < s.rows.tokenRow.length ? s.rows.tokenRow[s.pinned] : -1;
  const pinned = pinnedRow >= 0 ? { ...scene, pinnedRow } : scene;
  if (s.state === "running") return pinned;
  const contours = s.contours ? aids.contours(points, scene.plot) : undefined;
  const clusters =
    s.cluster_labels !== false && s.clusterOf
      ? clusterPlaces({ labels: s.cluster_names ?? [], members: s.clusterOf }, points)
      : undefined;
  return contours || clusters ? { ...pinned, contours, clusters } : pinned;
}

/**
 * The contours of the points now on screen, computed again only when they moved (or the plot did).
 */
export function createMapAids() {
  let key = "";
  /** @type {Contour[]} */
  let contours = [];
  return {
    /**
     * @param {ScreenPoints} points
     * @param {Box} plot
     */
    contours(points, plot) {
      const { sx, sy, m } = points;
      const mid = m >> 1;
      const next = [m, sx[0], sy[0], sx[mid], sy[mid], sx[m - 1], sy[m - 1], plot.x0, plot.y0, plot.x1, plot.y1].join();
      if (next !== key) {
        key = next;
        contours = densityContours(points, plot);
      }
      return contours;
    },
  };
}
