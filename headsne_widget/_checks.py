"""Argument checks shared by the numeric modules, so that every function names bad input the same way."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import IndexOutOfRangeError


def real_array(a: Any, name: str) -> np.ndarray:
    """``a`` as a numpy array of finite real numbers (dtype kept), else a TypeError or ValueError naming ``name``."""
    try:
        arr = np.asarray(a)
    except Exception as err:
        raise TypeError(f"{name} must be an array, got {type(a).__name__}") from err
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must be a real-valued numeric array (real numbers), got dtype {arr.dtype}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def int_at_least(value: Any, name: str, least: int) -> int:
    """``value`` as an int >= ``least``, else a TypeError or ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < least:
        bound = "non-negative" if least == 0 else f"at least {least}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return int(value)


def check_index(value: Any, count: int, name: str, unit: str) -> int:
    """A 0-based index in ``[0, count)``; a bool, a non-integer or a negative index is refused (``True`` is not
    layer 1, and -1 is not the last layer: one meaning for every accessor)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < count:
        raise IndexOutOfRangeError(f"{name} {value} is out of range: the model has {count} {unit} (0 to {count - 1})")
    return int(value)
