"""The errors a user can meet, each naming its cause. One place so that every module raises the same kinds."""

from __future__ import annotations


class HeadSNEError(Exception):
    """Base class of this package's own errors."""


class ModelLoadError(HeadSNEError, OSError):
    """A model or tokenizer could not be loaded (unknown name, no network, no local copy)."""


class AttentionUnavailableError(HeadSNEError, RuntimeError):
    """The model ran but returned no attention matrices."""


class TextTooLongError(HeadSNEError, ValueError):
    """The text has more tokens than the model has positions; ``max_tokens=`` truncates."""


class DegenerateAffinitiesError(HeadSNEError, ValueError):
    """P is undefined: the attention head puts no mass off the diagonal among the kept tokens."""


class UnsupportedAttentionError(HeadSNEError, ValueError):
    """The model's attention cannot be captured exactly (its layers bypass transformers' AttentionInterface, or
    the capture does not reproduce its eager attention); the message names the architecture and what is supported."""


class MemoryBudgetError(HeadSNEError, MemoryError):
    """An array was asked for beyond the memory budget: a dense one (every head's n x n, every layer's hidden
    states; the message names the per-head or per-layer accessor that stays within it) or a head's sparse rows
    (the message names the head, what it would need and what to set). ``needed_entries`` / ``needed_bytes``: the
    (estimated) kept entries and bytes it would have taken, where known (None otherwise), so a caller can decide."""

    def __init__(self, message: str, *, needed_entries: int | None = None, needed_bytes: int | None = None) -> None:
        super().__init__(message)
        self.needed_entries, self.needed_bytes = needed_entries, needed_bytes


class IndexOutOfRangeError(HeadSNEError, IndexError, ValueError):
    """A layer or head index outside ``[0, count)`` (negative ones included): an IndexError for an accessor, a
    ValueError for an argument, as numpy's AxisError is both."""


class TSNEDivergedError(HeadSNEError, ArithmeticError):
    """The t-SNE optimisation diverged (non-finite or blown-up embedding): the learning rate, or the
    early exaggeration, is too large for this P; the message suggests a smaller value."""


class ParserUnavailableError(HeadSNEError, ImportError):
    """A dependency parser was asked for that is not installed (spaCy, its model, conllu): the message names the
    extra that installs it (``pip install 'headsne-widget[syntax]'``)."""
