"""Where a word is in a text: whole-word matches in any script, the sentence around a match, the tokens over it
(the finding half of :mod:`.occurrences`, which captures what the model makes of them)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["UNSPACED", "check_word", "find_word", "inside_unspaced", "sentence_around", "token_span"]

_SENTENCE_END = re.compile(r"([.!?]+[\"')\]]*)\s+|\n\s*\n")


def check_word(word: Any) -> str:
    """``word`` stripped: a non-empty str."""
    if not isinstance(word, str):
        raise TypeError(f"word must be a str, got {type(word).__name__} {word!r}")
    if not word.strip():
        raise ValueError("word is empty or only whitespace: give the word to look for")
    return word.strip()


#: scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Japanese kana, Han): a letter of one
#: of them beside a match is no sign that the match is part of a longer word
UNSPACED = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
)
_UNSPACED = re.compile(f"[{UNSPACED}]")


def find_word(word: str, text: str) -> list[tuple[int, int]]:
    """Character spans of ``word`` in ``text``, any case: whole words (no letter, digit or _ either side), where a
    letter of a script written without spaces (Chinese, Japanese, Thai, ...) beside it counts as a boundary (such
    text has no other: "银行" is found in "我去银行取钱")."""
    pattern = re.compile(rf"(?<![^\W{UNSPACED}]){re.escape(word)}(?![^\W{UNSPACED}])", re.IGNORECASE)
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def inside_unspaced(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` touches a letter of a script written without spaces: it may be part of a
    longer word there (nothing in the text says where words end)."""
    return bool(
        (start > 0 and _UNSPACED.match(text[start - 1]) and _UNSPACED.match(text[start]))
        or (end < len(text) and _UNSPACED.match(text[end]) and _UNSPACED.match(text[end - 1]))
    )


def sentence_around(text: str, start: int, end: int) -> tuple[int, str]:
    """(where it starts, the sentence) around ``text[start:end]``: from the last sentence end (. ! ? then space,
    or a blank line) before it to the next one after it."""
    lo = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        lo = m.end()
    after = _SENTENCE_END.search(text, end)
    hi = len(text) if after is None else (after.end(1) if after.group(1) else after.start())
    return lo, text[lo:hi].rstrip()


def token_span(offsets: list[tuple[int, int] | None], start: int, end: int) -> tuple[int, int] | None:
    """[first, last + 1) of the tokens whose character spans overlap [start, end); None if none does."""
    hits = [i for i, span in enumerate(offsets) if span is not None and span[0] < end and span[1] > start]
    return (hits[0], hits[-1] + 1) if hits else None
