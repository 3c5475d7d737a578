"""Do the word states lay out the parse tree? Hewitt and Manning's structural probe (2019), per layer.

A sentence's words (those with tokens, punctuation left out, as Hewitt and Manning do) give two matrices: the tree
distance (edges between a word and its head, counted along the tree) and the squared Euclidean distance between
their states (:mod:`.alignment`: the mean of a word's pieces). Per layer:

- ``raw_spearman``: the Spearman correlation of the two over a sentence's word pairs, averaged over sentences;
- a trained rank-``k`` distance probe ``B`` (torch, Adam on the L1 gap between ``|B(h_i - h_j)|^2`` and the tree
  distance, each sentence weighted by ``1 / words^2``), fitted on a share of the sentences and tested on the rest:
  ``spearman`` on the test sentences and ``uuas``, the share of their gold edges found by the minimum spanning tree
  of the probe's distances, beside ``chain_uuas``, that of the tree linking each word to the next (the linear
  baseline a probe must beat).

Sentences with fewer than :data:`MIN_WORDS` kept words are left out (a correlation over one or two pairs says
nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .alignment import WordAlignment
from .relations import PUNCTUATION

__all__ = ["MIN_WORDS", "TREE_COLUMNS", "Sentence", "fit_tree_probe", "sentences_of", "tree_distances"]

#: the fewest kept words a sentence needs to be probed
MIN_WORDS = 5
#: the columns of :func:`fit_tree_probe`
TREE_COLUMNS = ("layer", "raw_spearman", "spearman", "uuas", "chain_uuas", "train_sentences", "test_sentences")


@dataclass(eq=False)
class Sentence:
    """One sentence's kept words: ``states`` float32 ``(L + 1, s, d)`` (entry 0 the embeddings), ``distance``
    int64 ``(s, s)`` along the tree, ``edges`` int64 ``(s - 1, 2)`` the gold tree's (as pairs ``i < j``; fewer
    where a kept word's path to the others runs only through left-out punctuation) and ``text`` its text's index."""

    states: np.ndarray
    distance: np.ndarray
    edges: np.ndarray
    text: int


def tree_distances(head: np.ndarray) -> np.ndarray:
    """int64 ``(m, m)``: edges between two words along their sentence's tree (``head``: each word's head row, -1
    at a root); -1 between words of different trees."""
    m = head.size
    adjacency = np.zeros((m, m), dtype=bool)
    linked = np.flatnonzero(head >= 0)
    adjacency[linked, head[linked]] = adjacency[head[linked], linked] = True
    from scipy.sparse.csgraph import shortest_path

    d = shortest_path(adjacency.astype(np.float64), unweighted=True, directed=False)
    return np.where(np.isfinite(d), d, -1).astype(np.int64)


def sentences_of(words: pd.DataFrame, al: WordAlignment, states: np.ndarray, text: int) -> list[Sentence]:
    """The probed sentences of one text: ``words`` its parse, ``states`` float ``(L + 1, n_tokens, d)``."""
    head, sentence = words["head"].to_numpy(np.int64), words["sentence"].to_numpy(np.int64)
    punct = words["dep"].isin(PUNCTUATION).to_numpy() | (words["pos"] == "PUNCT").to_numpy()
    distance = tree_distances(head)
    pooled = np.stack([al.states(layer) for layer in states]).astype(np.float32)  # (L + 1, m, d)
    out = []
    for s in np.unique(sentence):
        kept = np.flatnonzero((sentence == s) & al.aligned & ~punct)
        if kept.size < MIN_WORDS:
            continue
        sub = distance[np.ix_(kept, kept)]
        i, j = np.nonzero(np.triu(sub == 1))
        out.append(Sentence(pooled[:, kept], sub, np.stack([i, j], axis=1), text))
    return out


def fit_tree_probe(
    sentences: Sequence[Sentence], *, rank: int = 64, test_share: float = 0.2, steps: int = 400, seed: int = 0
) -> pd.DataFrame:
    """One row of :data:`TREE_COLUMNS` per layer (0: the embeddings); the split by sentence is drawn from
    ``seed``, as is the probe's start."""
    items = list(sentences)
    if len(items) < 2:
        raise ValueError(
            f"the tree probe needs two sentences or more with at least {MIN_WORDS} words (not punctuation) that have "
            f"tokens; these texts give {len(items)}"
        )
    if not 0 < test_share < 1:
        raise ValueError(f"test_share must be between 0 and 1, got {test_share!r}")
    order = np.random.default_rng(seed).permutation(len(items))
    n_test = min(max(1, round(test_share * len(items))), len(items) - 1)
    test, train = [items[i] for i in order[:n_test]], [items[i] for i in order[n_test:]]
    rows = []
    for layer in range(items[0].states.shape[0]):
        with _one_torch_thread():
            probe = _train(train, layer, rank, steps, seed)
        predicted = [_squared(probe, s.states[layer]) for s in test]
        rows.append({
            "layer": layer,
            "raw_spearman": _mean_spearman([_squared(None, s.states[layer]) for s in items], items),
            "spearman": _mean_spearman(predicted, test),
            "uuas": _uuas([_mst_edges(p) for p in predicted], test),
            "chain_uuas": _uuas([np.stack([np.arange(len(s.distance) - 1), np.arange(1, len(s.distance))], 1)
                                 for s in test], test),
            "train_sentences": len(train),
            "test_sentences": len(test),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=list(TREE_COLUMNS))


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """torch on one thread around the probe's small products (on 2 busy cores two threads made them tens of times
    slower), restored after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _squared(probe: np.ndarray | None, states: np.ndarray) -> np.ndarray:
    """Squared distances between the (projected) states of one sentence, float64 ``(s, s)``."""
    x = np.asarray(states, dtype=np.float64)
    if probe is not None:
        x = x @ probe.T
    diff = x[:, None, :] - x[None, :, :]
    return np.einsum("ijk,ijk->ij", diff, diff)


def _train(sentences: list[Sentence], layer: int, rank: int, steps: int, seed: int) -> np.ndarray:
    """The probe ``B`` float64 ``(rank, d)`` fitted on ``sentences`` (full batch, Adam)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    d = sentences[0].states.shape[-1]
    size = max(len(s.distance) for s in sentences)
    x = torch.zeros(len(sentences), size, d, dtype=torch.float64)
    target = torch.zeros(len(sentences), size, size, dtype=torch.float64)
    mask = torch.zeros(len(sentences), size, size, dtype=torch.float64)
    for k, s in enumerate(sentences):
        n = len(s.distance)
        x[k, :n] = torch.from_numpy(s.states[layer].astype(np.float64))
        target[k, :n, :n] = torch.from_numpy(s.distance.astype(np.float64))
        mask[k, :n, :n] = 1.0 / n**2
    probe = ((torch.rand(rank, d, generator=g, dtype=torch.float64) - 0.5) * 0.1).requires_grad_()
    optimiser = torch.optim.Adam([probe], lr=1e-3)
    for _ in range(steps):
        optimiser.zero_grad()
        y = x @ probe.T  # (S, s, rank); |y_i - y_j|^2 from the Gram matrix, never (S, s, s, rank)
        gram = y @ y.transpose(1, 2)
        norms = torch.diagonal(gram, dim1=1, dim2=2)
        squared = norms[:, :, None] + norms[:, None, :] - 2 * gram
        loss = ((squared - target).abs() * mask).sum() / len(sentences)
        loss.backward()
        optimiser.step()
    return probe.detach().numpy()


def _mean_spearman(predicted: list[np.ndarray], sentences: list[Sentence]) -> float:
    from scipy.stats import spearmanr

    values = []
    for p, s in zip(predicted, sentences):
        i, j = np.triu_indices(len(s.distance), 1)
        values.append(spearmanr(p[i, j], s.distance[i, j]).statistic)
    return float(np.nanmean(values))


def _mst_edges(distance: np.ndarray) -> np.ndarray:
    """The minimum spanning tree of a sentence's predicted distances, as pairs ``i < j``."""
    from scipy.sparse.csgraph import minimum_spanning_tree

    tree = minimum_spanning_tree(np.triu(distance + 1e-12, 1)).tocoo()  # + eps: a zero distance is still an edge
    return np.sort(np.stack([tree.row, tree.col], axis=1), axis=1)


def _uuas(found: list[np.ndarray], sentences: list[Sentence]) -> float:
    """Gold edges found over all gold edges of ``sentences``."""
    hit = total = 0
    for edges, s in zip(found, sentences):
        gold = {tuple(e) for e in s.edges.tolist()}
        hit += len(gold & {tuple(e) for e in np.asarray(edges).tolist()})
        total += len(gold)
    return hit / total if total else float("nan")
