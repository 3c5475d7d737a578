"""Capture a transformer's attention one layer at a time, never every head's n x n at once.

transformers (5.x) lets a package register its own attention function (``AttentionInterface``) and its own mask
builder (``AttentionMaskInterface``); every architecture whose attention layers call the interface (BERT,
RoBERTa, DistilBERT, ModernBERT, GPT-2, Llama, Mistral, Qwen2, Gemma 2/3, Phi-3, GPT-OSS, ...) then hands this
module, for each layer, exactly the inputs its eager attention would get: post-RoPE queries, keys and values,
the scaling, the logit softcap, the attention sinks and the mask. :func:`capture_attention_forward` computes
that layer's attention in query chunks (bounded memory; on the CPU on the worker threads, see
:meth:`LayerAttention.each_chunk`), returns the layer's output to the model, feeds the chunks to the capture's
folds (:mod:`.folds`: the maximum-attention grid ``(H, n)``, the head scores, ...) and keeps the layer's queries and
keys (model dtype, on the layer's device, GQA keys not repeated): what any head's n x n is recomputed from later,
exactly.

The mask is never materialised as n x n: :func:`capture_mask` keeps transformers' own mask function
(causal, sliding window, bidirectional window, padding) and rows of it are built per chunk with transformers'
``sdpa_mask``; masked logits get the dtype's minimum, as ``eager_mask`` adds it, and a chunk computes only the
key span its queries may see (the weights outside are exactly 0). Each layer is checked against the architecture's own
``eager_attention_forward`` on a few query rows; a mismatch raises :class:`UnsupportedAttentionError`, so an
architecture whose attention this does not reproduce is refused rather than approximated.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import UnsupportedAttentionError
from .folds import FOLDS, Fold, Folds, LayerShape
from .layers import LayerAttention, Scratch
from .masks import MaskRows, additive_rows, capture_mask

__all__ = ["CAPTURE_IMPLEMENTATION", "SUPPORTED", "can_capture", "capture_attention_forward", "capturing", "register"]

CAPTURE_IMPLEMENTATION = "headsne_capture"

_SESSION: contextvars.ContextVar[_Session | None] = contextvars.ContextVar("headsne_capture_session", default=None)
_SWITCH_LOCK = threading.RLock()  # one capture forward at a time: the implementation switch is per model config
_REGISTERED = False


@dataclass
class _Session:
    """The layers captured by one forward pass, in call order (= layer order), and the folds fed their chunks
    (``folds.finish()``: each fold's result by name); ``on_layer(k)`` is called after the k-th (1-based),
    ``on_chunks(k, fraction)`` while the k-th is computed, e.g. for progress; either may raise to stop the forward
    pass."""

    folds: Folds
    layers: list[LayerAttention] = field(default_factory=list)
    on_layer: Callable[[int], None] | None = None
    on_chunks: Callable[[int, float], None] | None = None


def capture_attention_forward(  # positional: transformers' AttentionInterface calls it so (PLR0917)
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: MaskRows | torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    softcap: float | None = None,
    s_aux: torch.Tensor | None = None,
    position_bias: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The ``AttentionInterface`` entry: the layer's output as eager attention computes it, in query chunks.

    Inside :func:`capturing` it also keeps the layer (:class:`LayerAttention`) and feeds its chunks to the session's
    folds; outside it only computes the output, so a model left switched still runs exactly.
    """
    if module.training and dropout:
        raise UnsupportedAttentionError(
            f"{type(module).__name__} is in training mode with attention dropout; call model.eval() first"
        )
    if query.shape[0] != 1 or query.shape[2] != key.shape[2]:
        raise UnsupportedAttentionError(
            f"attention capture runs one sequence without a cache (got queries {tuple(query.shape)}, "
            f"keys {tuple(key.shape)} in {type(module).__name__})"
        )
    n_heads, n_kv = query.shape[1], key.shape[1]
    if n_heads % n_kv:
        raise UnsupportedAttentionError(f"{type(module).__name__}: {n_heads} query heads for {n_kv} key/value heads")
    layer = LayerAttention(
        query=query[0].clone(memory_format=torch.contiguous_format),  # own storage: never pins a fused qkv
        key=key[0].clone(memory_format=torch.contiguous_format),
        mask=attention_mask,
        scaling=float(query.shape[-1] ** -0.5 if scaling is None else scaling),
        softcap=None if softcap is None else float(softcap),
        sinks=None if s_aux is None else s_aux.detach().clone(),
        bias=_position_bias(module, position_bias, query.shape[1], query.shape[2]),
    )
    values = value[0].transpose(1, 2).contiguous()  # (H_kv, d, n): v^T w^T ran 2-3x faster than w v on the CPU
    out = torch.empty((1, layer.n_tokens, n_heads, values.shape[1]), dtype=value.dtype, device=value.device)
    session = _SESSION.get()
    folds = Folds(()) if session is None else session.folds
    number = 0 if session is None else len(session.layers) + 1
    on_chunks = None if session is None or session.on_chunks is None else session.on_chunks
    folds.start(LayerShape(number - 1, n_heads, layer.n_tokens, query.device))

    def chunk(rows: slice, scratch: Scratch | None) -> None:
        keys, weights = layer.weights(rows, scratch=scratch)
        if folds:
            folds.chunk(rows, keys, weights.float())
        mixed = torch.matmul(values[:, :, keys], weights.to(value.dtype).reshape(n_kv, -1, weights.shape[-1]).mT)
        out[0, rows] = mixed.mT.reshape(n_heads, weights.shape[1], -1).transpose(0, 1)

    # in order, on this thread: a fold's float64 sums then never depend on which thread took a chunk
    progress = None if on_chunks is None else lambda done: on_chunks(number, done)
    layer.each_chunk(chunk, progress=progress, in_order=True)
    if session is not None:
        options = dict(kwargs, scaling=scaling, dropout=0.0, softcap=softcap, s_aux=s_aux, position_bias=position_bias)
        _verify(module, layer, value, out, options)
        session.layers.append(layer)
        folds.end_layer()
        if session.on_layer is not None:
            session.on_layer(len(session.layers))
    return out, None


def _position_bias(module: torch.nn.Module, bias: torch.Tensor | None, n_heads: int, n: int) -> torch.Tensor | None:
    """T5's additive relative position bias, ``(1, H, n, n)``, by reference; another shape is refused by name."""
    if bias is None:
        return None
    if tuple(bias.shape) != (1, n_heads, n, n):
        raise UnsupportedAttentionError(
            f"{type(module).__name__} adds a position bias of shape {tuple(bias.shape)} to its scores, not the "
            f"(1, {n_heads}, {n}, {n}) this capture reproduces; {SUPPORTED}"
        )
    return bias.detach()


def _verify(
    module: torch.nn.Module, layer: LayerAttention, value: torch.Tensor, out: torch.Tensor, kwargs: dict
) -> None:
    """Compare a few query rows with the architecture's own ``eager_attention_forward``; raise on a mismatch."""
    architecture = type(module).__name__
    eager = getattr(inspect.getmodule(type(module)), "eager_attention_forward", None)
    if eager is None:
        raise UnsupportedAttentionError(
            f"{architecture} calls transformers' AttentionInterface but its module has no eager_attention_forward "
            f"to check the capture against; {SUPPORTED}"
        )
    n = layer.n_tokens
    rows = sorted({0, n // 2, n - 1})  # first, middle, last query: causal edge, inside and past any window
    for name in ("softcap", "s_aux", "position_bias"):
        if kwargs.get(name) is None:
            kwargs.pop(name)
    if "position_bias" in kwargs:  # the probe's rows of the bias, as the rows of its queries
        kwargs["position_bias"] = kwargs["position_bias"][:, :, rows]
    mask = additive_rows(layer.mask, rows, layer.query.device)
    with torch.no_grad():
        ref_out, ref_weights = eager(module, layer.query[None, :, rows], layer.key[None], value, mask, **kwargs)
    mine = layer.full_weights(rows)
    tolerance = _tolerance(layer.query.dtype)
    out_scale = float(value.abs().max()) if value.numel() else 1.0
    same = ref_weights is not None and torch.allclose(ref_weights[0].float(), mine, rtol=tolerance, atol=tolerance)
    same = same and torch.allclose(
        ref_out[0].float(), out[0, rows].float(), rtol=tolerance, atol=tolerance * max(1.0, out_scale)
    )
    if not same:
        raise UnsupportedAttentionError(
            f"{architecture}'s eager attention differs from the captured attention on query rows {rows} "
            f"(scaling {layer.scaling}, softcap {layer.softcap}, sinks {layer.sinks is not None}); its attention "
            f"cannot be captured exactly. {SUPPORTED}"
        )


def _tolerance(dtype: torch.dtype) -> float:
    """Agreement asked of the probe: 1e-5 in float32, a few units in the last place of half precisions."""
    return 1e-5 if torch.finfo(dtype).bits >= 32 else 4 * float(torch.finfo(dtype).eps)


SUPPORTED = (
    "Supported: architectures whose attention layers call transformers' AttentionInterface with the standard "
    "eager inputs (scaling, additive/causal/sliding-window mask, logit softcapping, attention sinks, grouped-query "
    "key/value heads, T5's relative position bias), e.g. BERT, RoBERTa, DistilBERT, ModernBERT, GPT-2, Llama, "
    "Mistral, Qwen2, Gemma 2/3, Phi-3, T5 encoders."
)


def register() -> None:
    """Register the capture attention and mask functions with transformers (once per process)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(CAPTURE_IMPLEMENTATION, capture_attention_forward)
    AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, capture_mask)
    _REGISTERED = True


@contextlib.contextmanager
def capturing(
    model: Any,
    on_layer: Callable[[int], None] | None = None,
    on_chunks: Callable[[int, float], None] | None = None,
    folds: Iterable[type[Fold]] = FOLDS,
) -> Iterator[_Session]:
    """Run ``model`` with the capture attention inside the block; its layers land in the yielded session, and
    its chunks feed one instance of each of ``folds`` (default: the registered :data:`.folds.FOLDS`).

    The model's attention implementation is switched for the block only and restored after it, however the
    block ends (an error, KeyboardInterrupt). ``on_layer(k)`` is called after the k-th layer is captured,
    ``on_chunks(k, fraction)`` while it is computed (at most every ``layers.PROGRESS_INTERVAL_S``).
    """
    register()
    with _SWITCH_LOCK:
        previous = model.config._attn_implementation
        session = _Session(Folds(folds), on_layer=on_layer, on_chunks=on_chunks)
        token = _SESSION.set(session)
        try:
            model.set_attn_implementation(CAPTURE_IMPLEMENTATION)  # (inside: an interrupt here is undone too)
            yield session
        finally:
            _SESSION.reset(token)
            model.set_attn_implementation(previous)


def can_capture(model: Any) -> bool:
    """Whether ``model``'s attention layers go through transformers' AttentionInterface."""
    check = getattr(type(model), "_can_set_attn_implementation", None)
    return bool(check is not None and check())
