"""What a capture is asked for, in one typed object (:class:`CaptureOptions`), checked once where it is made.

``extract(text, model, tokenizer=..., device=..., ...)`` builds one from its keywords; the widget builds one when
it is given a text and hands it to its loading job; the forward pass reads the folds from it. So an option added
here reaches every caller without another signature to thread it through.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .._checks import is_int
from . import folds as _folds
from .components import check_components
from .folds import Fold, KeptRows, MaxAttentionGrid
from .folds.rows import rows_setting
from .loading import LoadedModel, load_model

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["PROGRESS_MIN_TOKENS", "CaptureOptions", "Progress", "check_max_tokens", "no_progress", "progress_bar"]

#: ``progress(what, fraction)``: what is being computed ("capturing layer 3 of 12") and the fraction done
Progress = Callable[[str, float], None]
#: texts of at least this many tokens show a progress bar by default (``extract(..., progress=None)``): about
#: 2 s of capture for a small model on a laptop core, 3-5 s on a shared one
PROGRESS_MIN_TOKENS = 4096


def _registered() -> tuple[type[Fold], ...]:
    return _folds.FOLDS  # read when the options are made: a fold registered since is included


@dataclass(frozen=True)
class CaptureOptions:
    """How to capture a text: the model (a hub id, a directory, a ``PreTrainedModel``, a ``LoadedModel`` or None
    for the default) and its ``tokenizer``, ``device`` and ``trust_remote_code`` (:func:`.loading.load_model`);
    ``max_tokens`` (None: a text too long raises), ``progress`` and ``components`` as :func:`.extraction.extract`
    says; ``folds``, what the forward pass folds from the attention (default: the registered :data:`.folds.FOLDS`);
    ``rows``, each head's rows kept by the capture (:mod:`.folds.rows`): "auto" (from ``ROWS_MIN_TOKENS`` tokens
    on), True, False, or the keys kept a row (at any length). Checked when made (``TypeError`` / ``ValueError``
    naming the option), before any model loads."""

    model: str | os.PathLike | PreTrainedModel | LoadedModel | None = None
    tokenizer: str | os.PathLike | PreTrainedTokenizerBase | None = None
    device: str | torch.device | None = None
    max_tokens: int | None = None
    trust_remote_code: bool = False
    progress: Progress | bool | None = None
    components: bool = False
    folds: tuple[type[Fold], ...] = field(default_factory=_registered)
    rows: bool | int | str = "auto"

    def __post_init__(self) -> None:
        check_max_tokens(self.max_tokens)
        check_components(self.components)
        _check_progress(self.progress)
        if not all(isinstance(f, type) and issubclass(f, Fold) for f in self.folds):
            raise TypeError(f"folds must be Fold subclasses, got {self.folds!r}")
        kept = KeptRows.configured(rows_setting(self.rows))  # the rows fold, told the option
        object.__setattr__(self, "folds", tuple(kept if issubclass(f, KeptRows) else f for f in self.folds))
        if MaxAttentionGrid not in self.folds:
            raise ValueError("folds must include MaxAttentionGrid: every extraction has its grid")

    def load(self) -> LoadedModel:
        """The model and tokenizer these options name (cached: the same objects on every call)."""
        return load_model(
            self.model, tokenizer=self.tokenizer, device=self.device, trust_remote_code=self.trust_remote_code
        )


def check_max_tokens(max_tokens: Any) -> None:
    """None or a positive int."""
    if max_tokens is not None and (not is_int(max_tokens)):
        raise TypeError(f"max_tokens must be an int or None, got {type(max_tokens).__name__}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive number of tokens, got {max_tokens}")


def _check_progress(progress: Any) -> None:
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise TypeError(
            f"progress must be True, False, None (a bar from {PROGRESS_MIN_TOKENS} tokens on) or a callable "
            f"progress(what, fraction), got {type(progress).__name__}"
        )


def no_progress(what: str, fraction: float) -> None:
    """No progress report."""


@contextlib.contextmanager
def progress_bar(progress: Progress | bool | None, loaded: LoadedModel, n_tokens: int) -> Iterator[Progress | None]:
    """A tqdm bar (``tqdm.auto``: a widget in a notebook) over the layers, advancing within each, as a
    :data:`Progress`, when ``progress`` is True, or None with a text of at least PROGRESS_MIN_TOKENS tokens;
    closed however the block ends. Else None."""
    if not (progress is True or (progress is None and n_tokens >= PROGRESS_MIN_TOKENS)):
        yield None
        return
    from tqdm.auto import tqdm

    layers = getattr(loaded.model.config, "num_hidden_layers", None)
    total = layers if isinstance(layers, int) and layers > 0 else 1
    bar = tqdm(total=total, desc=f"{loaded.name}, {n_tokens} tokens", unit="layer", bar_format=_BAR_FORMAT)

    def report(what: str, fraction: float) -> None:
        bar.n = round(min(max(fraction, 0.0), 1.0) * total, 2)
        bar.refresh()

    try:
        yield report
    finally:
        bar.close()


_BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n:.2f}/{total} layers [{elapsed}<{remaining}]"
