"""Induction heads by the standard repeated-random-token test.

A sequence of ``length`` random tokens is repeated once (after the model's first special token, when it has
one: BOS or [CLS]). In the second copy, an induction head attends from each token to the token that followed
that token's first occurrence (it completes "A B ... A" with "B"). A head's score is the mean attention of the
second copy's tokens on those keys, in [0, 1]; random heads give about 1 / (position), an induction head near 1.
The token ids come back with the scores, so that the test can be rerun with :func:`~.extraction.extract_token_ids`
and checked by hand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import int_at_least

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["InductionScores", "induction_scores"]


@dataclass(frozen=True, eq=False)
class InductionScores:
    """``scores``: one row per (layer, head) with ``induction``; ``token_ids`` the sequence run; the second copy
    starts at ``offset + length`` and its token at ``offset + length + s`` is scored on key ``offset + s + 1``."""

    scores: pd.DataFrame
    token_ids: np.ndarray
    offset: int
    length: int

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The (query, key) index pairs averaged: second-copy token, token after its first occurrence."""
        s = np.arange(self.length)
        return self.offset + self.length + s, self.offset + s + 1


def _check_length(length: int, offset: int, loaded: Any) -> None:
    """A TextTooLongError in the caller's terms (``length``) when the sequence exceeds the model's positions."""
    from ..errors import TextTooLongError

    limit = loaded.max_positions
    if limit is not None and offset + 2 * length > limit:
        raise TextTooLongError(
            f"length={length} needs {offset + 2 * length} positions ({offset} special + 2 x {length} random tokens) "
            f"but {loaded.name} takes at most {limit} ({loaded.positions_source}); pass length <= "
            f"{(limit - offset) // 2}"
        )


def induction_scores(
    model: str | os.PathLike | Any = None,
    *,
    length: int = 50,
    seed: int = 0,
    tokenizer: Any = None,
    device: Any = None,
) -> InductionScores:
    """Every head's induction score on ``length`` random tokens repeated once (see the module doc).

    The random tokens are drawn with ``seed`` (an int >= 0) from the model's vocabulary, leaving out its special
    tokens. The sequence holds ``2 * length`` tokens (and a BOS or [CLS] before them): a ``length`` beyond half the
    model's positions is refused, naming the largest that fits.
    """
    import pandas as pd

    from .extraction import extract_token_ids, load_model

    length = int_at_least(length, "length", 2)
    seed = int_at_least(seed, "seed", 0)
    loaded = load_model(model, tokenizer=tokenizer, device=device)
    vocab = int(loaded.model.get_input_embeddings().num_embeddings)  # type: ignore[arg-type]
    special = set(loaded.tokenizer.all_special_ids)
    candidates = np.setdiff1d(np.arange(min(vocab, len(loaded.tokenizer))), sorted(special))
    rng = np.random.default_rng(seed)
    repeated = rng.choice(candidates, size=length, replace=len(candidates) < length)
    first = getattr(loaded.tokenizer, "bos_token_id", None)
    first = getattr(loaded.tokenizer, "cls_token_id", None) if first is None else first
    prefix = [] if first is None else [int(first)]
    _check_length(length, len(prefix), loaded)
    ids = np.array(prefix + repeated.tolist() * 2, dtype=np.int64)
    ex = extract_token_ids(ids, loaded)
    result = InductionScores(pd.DataFrame(), ids, len(prefix), length)
    queries, keys = result.pairs()
    rows = []
    for layer in range(ex.n_layers):
        for head in range(ex.n_heads):
            A = ex.attention(layer, head)
            rows.append({"layer": layer, "head": head, "induction": float(A[queries, keys].astype(np.float64).mean())})
    return InductionScores(pd.DataFrame(rows), ids, len(prefix), length)
