"""The map's clusters and their names (the widget's ``cluster_names`` / ``cluster_of``, drawn by the page when
``cluster_labels`` is on), computed from a finished run's 2-D embedding.

Clusters are the connected regions of a kernel density above a threshold (as Embedding Atlas's density clustering):
the points are binned on a square grid, smoothed with a Gaussian of the points' median distance to their k-th
neighbour (``scipy.ndimage.gaussian_filter``, a bandwidth that follows the map's own scale, so a rescaled or moved
frame gives the same clusters), and the cells above ``level`` times the median density at the points are labelled
by 8-connectivity (``scipy.ndimage.label``). A point belongs to the region of its cell; points in sparse cells and
regions of fewer than ``min_size`` points belong to none (-1). Chosen over single linkage cut at a distance, which
chains two groups through one stray point between them, and over Ward, whose cut needs a number of clusters and
whose linkage is n^2 in memory: here the cost is a grid of ``GRID`` ^ 2 cells, one k-d tree query of at most 2,048
points and the names' counts (measured below ``MAX_POINTS``).

The defaults (k = 4, ``level`` 0.4) were chosen on MiniLM's maps of the t-SNE abstract (271 tokens, 750 iterations):
a t-SNE map of one text is mostly a diffuse cloud with tight knots of related tokens, and a bandwidth of the 8th
neighbour at ``level`` 0.2 merged the whole of hidden layer 3's map into one cluster, where these give four named
knots ("t, s, mon", "ne", "techniques, technique", ...) and ten on hidden layer 5 ("of, is, on", "the, a, that",
"data, graphs, objects", ...); a diffuse map (attention 2.5) stays one unnamed cluster. Two planted Gaussian blobs
stay two clusters (about 85% of each blob's points in its cluster, the rest in none), one blob one cluster.

Each cluster is named by the words most over-represented in it: a word's score is its count in the cluster times
the log of its count ratio (its share of the cluster's points over its share of all points), so a word that fills a
cluster beats one seen once there and nowhere else; the best ``n_words`` of those at least 1.5 times as frequent
in the cluster as overall, joined by ", ".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

__all__ = ["GRID", "MAX_POINTS", "cluster_labels", "point_words"]

#: cells a side of the density grid
GRID = 128
#: above this many rows the widget names no clusters: the owner thread computes them when a run ends, and at about
#: 50 ms or less it need not be a background job. Measured (20 Gaussian blobs, Zipf tokens, median of 7 calls, 2
#: shared cores at load 7): 7.1 ms at 512 points, 23.5 at 4096, 40.1 at 8192, 84.9
#: at 16384
MAX_POINTS = 8192
_PROBES = 2048  # points whose k-th neighbour sets the bandwidth
_MIN_RATIO = 1.5  # a word's share in a cluster over its share overall, at least, to name the cluster
_WORD = re.compile(r"\w+", re.UNICODE)
_PIECE_MARKS = ("##", "\u0120", "\u2581")  # WordPiece continuation, byte-level BPE space, SentencePiece space


def point_words(tokens: Sequence[str], labels: Sequence[str] = ()) -> list[frozenset[str]]:
    """Each point's words: those of its label when ``labels`` has one for it, else its token without word-piece
    marks, lower-cased (punctuation counts as itself)."""
    known: dict[tuple[str, str], frozenset[str]] = {}
    words = []
    for i, token in enumerate(tokens):
        label = labels[i] if i < len(labels) and labels[i] else ""
        key = (token, label)
        if key not in known:
            known[key] = _words(token, label)
        words.append(known[key])
    return words


def _words(token: str, label: str) -> frozenset[str]:
    if label:
        return frozenset(w.lower() for w in _WORD.findall(label))
    for mark in _PIECE_MARKS:
        token = token.removeprefix(mark)
    token = token.strip().lower()
    return frozenset([token]) if token else frozenset()


def _regions(Y: np.ndarray, *, level: float, k: int) -> np.ndarray:
    """Each point's density region (-1 in a sparse cell), numbered from 0 in no particular order."""
    low, high = Y.min(axis=0), Y.max(axis=0)
    span = float((high - low).max())
    if not span > 0:
        return np.zeros(len(Y), dtype=np.int64)  # every point at one place: one region
    probes = Y[:: max(1, len(Y) // _PROBES)]  # the median over evenly spaced points: the tree query is the cost
    distances, _ = cKDTree(Y).query(probes, k=min(k, len(Y) - 1) + 1)
    bandwidth = float(np.median(distances[:, -1])) or span / GRID
    cell = span / (GRID - 1)
    ij = np.minimum(((Y - low) / cell).astype(np.int64), GRID - 1)
    counts = np.bincount(ij[:, 0] * GRID + ij[:, 1], minlength=GRID * GRID).reshape(GRID, GRID).astype(np.float64)
    density = ndimage.gaussian_filter(counts, sigma=bandwidth / cell, mode="constant")
    at_points = density[ij[:, 0], ij[:, 1]]
    regions, _ = ndimage.label(density > level * float(np.median(at_points)), structure=np.ones((3, 3)))
    return regions[ij[:, 0], ij[:, 1]].astype(np.int64) - 1


def _names(
    of: np.ndarray, words: list[frozenset[str]], counted: np.ndarray, n_clusters: int, n_words: int
) -> list[str]:
    """Each cluster's ``n_words`` most over-represented words (see the module doc), counted over the points
    ``counted``; words with letters or digits first, punctuation only when a cluster has nothing else."""
    vocabulary: dict[str, int] = {}
    points, ids = [], []
    for i in counted:
        for word in words[i]:
            points.append(i)
            ids.append(vocabulary.setdefault(word, len(vocabulary)))
    n_vocab = len(vocabulary)
    if not n_vocab:
        return [""] * n_clusters
    text = np.array(list(vocabulary))
    plain = np.array([_WORD.search(w) is None for w in text])
    ids_a, cluster = np.asarray(ids), of[np.asarray(points)]
    everywhere = np.bincount(ids_a, minlength=n_vocab)
    inside = np.bincount(cluster[cluster >= 0] * n_vocab + ids_a[cluster >= 0], minlength=n_clusters * n_vocab)
    sizes = np.bincount(of[counted][of[counted] >= 0], minlength=n_clusters)
    names = []
    for c in range(n_clusters):
        count = inside[c * n_vocab : (c + 1) * n_vocab]
        words_in = np.flatnonzero(count)
        ratio = (count[words_in] / max(sizes[c], 1)) / (everywhere[words_in] / len(counted))
        score = count[words_in] * np.log(np.maximum(ratio, 1e-300))
        over = ratio >= _MIN_RATIO
        best = words_in[over]
        order = np.lexsort((text[best], -count[best], -score[over], plain[best]))
        names.append(", ".join(str(text[w]) for w in best[order[:n_words]]))
    return names


def cluster_labels(
    embedding: np.ndarray,
    tokens: Sequence[str],
    *,
    labels: Sequence[str] = (),
    skip: Sequence[bool] = (),
    level: float = 0.4,
    k: int = 4,
    min_size: int = 0,
    n_words: int = 3,
) -> tuple[list[str], np.ndarray]:
    """The clusters of a 2-D map and their names.

    Parameters
    ----------
    embedding : (m, 2) array: the map's points (non-finite rows belong to no cluster).
    tokens : each point's token text (m of them).
    labels : each point's label (a contexts view's sense or snippet); where present its words name the point.
    skip : per point, True to leave it out of the names' counts (special tokens); it keeps its cluster.
    level : a cell is dense when its density exceeds ``level`` x the median density at the points.
    k : the bandwidth is the median distance of a point to its k-th neighbour.
    min_size : the fewest points a cluster has (0: 2% of the points, at least 3).
    n_words : words in a name.

    Returns
    -------
    names : one a cluster, largest cluster first; a cluster with no over-represented word is named "".
    of : int32 (m,): each point's cluster (an index into ``names``) or -1.
    """
    Y = np.asarray(embedding, dtype=np.float64)
    m = len(Y)
    if Y.ndim != 2 or Y.shape[1] != 2 or len(tokens) != m:
        raise ValueError(f"cluster_labels needs an (m, 2) embedding and m tokens: got {Y.shape} and {len(tokens)}")
    of = np.full(m, -1, dtype=np.int32)
    finite = np.flatnonzero(np.isfinite(Y).all(axis=1))
    min_size = min_size or max(3, int(0.02 * m))
    if len(finite) < max(min_size, 4):
        return [], of
    regions = _regions(Y[finite], level=level, k=k)
    sizes = Counter(int(r) for r in regions if r >= 0)
    kept = sorted((r for r, size in sizes.items() if size >= min_size), key=lambda r: (-sizes[r], r))
    for c, r in enumerate(kept):
        of[finite[regions == r]] = c
    counted = np.array([i for i in range(m) if not (i < len(skip) and skip[i])], dtype=np.int64)
    return _names(of, point_words(tokens, labels), counted, len(kept), n_words), of
