"""Words and a model's tokens, matched by their characters, whatever the tokenizer.

A token belongs to the word that holds most of its characters (whitespace aside: a BPE token's leading space, a
SentencePiece "▁"), the first such word on a tie; special tokens, tokens of whitespace alone and tokens outside
every word belong to none. A word with no token (cut off by ``max_tokens``, or every character of it shared with
a token that belongs to a neighbour) is left out of every score that needs it, and counted.

The rule for a word in several pieces, the same everywhere (Clark et al. 2019, section 4.1): attention **to** a
word is the sum of the attention to its pieces, attention **from** a word is the mean of its pieces' rows, and a
word's state is the mean of its pieces' states. So a word-level row still sums to the share of the row that
reaches words (1 less what goes to special tokens), and a word split in three is not three times as loud.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse

from ..capture.extracted import Extraction

__all__ = ["WordAlignment", "align_extraction", "align_words"]


class WordAlignment:
    """Which word each token belongs to (``token_word``, int64 ``(n_tokens,)``, -1 for none) and the pooling of
    token-level arrays into word-level ones by the module's rule. Read-only."""

    def __init__(self, token_word: np.ndarray, n_words: int) -> None:
        self.token_word = np.asarray(token_word, dtype=np.int64)
        self.token_word.flags.writeable = False
        self.n_words = int(n_words)
        kept = np.flatnonzero(self.token_word >= 0)
        n = self.token_word.size
        self.pieces = np.bincount(self.token_word[kept], minlength=self.n_words).astype(np.int64)
        self.pieces.flags.writeable = False
        ones = np.ones(kept.size)
        self._to = sparse.csr_array((ones, (kept, self.token_word[kept])), shape=(n, self.n_words))
        mean = 1.0 / np.maximum(self.pieces, 1)
        self._from = sparse.csr_array((mean[self.token_word[kept]], (kept, self.token_word[kept])),
                                      shape=(n, self.n_words))  # fmt: skip

    @property
    def aligned(self) -> np.ndarray:
        """bool ``(n_words,)``: the words that have at least one token."""
        return self.pieces > 0

    def tokens(self, word: int) -> np.ndarray:
        """The token indices of word ``word``, in order."""
        return np.flatnonzero(self.token_word == word)

    def to_words(self, attention: np.ndarray) -> np.ndarray:
        """float64 ``(m, m)`` word-level attention of one head's ``(n, n)`` (rows: the attending word): from a word
        the mean over its pieces' rows, to a word the sum over its pieces' columns; 0 at words without tokens."""
        a = np.asarray(attention, dtype=np.float64)
        to_words = (self._to.T @ a.T).T  # (n, m): each row's attention summed over each word's pieces
        return np.asarray(self._from.T @ to_words)

    def states(self, states: np.ndarray) -> np.ndarray:
        """float64 ``(m, d)`` word states: the mean of each word's pieces' states (0 at words without tokens)."""
        return np.asarray(self._from.T @ np.asarray(states, dtype=np.float64))

    def __repr__(self) -> str:
        return f"WordAlignment({self.token_word.size} tokens, {self.n_words} words, {int(self.aligned.sum())} aligned)"


def align_words(text: str, offsets: Sequence[tuple[int, int] | None], words: Any) -> WordAlignment:
    """The alignment of tokens with character ``offsets`` (None for special tokens, as ``Extraction.offsets``)
    to ``words`` (a parse: columns ``start`` and ``end``, or ``(start, end)`` pairs) of ``text``, by the module's
    rule."""
    spans = _word_spans(words)
    owner = np.full(len(text), -1, dtype=np.int64)
    for w, (start, end) in enumerate(spans):
        owner[start:end] = w
    space = np.fromiter((c.isspace() for c in text), dtype=bool, count=len(text))
    token_word = np.full(len(offsets), -1, dtype=np.int64)
    for t, span in enumerate(offsets):
        if span is None:
            continue
        start, end = max(int(span[0]), 0), min(int(span[1]), len(text))
        held = owner[start:end][~space[start:end]]
        held = held[held >= 0]
        if held.size:
            first = int(held.min())
            token_word[t] = first + int(np.argmax(np.bincount(held - first)))  # most characters, first on a tie
    return WordAlignment(token_word, len(spans))


def align_extraction(ex: Extraction, words: Any) -> WordAlignment:
    """:func:`align_words` of an extraction's tokens (its text and offsets) to a parse of its text."""
    text = getattr(words, "attrs", {}).get("text")
    if text is not None and text != ex.text:
        raise ValueError(
            f"the parse is of another text ({text[:40]!r}) than the extraction's ({ex.text[:40]!r}): parse ex.text"
        )
    return align_words(ex.text, ex.offsets, words)


def _word_spans(words: Any) -> list[tuple[int, int]]:
    if hasattr(words, "columns"):
        return [(int(s), int(e)) for s, e in zip(words["start"], words["end"])]
    return [(int(s), int(e)) for s, e in words]
