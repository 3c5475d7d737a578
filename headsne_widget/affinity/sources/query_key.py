"""Query-key mode: a head's queries and keys as two points per token, a query attracting the keys it attends to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .attention import Attention
from .base import Built, Check, Spec

if TYPE_CHECKING:
    from ...capture.extraction import Extraction

__all__ = ["QUERY_KEY_MAX_TOKENS", "QueryKey"]

#: most tokens of a query-key selection: its P is (2m) x (2m) and dense (256 MiB float32 at 4096 tokens), and each
#: t-SNE step costs four times a head's
QUERY_KEY_MAX_TOKENS = 4096


class QueryKey(Attention):
    """The bipartite P of one head (:func:`~..affinities.query_key_affinities`): (2m, 2m), queries then keys."""

    name = "query-key"
    point_roles = ("query", "key")
    points_per_token = len(point_roles)
    has_sparse = False
    max_tokens = QUERY_KEY_MAX_TOKENS
    too_many = "its P is (2m)^2 and dense"
    prefetch = None
    describes = "the selected head's queries and keys in one t-SNE"
    title = "query-key t-SNE"
    option = "queries and keys"
    caption = "queries (filled) and keys (rings) t-SNE"

    def label(self, layer: int, head: int) -> str:
        return f"queries and keys of layer {layer} head {head}"

    def points(self, kept: np.ndarray) -> np.ndarray:
        return np.concatenate([kept, kept])

    def dense(
        self,
        ex: Extraction,
        spec: Spec,
        *,
        dtype: Any,
        out: np.ndarray | None,
        matrix: np.ndarray | None,
        check: Check = None,
    ) -> Built:
        from ..affinities import query_key_affinities

        A = self.matrix(ex, spec.layer, spec.head) if matrix is None else matrix
        P, kept = query_key_affinities(A, exclude=spec.exclude, dtype=dtype, out=out)
        return Built(P, self.points(kept))
