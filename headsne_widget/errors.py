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
    """A dense array (every head's n x n, or every layer's hidden states) was asked for beyond the memory budget;
    the message names the per-head or per-layer accessor that stays within it."""


class TSNEDivergedError(HeadSNEError, ArithmeticError):
    """The t-SNE optimisation diverged (non-finite or blown-up embedding): the learning rate, or the
    early exaggeration, is too large for this P; the message suggests a smaller value."""
