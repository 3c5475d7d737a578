"""The thesis studies as data: KL by layer (Fig. 12), robustness to token replacement (Sec. 4.4, Fig. 15/16)
and multi-token word embeddings (Def. 4.1, Fig. 5/6).

Every study loads its model once (through the cached :func:`~headsne_widget.extraction.load_model`), runs
its restarts and repeats through the batched t-SNE engine, derives every random choice from ``seed`` and,
when interrupted with Ctrl-C, warns and returns what finished. :mod:`headsne_widget.plots` draws the results.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._checks import int_at_least
from ..affinity.selection import check_index, selection_affinities
from .common import interrupted as _interrupted
from .common import study_seed
from .common import tsne_kl_chunks as _tsne_kl_chunks
from .common import tsne_kls as _tsne_kls

__all__ = [
    "OCCUPATIONS",
    "RobustnessResult",
    "WordEmbeddings",
    "kl_by_layer",
    "robustness",
    "word_embeddings",
]

# Single-word occupations, as in the thesis's Fig. 6 ("only words without spaces were considered"); it names
# musician, dancer, singer, choreographer, composer, woodworker, farmworker, rancher, millwright, locksmith
# and brickmason, which are all here.
OCCUPATIONS: tuple[str, ...] = (
    "accountant",
    "actor",
    "actuary",
    "architect",
    "archivist",
    "astronomer",
    "athlete",
    "auditor",
    "baker",
    "barber",
    "bartender",
    "biologist",
    "blacksmith",
    "bookkeeper",
    "brickmason",
    "butcher",
    "carpenter",
    "cashier",
    "chef",
    "chemist",
    "choreographer",
    "cleaner",
    "coach",
    "composer",
    "cook",
    "counselor",
    "courier",
    "dancer",
    "dentist",
    "designer",
    "detective",
    "dietitian",
    "diplomat",
    "doctor",
    "driver",
    "economist",
    "editor",
    "electrician",
    "engineer",
    "farmer",
    "farmworker",
    "firefighter",
    "fisherman",
    "florist",
    "gardener",
    "geologist",
    "glazier",
    "guard",
    "hairdresser",
    "historian",
    "janitor",
    "jeweler",
    "journalist",
    "judge",
    "lawyer",
    "librarian",
    "lifeguard",
    "locksmith",
    "machinist",
    "mathematician",
    "mechanic",
    "midwife",
    "millwright",
    "miner",
    "musician",
    "nurse",
    "optician",
    "painter",
    "paralegal",
    "pharmacist",
    "photographer",
    "physicist",
    "physician",
    "pilot",
    "plumber",
    "poet",
    "police",
    "politician",
    "potter",
    "programmer",
    "psychologist",
    "rancher",
    "receptionist",
    "reporter",
    "roofer",
    "sailor",
    "scientist",
    "sculptor",
    "secretary",
    "singer",
    "soldier",
    "statistician",
    "surgeon",
    "tailor",
    "teacher",
    "translator",
    "veterinarian",
    "waiter",
    "welder",
    "woodworker",
    "writer",
    "zoologist",
)

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


def _load(model: Any) -> Any:
    from ..capture.extraction import load_model

    return load_model(model)


def _extract(text: str, loaded: Any) -> Any:
    from ..capture.extraction import extract

    return extract(text, loaded)


def _extract_ids(token_ids: np.ndarray, loaded: Any) -> Any:
    from ..capture.extraction import extract_token_ids

    return extract_token_ids(token_ids, loaded)


def _P(ex: Any, method: str, layer: int, head: int, perplexity: float) -> tuple[np.ndarray, float | None]:
    """P of a head ("attention") or of the layer's output hidden states ("hidden"), and the perplexity used."""
    sel = selection_affinities(ex, method, layer, head, perplexity=perplexity)
    if sel.note:
        warnings.warn(sel.note, UserWarning, stacklevel=3)
    return sel.P, sel.perplexity


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
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float, np.floating, np.integer)):
        raise TypeError(f"fraction must be a number in (0, 1), got {type(fraction).__name__}")
    if not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
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
    whole = min(len(done["attention"]), len(done["hidden"])) // runs  # same repeats in both methods
    for method in METHODS:
        result.kls[method] = np.asarray(done[method][: whole * runs]).reshape(whole, runs).min(axis=1)
        result.kls[f"{method} disturbed"] = np.asarray(done[f"{method} disturbed"], dtype=np.float64)
    if positions:
        result.positions, result.disturbed_ids = np.stack(positions), np.stack(disturbed)
    return result


# ------------------------------------------------------------------------------------ word embeddings


@dataclass
class WordEmbeddings:
    """Multi-token embeddings of words (thesis Def. 4.1) and their standard t-SNE map."""

    words: list[str]
    X: np.ndarray  # (n, d) [CLS] hidden state of each word at ``layer``
    embedding: np.ndarray  # (n, 2) t-SNE of X
    kl: float
    layer: int
    perplexity: float
    model_name: str


def _check_words(words: Sequence[str] | None) -> list[str]:
    if words is None:
        return list(OCCUPATIONS)
    if isinstance(words, str):
        raise TypeError("words must be a list of strings, not one string")
    words = list(words)
    if not words:
        raise ValueError("words is empty: pass at least two words or phrases (or None for analyses.OCCUPATIONS)")
    bad = [w for w in words if not isinstance(w, str)]
    if bad:
        raise TypeError(f"words must all be strings, got {bad[0]!r}")
    blank = [w for w in words if not w.strip()]
    if blank:
        raise ValueError(f"words contains an empty string: {blank[0]!r}")
    if len(words) < 2:
        raise ValueError(f"words needs at least two entries to embed, got {len(words)}")
    return words


def word_embeddings(
    words: Sequence[str] | None = None,
    model: Any = None,
    *,
    layer: int = -1,
    seed: int = 0,
    n_iter: int = 1000,
    perplexity: float | None = None,
) -> WordEmbeddings:
    """Standard t-SNE of the multi-token embedding of each word: its [CLS] hidden state (thesis Def. 4.1).

    ``layer`` indexes the hidden states (0 = embedding layer, -1 = the last layer's output). ``words=None``
    uses :data:`OCCUPATIONS` (thesis Fig. 6). ``perplexity=None`` uses 20 (thesis A.2), lowered to
    ``(n - 1) / 3`` for short word lists so that it stays below the number of neighbours.
    """
    from ..embedding.tsne import tsne

    words = _check_words(words)
    n_iter = int_at_least(n_iter, "n_iter", 1)
    loaded = _load(model)
    first = _extract(words[0], loaded)
    n_states = first.n_layers + 1
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise TypeError(f"layer must be an int, got {type(layer).__name__}")
    if not -n_states <= layer < n_states:
        raise ValueError(f"layer={layer} is out of range: the model has {n_states} hidden states (0..{n_states - 1})")
    layer = int(layer) % n_states
    exs = [first] + [_extract(w, loaded) for w in words[1:]]
    X = np.stack([np.asarray(e.hidden_states[layer][0], dtype=np.float64) for e in exs])
    n = len(words)
    if perplexity is None:
        perplexity = min(20.0, max(1.0, (n - 1) / 3))
    from ..affinity.affinities import gaussian_affinities

    P = gaussian_affinities(X, perplexity=perplexity)
    res = tsne(P, n_iter=n_iter, seed=study_seed(seed))
    return WordEmbeddings(
        words=words,
        X=X,
        embedding=np.asarray(res.embedding),
        kl=float(res.kl),
        layer=layer,
        perplexity=float(perplexity),
        model_name=str(first.model_name),
    )
