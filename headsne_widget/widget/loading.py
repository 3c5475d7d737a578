"""The widget's first job: capture the text in the background while the widget already shows its progress.

:func:`load_job` runs :func:`~headsne_widget.capture.extraction.extract` with a progress report per layer (each
report is a cancel point, so closing the widget stops the forward pass at the next layer), hands the owner the
:class:`Loaded` extraction, then fills the extraction's cache with every head when they all fit its budget (a
first click at 512 tokens then finds its head ready: 70-145 ms of a click under load before). What the
constructor asked for travels as :class:`Asked` (``NOT_GIVEN`` where the user left a value out); the owner
applies it with the extraction (``Owner.receive``). A widget whose ``head=`` was left out opens on an informative
head, :func:`opening_head` (layer 0 head 0 is arbitrary, and in most models a sink or a broad head).
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ..affinity.selection import MIN_TOKENS
from ..affinity.sources import SOURCES
from ..capture.components import allow_components
from ..capture.extraction import CaptureOptions, Extraction, extract_with
from ..capture.occurrences import Occurrences, capture_occurrences
from ..capture.scores import SCORES, head_scores, statistics
from ..embedding.background import start_warmup
from .jobs import Job, Progress, Slot
from .prefetch import Prefetch
from .selections import build_selection
from .workspace import Workspace

_WARMUP_LOCK = threading.Lock()
_WARMUP: list[threading.Thread] = []  # the widget's warm-up thread, started once per process

__all__ = [
    "FIXED_KINDS", "NOT_GIVEN", "OPENING_NOTE", "Asked", "Loaded", "NotGiven", "Progress", "check_tokens",
    "contexts_job", "data_traits", "load_job", "make_prefetch", "occurrence_traits", "opening_head",
    "opening_selection", "prefetch_job",
]  # fmt: skip


class NotGiven(enum.Enum):
    """The type of :data:`NOT_GIVEN`."""

    NOT_GIVEN = "not given"


#: a constructor argument the user left out: the owner fills it in once the text is known
NOT_GIVEN: Final = NotGiven.NOT_GIVEN


#: the kinds (capture/scores.head_kind) of heads whose attention follows the positions whatever the text says: the
#: first token, the special tokens, the query itself or its neighbours; a widget does not open on one
FIXED_KINDS = ("sink", "previous", "next", "self", "special", "local")
#: what the status says while the widget shows the head it opened on (the user gave no ``head=``)
OPENING_NOTE = "opened on the head most focused on the text's own words: head= to choose"


@dataclass(frozen=True)
class Asked:
    """What ``HeadSNE(...)`` asked for, applied once the text is captured: the selection, whether the first run
    starts by itself, the grid (``NOT_GIVEN``: the model's default, above uniform for causal models) and the
    colouring (``HeadSNE.contexts``'s sense labels)."""

    layer: int | NotGiven = 0  # NOT_GIVEN: the opening head's layer, or (head given, HeadSNE.contexts) the last layer
    head: int | NotGiven = 0  # NOT_GIVEN: the opening head (opening_selection)
    mode: str = "attention"
    autostart: bool = True
    grid_norm: str | NotGiven = NOT_GIVEN
    colors: Any = None  # labels or values per point, applied as ``color_by``


@dataclass(frozen=True)
class Loaded:
    """The text is captured."""

    ex: Extraction


def start_widget_warmup() -> threading.Thread:
    """The embedding stage's warm-up (:func:`~headsne_widget.embedding.background.start_warmup`), then the compiled
    kernel of a long text's hover lines (:func:`~headsne_widget.affinity.partners.warm`), in a process-wide thread
    started once (it holds no widget state)."""
    with _WARMUP_LOCK:
        if not _WARMUP:
            _WARMUP.append(threading.Thread(target=_warm_widget, name="headsne-widget-warmup", daemon=True))
            _WARMUP[0].start()
        return _WARMUP[0]


def _warm_widget() -> None:
    start_warmup().join()
    try:
        from ..affinity import partners

        partners.warm()
    except Exception as err:  # only an optimisation: the run itself reports real failures
        message = f"widget warm-up failed ({err}); the first hover lines compile instead"
        warnings.warn(message, RuntimeWarning, stacklevel=2)


def load_job(job: Job, *, text: str, options: CaptureOptions) -> None:
    """Capture ``text`` as ``options`` say (see the module doc); every step reports progress and is a cancel point."""
    start_widget_warmup()  # compiles (or loads) the kernels while the model loads and runs

    def progress(what: str, fraction: float) -> None:
        job.emit(Progress(what, fraction))

    ex = extract_with(text, dataclasses.replace(options, progress=progress))
    # the modes and panels that need the components trace them with this (cached) model when first asked
    allow_components(ex, options.load())
    job.emit(Loaded(ex))
    ex.attention_source.prefetch(job.check)


def contexts_job(job: Job, *, word: str, texts: list[str], model: Any, term: str) -> None:
    """Capture every occurrence of ``word`` in ``texts`` (``HeadSNE.contexts``); each text reports progress and
    is a cancel point."""
    start_widget_warmup()

    def progress(done: int, total: int) -> None:
        job.emit(Progress(f"running the texts that hold {word!r}: {done} of {total}", done / total))

    job.emit(Progress(f"loading the model, then finding {word!r} in {len(texts)} texts", 0.0))
    job.emit(Loaded(capture_occurrences(word, texts, model, term=term, progress=progress)))


def prefetch_job(job: Job, ex: Extraction) -> None:
    """Every head into the extraction's cache, when they all fit its budget (see the module doc)."""
    start_widget_warmup()
    ex.attention_source.prefetch(job.check)


def data_traits(ex: Extraction) -> dict[str, Any]:
    """The traits set once per text (the head map comes later, from its job)."""
    if isinstance(ex, Occurrences):
        return occurrence_traits(ex)
    table = head_scores(ex)
    values = table[list(SCORES)].to_numpy(dtype=np.float64).reshape(ex.n_layers, ex.n_heads, len(SCORES))
    return dict(
        text=ex.text, tokens=list(ex.tokens), special=[bool(s) for s in ex.special],
        offsets=[None if o is None else [int(o[0]), int(o[1])] for o in ex.offsets],
        model_name=ex.model_name, n_layers=ex.n_layers, n_heads=ex.n_heads, kv_groups=int(ex.kv_groups),
        max_attention=ex.max_attention, max_attention_above_uniform=statistics(ex).above_uniform,
        score_names=list(SCORES), scores=np.where(np.isnan(values), -1.0, values), head_kinds=table["kind"].tolist(),
    )  # fmt: skip


def occurrence_traits(ex: Occurrences) -> dict[str, Any]:
    """The data traits of a word's occurrences across texts: no head scores (they are a text's), the grid and its
    above-uniform form each occurrence's in its own text."""
    return dict(
        text=ex.text, word=ex.word, tokens=list(ex.tokens), special=[False] * ex.n_tokens,
        offsets=[[int(o[0]), int(o[1])] for o in ex.offsets if o is not None], model_name=ex.model_name,
        n_layers=ex.n_layers, n_heads=ex.n_heads, kv_groups=1, max_attention=ex.max_attention,
        max_attention_above_uniform=ex.above_uniform, score_names=[], scores=None, head_kinds=[],
    )  # fmt: skip


def opening_head(scores: np.ndarray | None, names: list[str], kinds: list[str], layer: int | None = None) -> tuple[
    int, int] | None:  # fmt: skip
    """The head a widget opens on when ``head=`` is not given: the one with the most attention concentrated on tokens
    the text decides, ``(1 - fixed) x (1 - entropy)`` with ``fixed = min(1, max(sink, special) + local)`` (the share
    on the first or the special tokens and on the 7-token band round the query, itself and its neighbours included),
    among the heads of no :data:`FIXED_KINDS` kind (all heads when every one is); within ``layer`` when given; ties
    to the first in model order. ``scores`` (L, H, S) as the ``scores`` trait (-1 for NaN), ``names`` its score
    names, ``kinds`` each head's kind, row-major. None without scores or for a layer out of range."""
    if scores is None or not len(kinds):
        return None
    n_layers, n_heads = scores.shape[:2]
    if layer is not None and not 0 <= layer < n_layers:
        return None  # the trait refuses it, with its own words
    value = {name: np.where(scores[..., k] < 0, np.nan, scores[..., k]) for k, name in enumerate(names)}
    fixed = np.minimum(1.0, np.fmax(value["sink"], value["special"]) + value["local"])
    focus = np.nan_to_num((1.0 - fixed) * (1.0 - value["entropy"]), nan=-1.0)
    free = ~np.isin(np.asarray(kinds).reshape(n_layers, n_heads), FIXED_KINDS)
    rows = list(range(n_layers)) if layer is None else [layer]
    if not free[rows].any():
        free[rows] = True
    candidates = np.where(free, focus, -np.inf)
    candidates[[k for k in range(n_layers) if k not in rows]] = -np.inf
    best = int(np.argmax(candidates))
    return best // n_heads, best % n_heads


def opening_selection(asked: Asked, scores: np.ndarray | None, names: list[str], kinds: list[str],
                      n_layers: int) -> tuple[Any, Any, bool]:  # fmt: skip
    """The layer and head a widget opens on, and whether Python chose the head (:func:`opening_head`: ``head=`` left
    out in a mode with heads). ``head=`` left out otherwise: head 0 (of layer 0 when the layer was left out too);
    ``layer=`` left out with a head given (``HeadSNE.contexts``): the last layer. Values out of range pass through,
    for the traits to refuse."""
    layer, head = asked.layer, asked.head
    if head is NOT_GIVEN:
        per_head = asked.mode in SOURCES and SOURCES[asked.mode].per_head
        chosen = opening_head(scores, names, kinds, None if layer is NOT_GIVEN else layer) if per_head else None
        if chosen is not None:
            return chosen[0], chosen[1], True
        return 0 if layer is NOT_GIVEN else layer, 0, False
    return n_layers - 1 if layer is NOT_GIVEN else layer, head, False


def make_prefetch(ex: Extraction, workspace: Workspace, slot: Slot) -> Prefetch | None:
    """The builder of the P the pointer rests on, for texts where some mode's P is worth building ahead
    (``PSource.prefetch``)."""
    if not any(src.prefetches(ex.n_tokens) for src in SOURCES.values()):
        return None

    def build(job: Job, key: Any) -> tuple[Any, Any]:
        selection, P_lease, A_lease = build_selection(job, ex, key, workspace)
        if A_lease is not None:
            A_lease.release()
        return selection, P_lease

    return Prefetch(slot, build)


def check_tokens(ex: Extraction) -> None:
    """Refuse a text too short for t-SNE (special tokens included)."""
    if isinstance(ex, Occurrences) and ex.n_tokens < MIN_TOKENS:
        many = "once" if ex.n_tokens == 1 else f"{ex.n_tokens} times"
        raise ValueError(f"{ex.word!r} occurs {many} in the texts; a map needs at least {MIN_TOKENS} occurrences: "
                         "give more texts that contain it")  # fmt: skip
    if ex.n_tokens < MIN_TOKENS:
        raise ValueError(
            f"the text has {ex.n_tokens} tokens (special ones included); t-SNE needs at least {MIN_TOKENS}"
        )
