"""The sources of P, one class a module, registered in one table (:data:`SOURCES`).

The widget's mode control, the protocol, the atlas, the prefetch and the studies read the modes from this table;
a source's ``name`` is the mode string users pass (``mode="attention"``). Adding a mode: a module here with a
:class:`~.base.PSource` subclass, one entry below, and its tests.
"""

from __future__ import annotations

from typing import Any

from .attention import Attention
from .base import Built, HeadMatrixSource, PointSource, PSource
from .head_output import HeadOutput
from .hidden import Hidden
from .norm import Norm
from .query_key import QueryKey

__all__ = ["MODES", "SOURCES", "Built", "HeadMatrixSource", "PSource", "PointSource", "source"]

#: every source by its mode name, in the order the mode control lists them
SOURCES: dict[str, PSource] = {s.name: s for s in (Attention(), Hidden(), QueryKey(), Norm(), HeadOutput())}
#: the mode names
MODES: tuple[str, ...] = tuple(SOURCES)


def source(mode: Any) -> PSource:
    """The source of ``mode`` (a name from :data:`MODES`), else a ValueError listing them."""
    if isinstance(mode, PSource):
        return mode
    if not isinstance(mode, str) or mode not in SOURCES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
    return SOURCES[mode]
