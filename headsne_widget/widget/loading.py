"""The widget's first job: capture the text in the background while the widget already shows its progress.

:func:`load_job` runs :func:`~headsne_widget.capture.extraction.extract` with a progress report per layer (each
report is a cancel point, so closing the widget stops the forward pass at the next layer), hands the owner the
:class:`Loaded` extraction, then fills the extraction's cache with every head when they all fit its budget (a
first click at 512 tokens then finds its head ready: 70-145 ms of a click under load before). On the owner's
side :func:`apply_loaded` sets the data traits, the selection and the arrays the jobs will lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import traitlets as t

from ..affinity.heads import default_grid_norm
from ..affinity.selection import MIN_TOKENS
from ..capture.extraction import Extraction, extract
from ..capture.scores import SCORES, head_scores, statistics
from .jobs import Job, Progress
from .prefetch import PREFETCH_MIN_N, Prefetch
from .runs import build_selection, start_warmup
from .workspace import Workspace

if TYPE_CHECKING:
    from .owner import Owner

__all__ = [
    "Loaded", "Progress", "apply_loaded", "apply_progress", "check_tokens", "data_traits", "load_job", "prefetch_job",
]  # fmt: skip


@dataclass(frozen=True)
class Loaded:
    """The text is captured."""

    ex: Extraction


def load_job(
    job: Job, *, text: str, model: Any, tokenizer: Any, device: Any, max_tokens: int | None
) -> None:  # fmt: skip
    """Capture ``text`` (see the module doc); every step reports progress and is a cancel point."""
    start_warmup()  # compiles (or loads) the t-SNE kernels while the model loads and runs

    def progress(what: str, fraction: float) -> None:
        job.emit(Progress(what, fraction))

    ex = extract(text, model, tokenizer=tokenizer, device=device, max_tokens=max_tokens, progress=progress)
    job.emit(Loaded(ex))
    ex.attention_source.prefetch(job.check)


def prefetch_job(job: Job, ex: Extraction) -> None:
    """Every head into the extraction's cache, when they all fit its budget (see the module doc)."""
    start_warmup()
    ex.attention_source.prefetch(job.check)


def data_traits(ex: Extraction) -> dict[str, Any]:
    """The traits set once per text (the head map comes later, from its job)."""
    table = head_scores(ex)
    values = table[list(SCORES)].to_numpy(dtype=np.float64).reshape(ex.n_layers, ex.n_heads, len(SCORES))
    return dict(
        text=ex.text, tokens=list(ex.tokens), special=[bool(s) for s in ex.special],
        offsets=[None if o is None else [int(o[0]), int(o[1])] for o in ex.offsets],
        model_name=ex.model_name, n_layers=ex.n_layers, n_heads=ex.n_heads, kv_groups=int(ex.kv_groups),
        max_attention=ex.max_attention, max_attention_above_uniform=statistics(ex).above_uniform,
        score_names=list(SCORES), scores=np.where(np.isnan(values), -1.0, values), head_kinds=table["kind"].tolist(),
    )  # fmt: skip


def apply_loaded(owner: Owner, loaded: Loaded) -> None:
    """Owner side: the data traits, the selection asked for at construction, the workspace and prefetch. A
    selection out of range raises when the extraction was given (the constructor's caller sees it), else it is
    the widget's error (``wait_ready`` raises it)."""
    ex, own, widget = loaded.ex, owner, owner.widget
    layer, head, mode = own.selection
    try:
        check_tokens(ex)
    except ValueError as err:
        own.load_error = err
        widget.state, widget.status, widget.progress = "error", str(err), None
        return
    with widget.hold_sync():
        if not widget.tokens:  # not given at construction: the data traits now
            for name, value in data_traits(ex).items():
                setattr(widget, name, value)
        try:
            widget.layer, widget.head, widget.mode = layer, head, mode
        except t.TraitError as err:
            own.load_error = err
            widget.state, widget.status, widget.progress = "error", str(err), None
            return
        if not own.grid_norm_given:  # the grid that shows the heads: above uniform for causal models
            widget.grid_norm = default_grid_norm(ex)
        widget.state, widget.progress = "idle", None
        widget.status = f"idle - {ex.model_name}, {ex.n_tokens} tokens: click a head or press play"
    own.ex, own.workspace = ex, Workspace(ex.n_tokens)
    if ex.n_tokens >= PREFETCH_MIN_N:
        workspace = own.workspace

        def build(job: Job, key: Any) -> tuple[Any, Any]:
            selection, P_lease, A_lease = build_selection(job, ex, key, workspace)
            if A_lease is not None:
                A_lease.release()
            return selection, P_lease

        own.prefetch = Prefetch(owner.slots["prefetch"], build)
    if not own.loading:
        owner.slots["load"].start(lambda job: prefetch_job(job, ex))


def check_tokens(ex: Extraction) -> None:
    """Refuse a text too short for t-SNE (special tokens included)."""
    if ex.n_tokens < MIN_TOKENS:
        raise ValueError(
            f"the text has {ex.n_tokens} tokens (special ones included); t-SNE needs at least {MIN_TOKENS}"
        )


def apply_progress(owner: Owner, job: Job, progress: Progress) -> None:
    """Owner side: a load's progress in the status line, or that of the current run's P before its first frame
    (a long text's rows); a replaced run's or another job's is dropped."""
    if owner.ex is None:
        owner.widget.status, owner.widget.progress = progress.what, progress.fraction
    elif owner.run is not None and owner.run.job is job and owner.run.kept is None and not owner.run.ended:
        owner.widget.status = f"{owner.status('building')}: {progress.what}"
        owner.widget.progress = progress.fraction
