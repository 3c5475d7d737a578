"""Per-token colour values for ``HeadSNE.color_by``: the user's numbers, or labels turned into categories."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_CATEGORIES", "color_traits", "color_values"]

#: most distinct labels drawn as categories (a categorical palette beyond this is unreadable)
MAX_CATEGORIES = 20


def color_values(values: Any, n: int) -> tuple[np.ndarray, list[str]]:
    """``values`` (one per token) as float32 colour values and category names.

    Real numbers give ``(values, [])`` (drawn on a sequential scale); anything else (str, bool, mixed)
    gives integer codes into the sorted distinct labels. Raises ValueError for a wrong length, NaN, or
    more than ``MAX_CATEGORIES`` labels.
    """
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"color_by takes a mode name or one value per token, got {type(values).__name__}")
    if len(values) != n:
        raise ValueError(f"color_by needs one value per token: {n} tokens, got {len(values)} values")
    a = np.asarray(values)
    if a.ndim == 1 and a.dtype.kind in "iuf":
        if not np.isfinite(a).all():
            raise ValueError("color_by values hold NaN or inf")
        shown = a.astype(np.float32)  # the browser's precision
        if not np.isfinite(shown).all():
            raise ValueError(f"color_by values reach {np.abs(a).max():.3g}, beyond float32: rescale them")
        if len(np.unique(shown)) < len(np.unique(a)):
            raise ValueError(
                "color_by values differ by less than float32 tells apart (integers above 2**24, say): "
                "subtract their minimum, rescale them, or pass them as labels (str)"
            )
        return shown, []
    labels = [str(v) for v in values]
    categories = sorted(set(labels))
    if len(categories) > MAX_CATEGORIES:
        raise ValueError(f"color_by has {len(categories)} distinct labels; at most {MAX_CATEGORIES} can be told apart")
    code = {c: i for i, c in enumerate(categories)}
    return np.array([code[label] for label in labels], dtype=np.float32), categories


def color_traits(value: Any, n: int) -> dict[str, Any]:
    """The widget traits for ``HeadSNE.color_by = value``: a mode name, or one value per token ("user")."""
    if isinstance(value, str):
        if value == "user":
            raise ValueError("color_by='user' needs your values: pass one value (or label) per token instead")
        return {"color_mode": value}
    values, categories = color_values(value, n)
    return {"color_values": values, "color_categories": categories, "color_mode": "user"}
