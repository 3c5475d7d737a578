"""Run a Hugging Face transformer on a text and keep what the widget shows (an :class:`~.extracted.Extraction`):
the maximum-attention grid, every head's attention on demand and every layer's hidden states, with the tokens
and their character spans.

Memory stays bounded at long texts (see :mod:`.capture`): the forward pass keeps, per layer, the grid ``(H, n)``
and the post-RoPE queries and keys in the model's dtype, never every head's n x n; one head is recomputed
exactly when asked for. Hidden states are kept on the CPU in the model's dtype, ``(L + 1) x n x d``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._checks import is_int, text_characters
from ..errors import AttentionUnavailableError, TextTooLongError, UnsupportedAttentionError
from .attention import SUPPORTED, can_capture, capturing
from .components import check_components, finish_trace, keep_trace, traced_layers, tracing
from .extracted import Extraction, HiddenStates
from .loading import (
    BUNDLED_MODEL_NAME,
    DEFAULT_MODEL,
    LoadedModel,
    clear_model_cache,
    input_device,
    load_model,
    user_stacklevel,
)
from .scores import HeadStatistics
from .sources import CapturedAttention, DenseAttention, check_budget

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [  # loading's public names too: this is the stage's front door
    "BUNDLED_MODEL_NAME",
    "DEFAULT_MODEL",
    "PROGRESS_MIN_TOKENS",
    "Extraction",
    "HiddenStates",
    "LoadedModel",
    "Progress",
    "as_extraction",
    "check_text",
    "clear_model_cache",
    "extract",
    "extract_token_ids",
    "load_model",
]

#: ``progress(what, fraction)``: what is being computed ("capturing layer 3 of 12") and the fraction done
Progress = Callable[[str, float], None]
#: texts of at least this many tokens show a progress bar by default (``extract(..., progress=None)``): about
#: 2 s of capture for a small model on a laptop core, 3-5 s on a shared one
PROGRESS_MIN_TOKENS = 4096


def extract(
    text: str,
    model: str | os.PathLike | PreTrainedModel | LoadedModel | None = None,
    *,
    tokenizer: str | os.PathLike | PreTrainedTokenizerBase | None = None,
    device: str | torch.device | None = None,
    max_tokens: int | None = None,
    trust_remote_code: bool = False,
    progress: Progress | bool | None = None,
    components: bool = False,
) -> Extraction:
    """Tokenise ``text``, run ``model`` once and return all attentions and hidden states.

    ``max_tokens`` (special tokens included) truncates a long text with a warning; without it a text longer
    than the model's positions raises TextTooLongError. A special token written in the text ("[CLS]", "[SEP]",
    "<s>", ...) becomes that special token, as the tokenizer does by default (so "A [SEP] B" is a sentence pair):
    it is marked in ``special`` and has no character span, like the ones the tokenizer adds.

    ``progress``: None (default) shows a tqdm bar of the layers captured when the text has at least
    PROGRESS_MIN_TOKENS tokens; True always, False never; a callable ``progress(what, fraction)`` is called as
    the model loads, while each layer is captured (at most every ``layers.PROGRESS_INTERVAL_S``) and after it,
    and may raise to stop. KeyboardInterrupt (the kernel's interrupt) stops a capture at once, leaving the model
    as it was (its attention implementation restored, no thread still computing, torch's settings unchanged).

    ``components=True`` hooks the same forward pass and keeps what each layer wrote (its heads' contexts,
    values, feed-forward output, norms: :mod:`.components`; a pass of its own for a model whose config does not
    give its layers and width), for ``decompose(ex, layer)``,
    ``value_norms(ex)`` and ``head_outputs(ex, layer, head)`` without the model (capture/decompose.py).
    """
    check_text(text, max_tokens)
    check_components(components)
    _check_progress(progress)
    report = progress if callable(progress) else _no_progress
    report("loading the model", 0.0)
    loaded = load_model(model, tokenizer=tokenizer, device=device, trust_remote_code=trust_remote_code)
    token_ids, offsets, special, truncated = _encode(text, loaded, None if max_tokens is None else int(max_tokens))
    traced = traced_layers(loaded, token_ids.size, components)
    with _progress_bar(progress, loaded, token_ids.size) as bar:
        ex = _extraction(
            loaded,
            text=text,
            token_ids=token_ids,
            offsets=offsets,
            special=special,
            truncated=truncated,
            progress=bar or report,
            traced=traced,
        )
    if components and traced is None:  # a second pass of its own (or the reason it cannot be made)
        keep_trace(ex, loaded)
    return ex


def _no_progress(what: str, fraction: float) -> None:
    """No progress report."""


def _check_progress(progress: Any) -> None:
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise TypeError(
            f"progress must be True, False, None (a bar from {PROGRESS_MIN_TOKENS} tokens on) or a callable "
            f"progress(what, fraction), got {type(progress).__name__}"
        )


@contextlib.contextmanager
def _progress_bar(progress: Progress | bool | None, loaded: LoadedModel, n_tokens: int) -> Iterator[Progress | None]:
    """A tqdm bar (``tqdm.auto``: a widget in a notebook) over the layers, advancing within each, as a
    :data:`Progress`, when ``progress`` is True, or None with a text of at least PROGRESS_MIN_TOKENS tokens;
    closed however the block ends. Else None."""
    if not (progress is True or (progress is None and n_tokens >= PROGRESS_MIN_TOKENS)):
        yield None
        return
    from tqdm.auto import tqdm

    layers = getattr(loaded.model.config, "num_hidden_layers", None)
    total = layers if isinstance(layers, int) and layers > 0 else 1
    bar = tqdm(total=total, desc=f"{loaded.name}, {n_tokens} tokens", unit="layer", bar_format=_BAR_FORMAT)

    def report(what: str, fraction: float) -> None:
        bar.n = round(min(max(fraction, 0.0), 1.0) * total, 2)
        bar.refresh()

    try:
        yield report
    finally:
        bar.close()


_BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n:.2f}/{total} layers [{elapsed}<{remaining}]"


def check_text(text: Any, max_tokens: Any = None) -> None:
    """The checks of :func:`extract` that need no model: a non-empty str of characters, a positive max_tokens."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text_characters(text, "text")
    if not text.strip():
        raise ValueError("text is empty or only whitespace; give some words to look at")
    if max_tokens is not None and (not is_int(max_tokens)):
        raise TypeError(f"max_tokens must be an int or None, got {type(max_tokens).__name__}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive number of tokens, got {max_tokens}")


def extract_token_ids(
    token_ids: Sequence[int] | np.ndarray,
    model: str | os.PathLike | PreTrainedModel | LoadedModel | None = None,
    *,
    tokenizer: str | os.PathLike | PreTrainedTokenizerBase | None = None,
    device: str | torch.device | None = None,
    components: bool = False,
) -> Extraction:
    """Run the model on given token ids (special tokens as given, e.g. with a token swapped); ``components`` as
    :func:`extract`'s. The result has no character spans (``offsets`` all None) and ``text`` is the decoded ids."""
    check_components(components)
    loaded = load_model(model, tokenizer=tokenizer, device=device)
    ids = _check_token_ids(token_ids, loaded)
    traced = traced_layers(loaded, ids.size, components)
    text = str(loaded.tokenizer.decode(ids.tolist(), skip_special_tokens=True))
    special = _special_mask(ids, loaded.tokenizer, np.zeros(ids.size, dtype=bool))
    ex = _extraction(loaded, text=text, token_ids=ids, offsets=[None] * ids.size, special=special, truncated=False,
                     traced=traced)  # fmt: skip
    if components and traced is None:
        keep_trace(ex, loaded)
    return ex


def _extraction(
    loaded: LoadedModel,
    *,
    text: str,
    token_ids: np.ndarray,
    offsets: list[tuple[int, int] | None],
    special: np.ndarray,
    truncated: bool,
    progress: Progress = _no_progress,
    traced: int | None = None,
) -> Extraction:
    source, grid, states, head_stats, recorder = _forward(loaded, token_ids, progress, traced)
    ex = Extraction(
        text=text,
        tokens=list(loaded.tokenizer.convert_ids_to_tokens(token_ids.tolist())),
        token_ids=token_ids,
        offsets=offsets,
        special=special,
        max_attention=grid,
        model_name=loaded.name,
        truncated=truncated,
        attention_source=source,
        states=states,
        head_stats=head_stats,
    )
    if recorder is not None:
        finish_trace(ex, recorder)
    return ex


def _encode(
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
    special = _special_mask(ids, tokenizer, np.asarray(encoding["special_tokens_mask"], dtype=bool))
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


def _special_mask(ids: np.ndarray, tokenizer: Any, from_tokenizer: np.ndarray) -> np.ndarray:
    """The tokenizer's special-tokens mask, plus special ids written in the text ([UNK] is a text token)."""
    special_ids = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    return from_tokenizer | np.isin(ids, sorted(special_ids))


def _check_token_ids(token_ids: Sequence[int] | np.ndarray, loaded: LoadedModel) -> np.ndarray:
    ids = np.asarray(token_ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"token_ids must be a non-empty 1-D sequence, got shape {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"token_ids must be integers, got dtype {ids.dtype}")
    vocab_size = loaded.model.get_input_embeddings().num_embeddings
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}) for {loaded.name}, got {ids.min()}..{ids.max()}")
    limit = loaded.max_positions
    if limit is not None and ids.size > limit:
        raise TextTooLongError(
            f"{ids.size} token ids but {loaded.name} takes at most {limit} ({loaded.positions_source}); "
            f"pass at most {limit} of them (token_ids[:{limit}]), or use a model with more positions"
        )
    return ids.astype(np.int64)


def _forward(
    loaded: LoadedModel, token_ids: np.ndarray, progress: Progress = _no_progress, traced: int | None = None
) -> tuple[CapturedAttention | DenseAttention, np.ndarray, HiddenStates, HeadStatistics | None, Any]:
    """One forward pass: the attention source, the grid (L, H, n) float32, the hidden states, on the CPU, the
    head scores folded during the capture (None on the eager path: computed from the dense heads when asked), and
    with ``traced`` layers the components' recorder of the same pass (:func:`.components.tracing`; else None).

    Architectures whose attention goes through transformers' AttentionInterface are captured layer by layer
    (:mod:`.capture`); the others run eager with ``output_attentions=True``, which holds every head's n x n at
    once, so they are refused beyond the dense budget.
    """
    model = loaded.model
    input_ids = torch.as_tensor(token_ids, device=input_device(model))[None, :]
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "output_hidden_states": True}
    model_class: Any = type(model)  # a class is hashable; mypy's view of PreTrainedModel says otherwise
    if _takes_use_cache(model_class):
        inputs["use_cache"] = False  # no key/value cache: the capture keeps what it needs
    layers = getattr(model.config, "num_hidden_layers", None)
    total = layers if isinstance(layers, int) and layers > 0 else None
    progress(f"running {loaded.name} on {len(token_ids)} tokens", 0.0)

    def on_layer(k: int) -> None:
        progress(f"capturing layer {k} of {total or '?'}", k / total if total else 0.0)

    def on_chunks(k: int, fraction: float) -> None:  # while layer k is captured
        progress(f"capturing layer {k} of {total or '?'}", (k - 1 + fraction) / total if total else 0.0)

    recorder = None
    if can_capture(model):
        components = tracing(loaded, traced) if traced is not None else contextlib.nullcontext()
        with torch.inference_mode(), capturing(model, on_layer, on_chunks) as session, components as recorder:
            output = model(**inputs, return_dict=True)
        if not session.layers:
            raise AttentionUnavailableError(
                f"{loaded.name} ({type(model).__name__}) ran no attention layer: it has no attention to show"
            )
        source: CapturedAttention | DenseAttention = CapturedAttention(session.layers)
        grid = np.stack(session.grids)
        head_stats: HeadStatistics | None = HeadStatistics.stack(session.scores)
    else:
        head_stats = None
        source, output = _eager_attentions(loaded, inputs)
        grid = source.grid()
    hidden_states = getattr(output, "hidden_states", None)
    if not hidden_states:
        raise AttentionUnavailableError(f"{loaded.name} ({type(model).__name__}) returned no hidden states")
    states = HiddenStates(torch.stack([_one_sequence(h, loaded).detach().to("cpu") for h in hidden_states]))
    if not (np.isfinite(grid).all() and torch.isfinite(states.states).all()):
        raise AttentionUnavailableError(
            f"{loaded.name} produced NaN or infinite attention/hidden states; check its weights and dtype"
        )
    return source, grid, states, head_stats, recorder


def _one_sequence(hidden: torch.Tensor, loaded: LoadedModel) -> torch.Tensor:
    """``(n, d)`` of one layer's hidden states ``(1, n, d)``. Gemma 3n keeps several streams (AltUp:
    ``(streams, 1, n, d)``): the one its layers predict with, ``config.altup_active_idx``, is the layer's output."""
    active = getattr(loaded.model.config, "altup_active_idx", None)
    if hidden.ndim == 4 and isinstance(active, int):
        hidden = hidden[active]
    if hidden.ndim != 3 or hidden.shape[0] != 1:
        raise AttentionUnavailableError(
            f"{loaded.name} ({type(loaded.model).__name__}) returns hidden states of shape {tuple(hidden.shape)} per "
            "layer; headsne-widget reads (1, tokens, hidden): this architecture's hidden states are not supported"
        )
    return hidden[0]


def _eager_attentions(loaded: LoadedModel, inputs: dict) -> tuple[DenseAttention, Any]:
    """Every head at once from ``output_attentions=True``, for models that bypass the AttentionInterface."""
    model, n = loaded.model, int(inputs["input_ids"].shape[1])
    config = model.config
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    if isinstance(layers, int) and isinstance(heads, int):
        try:
            check_budget((layers, heads, n, n), "every head's attention", "fewer tokens")
        except MemoryError as err:
            raise UnsupportedAttentionError(
                f"{loaded.name} ({type(model).__name__}) does not route its attention through transformers' "
                f"AttentionInterface, so its heads can only be read all at once with output_attentions=True, "
                f"and {err}. {SUPPORTED}"
            ) from err
    with torch.inference_mode():
        output = model(**inputs, output_attentions=True, return_dict=True)
    attentions = getattr(output, "attentions", None)
    if not attentions or any(a is None for a in attentions):
        implementation = getattr(config, "_attn_implementation", "unknown")
        raise AttentionUnavailableError(
            f"{loaded.name} ({type(model).__name__}) returned no attention matrices "
            f"(attention implementation: {implementation!r}); it needs eager attention layers"
        )
    return DenseAttention(torch.stack([a[0].float().cpu() for a in attentions]).numpy()), output


@functools.cache
def _takes_use_cache(model_class: Any) -> bool:
    return "use_cache" in inspect.signature(model_class.forward).parameters


def as_extraction(
    text: str | Extraction,
    model: Any = None,
    *,
    tokenizer: Any = None,
    device: str | torch.device | None = None,
    max_tokens: int | None = None,
) -> Extraction:
    """``text`` itself when it is already an Extraction (then model, tokenizer and max_tokens must be None),
    else :func:`extract` of it: what the widget and the export accept as their input."""
    if isinstance(text, Extraction):
        if model is not None or tokenizer is not None or max_tokens is not None:
            raise TypeError("model, tokenizer and max_tokens do not apply when text is already an Extraction")
        return text
    return extract(text, model, tokenizer=tokenizer, device=device, max_tokens=max_tokens)
