"""Run a Hugging Face transformer on a text and keep what the widget shows (an :class:`~.extracted.Extraction`):
the maximum-attention grid, every head's attention on demand and every layer's hidden states, with the tokens
and their character spans.

Memory stays bounded at long texts (see :mod:`.capture`): the forward pass keeps, per layer, the grid ``(H, n)``
and the post-RoPE queries and keys in the model's dtype, never every head's n x n; one head is recomputed
exactly when asked for. Hidden states are kept on the CPU in the model's dtype, ``(L + 1) x n x d``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._checks import text_characters
from ..errors import AttentionUnavailableError, TextTooLongError, UnsupportedAttentionError
from .attention import SUPPORTED, can_capture, capturing
from .components import finish_trace, keep_trace, traced_layers, tracing
from .encoding import encode, special_mask
from .extracted import Extraction, HiddenStates
from .folds import Fold, Folds, MaxAttentionGrid
from .loading import (
    BUNDLED_MODEL_NAME,
    DEFAULT_MODEL,
    LoadedModel,
    clear_model_cache,
    input_device,
    load_model,
)
from .options import PROGRESS_MIN_TOKENS, CaptureOptions, Progress, check_max_tokens, no_progress, progress_bar
from .sources import CapturedAttention, DenseAttention, check_budget

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [  # loading's public names too: this is the stage's front door
    "BUNDLED_MODEL_NAME",
    "DEFAULT_MODEL",
    "PROGRESS_MIN_TOKENS",
    "CaptureOptions",
    "Extraction",
    "HiddenStates",
    "LoadedModel",
    "Progress",
    "as_extraction",
    "check_text",
    "clear_model_cache",
    "extract",
    "extract_token_ids",
    "extract_with",
    "load_model",
]


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
    rows: bool | int | str = "auto",
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

    ``rows``: keep each head's largest keys a row as the forward pass computes them (:mod:`.folds.rows`), so that
    ``ex.sparse_attention`` and a head's P read them instead of recomputing the head: "auto" from
    ``ROWS_MIN_TOKENS`` (4096) tokens on, True at any length, False never, an int: that many keys a row (90 by
    default). Where a head's P is sparse (its dense form does not fit the memory budget) each row keeps its mass
    within them; ``rows=False`` for the uncapped P, recomputed per head (docs/long-texts.md).

    The keywords become one :class:`~.options.CaptureOptions`, checked before the model loads; :func:`extract_with`
    takes one made already.
    """
    check_text(text)
    options = CaptureOptions(model, tokenizer, device, max_tokens, trust_remote_code, progress, components, rows=rows)
    return _capture(text, options)


def extract_with(text: str, options: CaptureOptions) -> Extraction:
    """:func:`extract` of ``text`` with its options made (:class:`~.options.CaptureOptions`)."""
    check_text(text)
    if not isinstance(options, CaptureOptions):
        raise TypeError(f"options must be a CaptureOptions, got {type(options).__name__}")
    return _capture(text, options)


def _capture(text: str, options: CaptureOptions) -> Extraction:
    report = options.progress if callable(options.progress) else no_progress
    report("loading the model", 0.0)
    loaded = options.load()
    max_tokens = None if options.max_tokens is None else int(options.max_tokens)
    token_ids, offsets, special, truncated = encode(text, loaded, max_tokens)
    traced = traced_layers(loaded, token_ids.size, options.components)
    with progress_bar(options.progress, loaded, token_ids.size) as bar:
        ex = _extraction(
            loaded,
            options.folds,
            text=text,
            token_ids=token_ids,
            offsets=offsets,
            special=special,
            truncated=truncated,
            progress=bar or report,
            traced=traced,
        )
    if options.components and traced is None:  # a second pass of its own (or the reason it cannot be made)
        keep_trace(ex, loaded)
    return ex


def check_text(text: Any, max_tokens: Any = None) -> None:
    """The checks of :func:`extract` that need no model: a non-empty str of characters, a positive max_tokens."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text_characters(text, "text")
    if not text.strip():
        raise ValueError("text is empty or only whitespace; give some words to look at")
    check_max_tokens(max_tokens)


def extract_token_ids(
    token_ids: Sequence[int] | np.ndarray,
    model: str | os.PathLike | PreTrainedModel | LoadedModel | None = None,
    *,
    tokenizer: str | os.PathLike | PreTrainedTokenizerBase | None = None,
    device: str | torch.device | None = None,
    components: bool = False,
    rows: bool | int | str = "auto",
) -> Extraction:
    """Run the model on given token ids (special tokens as given, e.g. with a token swapped); ``components`` and
    ``rows`` as :func:`extract`'s. The result has no character spans (``offsets`` all None) and ``text`` is the
    decoded ids."""
    options = CaptureOptions(model, tokenizer, device, components=components, rows=rows)
    loaded = options.load()
    ids = _check_token_ids(token_ids, loaded)
    traced = traced_layers(loaded, ids.size, components)
    text = str(loaded.tokenizer.decode(ids.tolist(), skip_special_tokens=True))
    special = special_mask(ids, loaded.tokenizer, np.zeros(ids.size, dtype=bool))
    ex = _extraction(loaded, options.folds, text=text, token_ids=ids, offsets=[None] * ids.size, special=special,
                     truncated=False, traced=traced)  # fmt: skip
    if components and traced is None:
        keep_trace(ex, loaded)
    return ex


def _extraction(
    loaded: LoadedModel,
    folds: Sequence[type[Fold]],
    *,
    text: str,
    token_ids: np.ndarray,
    offsets: list[tuple[int, int] | None],
    special: np.ndarray,
    truncated: bool,
    progress: Progress = no_progress,
    traced: int | None = None,
) -> Extraction:
    source, folded, states, recorder = _forward(loaded, token_ids, folds, progress, traced)
    typed = {name: folded.pop(name) for name in list(folded) if name in _EXTRACTION_FIELDS}  # the grid, the scores
    folded = {name: result for name, result in folded.items() if result is not None}  # (a fold that kept nothing)
    ex = Extraction(
        text=text,
        tokens=list(loaded.tokenizer.convert_ids_to_tokens(token_ids.tolist())),
        token_ids=token_ids,
        offsets=offsets,
        special=special,
        model_name=loaded.name,
        truncated=truncated,
        attention_source=source,
        states=states,
        folded=folded,
        **typed,
    )
    if recorder is not None:
        finish_trace(ex, recorder)
    return ex


#: the folds whose result has a field of its own in an Extraction (by the fold's name); the others go in ``folded``
_EXTRACTION_FIELDS = frozenset(f.name for f in dataclasses.fields(Extraction))


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
    loaded: LoadedModel,
    token_ids: np.ndarray,
    folds: Sequence[type[Fold]],
    progress: Progress = no_progress,
    traced: int | None = None,
) -> tuple[CapturedAttention | DenseAttention, dict[str, Any], HiddenStates, Any]:
    """One forward pass: the attention source, each of ``folds``'s result by name (the grid (L, H, n) float32, the
    head scores, ...), the hidden states, on the CPU, and with ``traced`` layers the components' recorder of the
    same pass (:func:`.components.tracing`; else None).

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
        with torch.inference_mode(), capturing(model, on_layer, on_chunks, folds) as session, components as recorder:
            output = model(**inputs, return_dict=True)
        if not session.layers:
            raise AttentionUnavailableError(
                f"{loaded.name} ({type(model).__name__}) ran no attention layer: it has no attention to show"
            )
        source: CapturedAttention | DenseAttention = CapturedAttention(session.layers)
        folded = session.folds.finish()
    else:  # the folds fed the dense heads, chunk by chunk as the capture feeds them
        source, output = _eager_attentions(loaded, inputs)
        eager = Folds(folds)
        eager.feed_dense(source.dense())
        folded = eager.finish()
    grid = folded[MaxAttentionGrid.name]
    hidden_states = getattr(output, "hidden_states", None)
    if not hidden_states:
        raise AttentionUnavailableError(f"{loaded.name} ({type(model).__name__}) returned no hidden states")
    states = HiddenStates(torch.stack([_one_sequence(h, loaded).detach().to("cpu") for h in hidden_states]))
    if not (np.isfinite(grid).all() and torch.isfinite(states.states).all()):
        raise AttentionUnavailableError(
            f"{loaded.name} produced NaN or infinite attention/hidden states; check its weights and dtype"
        )
    return source, folded, states, recorder


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
