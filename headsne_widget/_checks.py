"""Argument checks shared by the numeric modules, so that every function names bad input the same way."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import IndexOutOfRangeError

#: the share of each query row's attention a sparse head keeps unless told otherwise
DEFAULT_MASS = 0.99


def is_int(value: Any) -> bool:
    """An integer, numpy's included, and never a bool (``True`` is not 1 here)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_number(value: Any) -> bool:
    """A real number (int or float, numpy's included), never a bool."""
    return is_int(value) or isinstance(value, (float, np.floating))


def number(value: Any, name: str, what: str) -> float:
    """``value`` as a float, else a TypeError naming ``name`` and what it is (the range is the caller's)."""
    if not is_number(value):
        raise TypeError(f"{name} must be a number ({what}), got {value!r} ({type(value).__name__})")
    return float(value)


def check_mass(mass: Any) -> float:
    """``mass`` as a float in (0, 1]: the share of each row's attention a sparse head keeps."""
    value = number(mass, "mass", "the share of each row's attention to keep")
    if not (0.0 < value <= 1.0):  # (NaN fails too)
        raise ValueError(
            f"mass must lie in (0, 1], the share of each row's attention to keep (e.g. mass=0.99); got {mass!r}"
        )
    return value


def real_array(a: Any, name: str) -> np.ndarray:
    """``a`` as a numpy array of finite real numbers (dtype kept), else a TypeError or ValueError naming ``name``."""
    try:
        arr = np.asarray(a)
    except Exception as err:
        raise TypeError(f"{name} must be an array, got {type(a).__name__}") from err
    real_dtype(arr.dtype, name)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def int_at_least(value: Any, name: str, least: int) -> int:
    """``value`` as an int >= ``least``, else a TypeError or ValueError naming ``name``."""
    if not is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < least:
        bound = "non-negative" if least == 0 else f"at least {least}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return int(value)


def check_index(value: Any, count: int, name: str, unit: str) -> int:
    """A 0-based index in ``[0, count)``; a bool, a non-integer or a negative index is refused (``True`` is not
    layer 1, and -1 is not the last layer: one meaning for every accessor)."""
    if not is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < count:
        raise IndexOutOfRangeError(f"{name} {value} is out of range: the model has {count} {unit} (0 to {count - 1})")
    return int(value)


def flag(value: Any, name: str) -> bool:
    """``value`` as a bool; anything else (1, "no", None) is a TypeError naming ``name``: "no" is truthy."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def real_dtype(dtype: Any, name: str) -> np.dtype:
    """``dtype`` if it holds real numbers (integers or floats), else the TypeError :func:`real_array` gives."""
    dt = np.dtype(dtype)
    if not (np.issubdtype(dt, np.floating) or np.issubdtype(dt, np.integer)):
        raise TypeError(f"{name} must be a real-valued numeric array (real numbers), got dtype {dt}")
    return dt


def float_dtype(dtype: Any) -> np.dtype:
    """P's dtype, checked: float32 or float64, else a TypeError."""
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dt}")
    return dt


def text_characters(text: str, name: str) -> None:
    """A ValueError naming ``name`` and the index of a lone UTF-16 surrogate: no character, no tokenizer takes it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{name} holds a lone surrogate {text[err.start]!r} at index {err.start} (half of a UTF-16 pair, not a "
            "character); decode the source with errors='replace' or remove it"
        ) from None


def check_texts(texts: Any) -> list[str]:
    """The corpus as a list of strings: any iterable of str (a pandas Series by its values, in order)."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a collection of strings (a list, tuple or pandas Series), not one string")
    values = getattr(texts, "tolist", None)
    try:
        items = list(values() if callable(values) else texts)
    except TypeError as err:
        raise TypeError(f"texts must be an iterable of strings, got {type(texts).__name__}") from err
    if not items:
        raise ValueError("the corpus is empty: pass at least one text (headsne_widget.texts.CORPUS is one)")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"texts[{i}] is a {type(item).__name__}, not a str: every text must be a string")
        text_characters(item, f"texts[{i}]")  # as extract() does: the tokenizer's own error names nothing
    return items
