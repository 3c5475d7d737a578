"""The thesis studies as data: KL by layer (Fig. 12), robustness to token replacement (Sec. 4.4, Fig. 15/16)
and multi-token word embeddings (Def. 4.1, Fig. 5/6; defined in :mod:`.words`, importable from here).

Every study loads its model once (through the cached :func:`~headsne_widget.extraction.load_model`), runs
its restarts and repeats through the batched t-SNE engine, derives every random choice from ``seed`` and,
when interrupted with Ctrl-C, warns and returns what finished. :mod:`headsne_widget.plots` draws the results.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._checks import check_index, int_at_least, is_number
from .common import extract_ids as _extract_ids
from .common import extract_text as _extract
from .common import interrupted as _interrupted
from .common import load as _load
from .common import selection_P as _P
from .common import study_seed
from .common import tsne_kl_chunks as _tsne_kl_chunks
from .common import tsne_kls as _tsne_kls
from .words import OCCUPATIONS, WordEmbeddings, word_embeddings

__all__ = [
    "OCCUPATIONS",
    "RobustnessResult",
    "WordEmbeddings",
    "kl_by_layer",
    "robustness",
    "word_embeddings",
]


METHODS = ("attention", "hidden")
CONDITIONS = ("attention", "attention disturbed", "hidden", "hidden disturbed")


# ----------------------------------------------------------------------------------------------- helpers


def _check_heads(heads: Iterable[int] | None, n_heads: int) -> list[int]:
    """All heads for None; else distinct valid head indices (a repeated head would duplicate rows)."""
    if heads is None:
        return list(range(n_heads))
    head_list = [check_index(h, n_heads, "heads", "heads per layer") for h in heads]
    if not head_list:
        raise ValueError("heads is empty: pass None for all heads or at least one head index")
    if len(set(head_list)) != len(head_list):
        raise ValueError(f"heads has repeated entries {head_list}: each head is studied once")
    return head_list


def _frame(rows: list[dict]) -> Any:
    """``rows`` as a pandas DataFrame, head as nullable Int64."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=["layer", "method", "head", "run", "kl", "perplexity"])
    df["head"] = df["head"].astype("Int64")
    return df


# ------------------------------------------------------------------------------------------ KL by layer


def kl_by_layer(
    text: str,
    model: Any = None,
    *,
    runs: int = 10,
    heads: Iterable[int] | None = None,
    n_iter: int = 1000,
    seed: int = 0,
    perplexity: float = 20.0,
    progress: bool = True,
) -> Any:
    """KL(P||Q) of attention-head t-SNE for every head and of standard t-SNE on every layer (thesis Fig. 12).

    For each layer ``l`` (0-based) and each head in ``heads`` (all by default), ``runs`` t-SNE runs of
    ``P = attention_affinities(A[l, head])`` (one batched ``tsne(P, restarts=runs)`` call), and ``runs``
    runs of standard t-SNE on the layer's output hidden states with perplexity-calibrated Gaussians.
    Returns one row per (layer, method, head, run) with keys ``layer``, ``method`` ("attention" or
    "hidden"), ``head`` (None for hidden), ``run`` and ``kl``: a pandas DataFrame if pandas is
    importable, else a list of dicts. Ctrl-C warns and returns the rows finished so far.
    """
    from tqdm.auto import tqdm

    runs = int_at_least(runs, "runs", 1)
    n_iter = int_at_least(n_iter, "n_iter", 1)
    loaded = _load(model)
    ex = _extract(text, loaded)
    L, H = ex.n_layers, ex.n_heads
    head_list = _check_heads(heads, H)
    tasks: list[tuple[int, str, int | None]] = [(layer, "attention", head) for layer in range(L) for head in head_list]
    tasks += [(layer, "hidden", None) for layer in range(L)]
    tasks.sort(key=lambda t: t[0])  # layer by layer, so an interrupted study has whole early layers
    rows: list[dict] = []
    bar = tqdm(total=len(tasks) * runs, desc="runs", unit="run", disable=not progress)
    try:
        for layer, method, head in tasks:
            P, used = _P(ex, method, layer, 0 if head is None else head, perplexity)
            kls = _tsne_kls(P, runs, n_iter, study_seed(seed, layer, H if head is None else head))
            rows += [
                dict(layer=layer, method=method, head=head, run=r, kl=float(kl), perplexity=used)
                for r, kl in enumerate(kls)
            ]
            bar.update(runs)
    except KeyboardInterrupt:
        _interrupted("runs", len(rows), len(tasks) * runs)
    finally:
        bar.close()
    return _frame(rows)


# ----------------------------------------------------------------------------------------- robustness


@dataclass
class RobustnessResult:
    """KLs of attention-head and standard t-SNE with and without token replacement (thesis Sec. 4.4).

    ``kls[condition]`` holds one KL per repeat for each of :data:`CONDITIONS` ("attention", "attention
    disturbed", "hidden", "hidden disturbed"); each is the best of ``runs`` restarts. ``positions[r]`` are
    the token positions replaced in repeat ``r`` and ``disturbed_ids[r]`` the whole disturbed id sequence.
    """

    layer: int
    head: int
    fraction: float
    model_name: str
    tokens: list[str]
    token_ids: np.ndarray
    positions: np.ndarray
    disturbed_ids: np.ndarray
    kls: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def std(self) -> dict[str, float]:
        """Sample standard deviation (ddof=1) of each condition's KLs; 0.0 when fewer than two repeats."""
        return {c: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for c, v in self.kls.items()}

    @property
    def repeats(self) -> int:
        """Number of disturbed repeats that finished."""
        return len(self.kls.get("attention disturbed", ()))

    def to_rows(self) -> list[dict]:
        """One dict per (condition, repeat): keys ``condition``, ``method``, ``disturbed``, ``repeat``, ``kl``."""
        return [
            dict(condition=c, method=c.split()[0], disturbed=c.endswith("disturbed"), repeat=r, kl=float(kl))
            for c, values in self.kls.items()
            for r, kl in enumerate(values)
        ]


def _disturb(
    ids: np.ndarray, eligible: np.ndarray, n_replace: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Replace ``n_replace`` of the ``eligible`` positions by other tokens of the text; (new ids, positions).

    The replacement is drawn uniformly from the text's distinct eligible token ids other than the one
    replaced, so exactly ``n_replace`` ids change.
    """
    vocab = np.unique(ids[eligible])
    positions = np.sort(rng.choice(eligible, size=n_replace, replace=False))
    out = ids.copy()
    for p in positions:
        choices = vocab[vocab != ids[p]]
        out[p] = choices[rng.integers(len(choices))]
    return out, positions


def robustness(
    text: str,
    model: Any = None,
    *,
    layer: int,
    head: int,
    fraction: float = 0.05,
    repeats: int = 100,
    seed: int = 0,
    runs: int = 1,
    n_iter: int = 1000,
    perplexity: float = 20.0,
    progress: bool = True,
) -> RobustnessResult:
    """KL of attention-head t-SNE (``layer``, ``head``) and standard t-SNE (``layer``'s hidden states) on the
    text as is and with ``fraction`` of its non-special tokens replaced by random tokens of the text.

    Each of ``repeats`` repeats disturbs the text anew and runs both methods (best of ``runs`` restarts);
    the undisturbed conditions get ``repeats`` independent runs too, in one batched call per method, so
    their spread is t-SNE's own. The thesis used layer 3, head 10, 5 % and 1000 repeats.
    """
    _check_fraction(fraction)
    from tqdm.auto import tqdm

    repeats = int_at_least(repeats, "repeats", 1)
    runs = int_at_least(runs, "runs", 1)
    n_iter = int_at_least(n_iter, "n_iter", 1)
    loaded = _load(model)
    ex = _extract(text, loaded)
    layer = check_index(layer, ex.n_layers, "layer", "layers")
    head = check_index(head, ex.n_heads, "head", "heads per layer")
    ids = np.asarray(ex.token_ids, dtype=np.int64)
    eligible = np.flatnonzero(~np.asarray(ex.special, dtype=bool))
    n_replace = round(float(fraction) * len(eligible))
    if n_replace < 1:
        raise ValueError(f"fraction={fraction} replaces no token: the text has only {len(eligible)} non-special tokens")
    if len(np.unique(ids[eligible])) < 2:
        raise ValueError("the text needs at least two distinct tokens to replace one by another")

    rng = np.random.default_rng(study_seed(seed, 0))
    result = RobustnessResult(
        layer=layer, head=head, fraction=float(fraction), model_name=str(ex.model_name), tokens=list(ex.tokens),
        token_ids=ids, positions=np.empty((0, n_replace), np.int64), disturbed_ids=np.empty((0, len(ids)), np.int64),
        kls={c: np.empty(0) for c in CONDITIONS},
    )  # fmt: skip
    # progress counts t-SNE runs of every phase: undisturbed (both methods), then disturbed (both methods)
    bar = tqdm(total=4 * repeats * runs, desc="runs", unit="run", disable=not progress)
    done: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    positions, disturbed = [], []
    try:
        chunks = {
            m: _tsne_kl_chunks(_P(ex, m, layer, head, perplexity)[0], repeats * runs, n_iter, study_seed(seed, 1, i))
            for i, m in enumerate(METHODS)
        }
        for attention, hidden in zip(chunks["attention"], chunks["hidden"]):
            done["attention"] += attention.tolist()
            done["hidden"] += hidden.tolist()
            bar.update(len(attention) + len(hidden))
        for r in range(repeats):
            new_ids, pos = _disturb(ids, eligible, n_replace, rng)
            dex = _extract_ids(new_ids, loaded)
            a = _tsne_kls(_P(dex, "attention", layer, head, perplexity)[0], runs, n_iter, study_seed(seed, 2, r))
            h = _tsne_kls(_P(dex, "hidden", layer, head, perplexity)[0], runs, n_iter, study_seed(seed, 3, r))
            positions.append(pos)
            disturbed.append(new_ids)
            done["attention disturbed"].append(a.min())
            done["hidden disturbed"].append(h.min())
            bar.update(2 * runs)
    except KeyboardInterrupt:
        _interrupted("repeats", len(done["attention disturbed"]), repeats)
    finally:
        bar.close()
    return _filled(result, done, runs, positions, disturbed)


def _check_fraction(fraction: Any) -> None:
    if not is_number(fraction):
        raise TypeError(f"fraction must be a number in (0, 1), got {type(fraction).__name__}")
    if not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")


def _filled(
    result: RobustnessResult, done: dict[str, list[float]], runs: int, positions: list, disturbed: list
) -> RobustnessResult:
    """``result`` with the KLs of the finished repeats: the best of ``runs`` for each (the undisturbed runs in
    whole repeats of both methods), and the disturbed texts."""
    whole = min(len(done["attention"]), len(done["hidden"])) // runs  # same repeats in both methods
    for method in METHODS:
        result.kls[method] = np.asarray(done[method][: whole * runs]).reshape(whole, runs).min(axis=1)
        result.kls[f"{method} disturbed"] = np.asarray(done[f"{method} disturbed"], dtype=np.float64)
    if positions:
        result.positions, result.disturbed_ids = np.stack(positions), np.stack(disturbed)
    return result
