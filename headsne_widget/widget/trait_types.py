"""The trait types the protocol declares its traits with (:mod:`.protocol`): strict numbers (no bools, finite),
read-only numpy arrays of one dtype and rank, and a text's token indices, each refusing a bad value with a message
that names the trait."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import traitlets as t

from .._checks import is_int

__all__ = ["Array", "StrictFloat", "StrictInt", "TokenIndices"]


class StrictInt(t.Int):
    """An int that is not a bool: ``True`` is not layer 1 (JSON ``true`` from the browser neither)."""

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, bool):
            self.error(obj, value)
        if isinstance(value, np.integer):
            value = int(value)
        return super().validate(obj, value)


class StrictFloat(t.Float):
    """A finite float that is not a bool; with ``positive``, also > 0."""

    def __init__(self, *args: Any, positive: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.positive = positive

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, bool):
            self.error(obj, value)
        if isinstance(value, np.floating | np.integer):
            value = float(value)
        if isinstance(value, float | int) and not (math.isfinite(value) and (value > 0 or not self.positive)):
            raise t.TraitError(f"{self.name} must be a finite number{' > 0' if self.positive else ''}, got {value!r}")
        return super().validate(obj, value)


class Array(t.TraitType):
    """A numpy array (or None) of a fixed dtype and number of dimensions; finite when floating."""

    info_text = "a numpy array or None"

    def __init__(self, dtype: str, ndim: int, **kwargs: Any) -> None:
        super().__init__(default_value=None, allow_none=True, **kwargs)
        self.dtype, self.ndim = np.dtype(dtype), ndim

    def validate(self, obj: Any, value: Any) -> np.ndarray | None:
        if value is None:
            return None
        a = np.asarray(value)
        if a.ndim != self.ndim or a.dtype.kind not in "fiub":
            raise t.TraitError(f"{self.name} must be a real {self.ndim}-D array, got {a.dtype} of shape {a.shape}")
        out = np.array(a, dtype=self.dtype)  # a copy of its own: the caller's array may change afterwards
        if out.dtype.kind == "f" and not np.isfinite(out).all():
            raise t.TraitError(f"{self.name} holds NaN or inf (or values beyond {self.dtype})")
        out.flags.writeable = False
        return out


class TokenIndices(t.TraitType):
    """Token indices of the text: a list, tuple, set or integer numpy array of ints in [0, n); stored sorted and
    without repeats (n = the owner's ``tokens``)."""

    info_text = "a list of token indices"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(default_value=[], **kwargs)

    def make_dynamic_default(self) -> list[int]:
        return []  # a list of each widget's own

    def validate(self, obj: Any, value: Any) -> list[int]:
        n = len(getattr(obj, "tokens", None) or [])
        if isinstance(value, np.ndarray):
            if value.ndim != 1 or value.dtype.kind not in "iu":
                raise t.TraitError(f"{self.name} takes token indices (integers), got an array of {value.dtype}")
            value = value.tolist()
        if isinstance(value, str | bytes | dict) or not hasattr(value, "__iter__"):
            raise t.TraitError(f"{self.name} takes a list of token indices, got {type(value).__name__}")
        indices = []
        for i in value:
            if not is_int(i):
                raise t.TraitError(f"{self.name} takes token indices (integers), got {type(i).__name__} {i!r}")
            indices.append(int(i))
        bad = [i for i in indices if not 0 <= i < n]
        if bad:
            raise t.TraitError(f"{self.name} token(s) {bad[:5]} out of range: the text has {n} tokens (0 to {n - 1})")
        return sorted(set(indices))
