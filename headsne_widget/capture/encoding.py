"""A text's tokens for the capture: ids, character spans, special tokens, and the cut at ``max_tokens``.

A long text is tokenised a prefix at a time (:func:`_leading_encoding`), never whole for a few tokens.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import TextTooLongError
from .loading import LoadedModel, user_stacklevel

__all__ = ["encode", "special_mask"]


def encode(
    text: str, loaded: LoadedModel, max_tokens: int | None
) -> tuple[np.ndarray, list[tuple[int, int] | None], np.ndarray, bool]:
    """Token ids, character spans, special-token mask and whether the text was cut to ``max_tokens``.

    Only a prefix of a long text is tokenised (:func:`_leading_encoding`): enough to decide the cut or the
    refusal, never the whole of a 10 MB text for 64 tokens (issue 32.8: 14 s and 2.6 GiB)."""
    tokenizer, limit = loaded.tokenizer, loaded.max_positions
    refused = max_tokens is None or (limit is not None and max_tokens > limit)  # longer than limit: an error
    cap = limit if refused else max_tokens
    encoding, source = _leading_encoding(tokenizer, text, cap)
    n = len(encoding["input_ids"])
    count = str(n) if source is text else f"more than {cap}"  # a prefix: the text's count is not known
    n_special = int(np.sum(encoding["special_tokens_mask"]))
    if n == n_special:
        raise ValueError(
            f"text {text[:40]!r} gives no tokens for {loaded.name} (it holds only characters the tokenizer drops)"
        )
    if max_tokens is not None and max_tokens <= n_special:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for text besides the {n_special} special tokens")
    if limit is not None and n > limit and refused:
        hint = f"max_tokens={max_tokens} is above that limit; " if max_tokens is not None else ""
        raise TextTooLongError(
            f"the text has {count} tokens but {loaded.name} takes at most {limit} ({loaded.positions_source}); "
            f"{hint}pass max_tokens={limit} (or less) to truncate it, or use a model with more positions"
        )
    truncated = max_tokens is not None and n > max_tokens
    if truncated:
        warnings.warn(
            f"text truncated from {count} to {max_tokens} tokens (max_tokens={max_tokens})",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        encoding = _tokenize(tokenizer, source, max_tokens)
    ids = np.asarray(encoding["input_ids"], dtype=np.int64)
    special = special_mask(ids, tokenizer, np.asarray(encoding["special_tokens_mask"], dtype=bool))
    spans = encoding.get("offset_mapping") or [None] * ids.size
    offsets = [None if flag or span is None else (int(span[0]), int(span[1])) for span, flag in zip(spans, special)]
    return ids, offsets, special, truncated


#: characters per token of the first prefix of a long text that is tokenised (few tokens are longer); each
#: further prefix is _PREFIX_GROWTH times longer
_PREFIX_CHARS_PER_TOKEN = 8
_PREFIX_GROWTH = 4


def _leading_encoding(tokenizer: Any, text: str, cap: int | None) -> tuple[Any, str]:
    """(encoding, the string encoded): the whole text's when it has at most ``cap`` tokens (or ``cap`` is None),
    else a prefix's that has more than ``cap`` tokens, the first ``cap + 1`` of them the whole text's.

    Prefixes grow geometrically; one is taken when the next, longer one starts with the same ``cap + 1`` tokens
    (ids, spans and special marks): the cut changes only the tokens near it (the word it splits), so the text's
    tokens before it are those. A text with no such prefix is tokenised whole, as before.
    """
    length, lead = _PREFIX_CHARS_PER_TOKEN * ((cap or 0) + 2), None
    while cap is not None and length < len(text):
        prefix = text[:length]
        encoding = _tokenize(tokenizer, prefix, None)
        now = _lead(encoding, cap + 1) if len(encoding["input_ids"]) > cap + 1 else None
        if now is not None and now == lead:
            return encoding, prefix
        lead, length = now, length * _PREFIX_GROWTH
    return _tokenize(tokenizer, text, None), text


def _lead(encoding: Any, count: int) -> tuple[list, list, list]:
    """The first ``count`` tokens of an encoding: ids, character spans and special marks."""
    spans = encoding.get("offset_mapping") or []
    return (
        list(encoding["input_ids"][:count]),
        [tuple(span) for span in spans[:count]],
        list(encoding["special_tokens_mask"][:count]),
    )


def _tokenize(tokenizer: Any, text: str, max_length: int | None) -> Any:
    options: dict[str, Any] = {"return_special_tokens_mask": True, "return_offsets_mapping": bool(tokenizer.is_fast)}
    if max_length is not None:
        options.update(truncation=True, max_length=max_length)
    else:
        options["verbose"] = False  # the length is checked here, with a clearer message
    return tokenizer(text, **options)


def special_mask(ids: np.ndarray, tokenizer: Any, from_tokenizer: np.ndarray) -> np.ndarray:
    """The tokenizer's special-tokens mask, plus special ids written in the text ([UNK] is a text token)."""
    special_ids = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    return from_tokenizer | np.isin(ids, sorted(special_ids))
