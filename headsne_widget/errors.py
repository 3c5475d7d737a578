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
