"""One layer's hooked calls turned into a :class:`~.components.LayerTrace` (see :mod:`.components`): which call is
the output projection, the feed-forward's output, the value biases, and where each norm sits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import UnsupportedAttentionError

__all__ = ["LayerTrace", "NormMap", "half_hint", "layer_trace", "norm_map", "tolerance"]


@dataclass
class NormMap:
    """A norm as the per-token linear map it is once its statistics are fixed: ``y = x * scale + shift`` with
    ``scale = factor[:, None] * gain`` and ``shift = bias - gain * (center * factor)[:, None]`` (LayerNorm:
    factor 1/std, center the mean; RMSNorm: factor 1/rms, no center, no bias)."""

    gain: np.ndarray  # (d,)
    factor: np.ndarray  # (n,)
    center: np.ndarray  # (n,)
    bias: np.ndarray  # (d,)

    def scale(self) -> np.ndarray:
        return self.factor[:, None] * self.gain[None, :]

    def shift(self) -> np.ndarray:
        return self.bias[None, :] - self.gain[None, :] * (self.center * self.factor)[:, None]


@dataclass
class LayerTrace:
    """One layer: ``context`` (n, H, d_h) and ``values`` (H_kv, n, d_h) in the model's dtype; ``w_o`` (H, d_h, d)
    and the biases float64 (``b_v`` (H_kv, d_h), None when the value biases could not be located); ``attn_out``
    the output projection's output and ``mlp_out`` the feed-forward's (n, d); the norms it passes through."""

    x_in: torch.Tensor
    x_out: torch.Tensor
    context: torch.Tensor
    values: torch.Tensor
    w_o: np.ndarray
    b_o: np.ndarray
    b_v: np.ndarray | None
    attn_out: torch.Tensor
    mlp_out: torch.Tensor
    b_f: np.ndarray
    post_ln: tuple[NormMap, NormMap] | None = None  # after attention and after the feed-forward (BERT)
    attn_norm: NormMap | None = None  # on the attention's output before the residual (Gemma 2)
    mlp_norm: NormMap | None = None  # on the feed-forward's output before the residual
    qk: Any = None  # the queries' and keys' maps (:class:`~.qk_trace.QKTrace`), for attribution
    embed_in: torch.Tensor | None = None  # layer 0: the embeddings before the norm that made its input (BERT's)
    embed_norm: NormMap | None = None  # that norm

    @property
    def n_heads(self) -> int:
        return int(self.w_o.shape[0])

    @property
    def kv_groups(self) -> int:
        return self.n_heads // int(self.values.shape[0])

    @property
    def nbytes(self) -> int:
        tensors = (self.x_in, self.x_out, self.context, self.values, self.attn_out, self.mlp_out)
        kept = sum(t.numel() * t.element_size() for t in tensors) + self.w_o.nbytes
        kept += 0 if self.embed_in is None else self.embed_in.numel() * self.embed_in.element_size()
        return kept + (0 if self.qk is None else self.qk.nbytes)


#: a norm's map must reproduce its output to this share of the output's largest entry (else: not a norm we know)
NORM_CHECK = 1e-4
#: in half precision: to this many of the dtype's epsilons (its output is rounded after the gain, and often before)
NORM_ULPS = 4


def tolerance(base: float, dtype: torch.dtype, ulps: float) -> float:
    """A check's tolerance, a share of the largest entry: ``base`` in float32 and float64, ``ulps`` epsilons of
    ``dtype`` where that is larger (bfloat16, float16: the model's own values are rounded to it at every step)."""
    return max(base, ulps * float(torch.finfo(dtype).eps)) if dtype.is_floating_point else base


def half_hint(dtype: torch.dtype) -> str:
    """What a refusal of a half-precision model adds: that it is one, and how to load it in float32."""
    if dtype not in (torch.bfloat16, torch.float16):
        return ""
    return (
        f" (the model runs in {str(dtype).removeprefix('torch.')}, whose rounding this exceeds: load it with "
        "from_pretrained(..., torch_dtype=torch.float32), dtype= in transformers 5, for an exact split)"
    )


def layer_trace(events: list[tuple], x_in: torch.Tensor, x_out: torch.Tensor, name: str) -> LayerTrace:
    """The layer's trace from its calls in order: ("linear" | "norm", module, input, output) and one
    ("attention", values (H_kv, n, d_h), output (n, H d_h))."""
    calls = [i for i, e in enumerate(events) if e[0] == "attention"]
    if len(calls) != 1:
        raise UnsupportedAttentionError(f"{name}: a layer called the attention {len(calls)} times, not once")
    at = calls[0]
    _, values, context = events[at]
    n = context.shape[0]
    linears = [(i, e[1], e[2], e[3]) for i, e in enumerate(events) if e[0] == "linear"]
    o_proj = next(
        (
            x
            for x in linears
            if x[0] > at and x[2].numel() == context.numel() and torch.equal(x[2].reshape(n, -1), context)
        ),
        None,
    )
    if o_proj is None:
        raise UnsupportedAttentionError(
            f"{name}: no Linear/Conv1D reads the attention's output (the heads' contexts) as it is; the heads' "
            "outputs cannot be separated"
        )
    mlp_out, b_f = _feed_forward(events, linears, o_proj, name)
    n_heads = context.shape[1] // values.shape[-1]
    w_o = _weight(o_proj[1]).reshape(n_heads, values.shape[-1], -1)
    norms = [(i, e[1], e[2], e[3]) for i, e in enumerate(events) if e[0] == "norm" and i > o_proj[0]]
    trace = LayerTrace(
        x_in=x_in,
        x_out=x_out,
        context=context.reshape(n, n_heads, -1),
        values=values,
        w_o=w_o,
        b_o=_bias(o_proj[1], w_o.shape[-1]),
        b_v=_value_bias(values, [x for x in linears if x[0] < at]),
        attn_out=o_proj[3].clone(),
        mlp_out=mlp_out.clone(),
        b_f=np.zeros(w_o.shape[-1]) if b_f is None else _bias(b_f, w_o.shape[-1]),
    )
    _place_norms(trace, norms, name)
    return trace


def _feed_forward(events: list[tuple], linears: list[tuple], o_proj: tuple, name: str) -> tuple[torch.Tensor, Any]:
    """The feed-forward's output and the projection whose bias it ends with: the last Linear/Conv1D the layer calls
    after the attention's output (a dense MLP); else, where that one does not write the residual's width (a
    mixture of experts' router or gate), the output of the last of the block's own children called after it,
    not a norm, of that width (the whole mixture of experts: the experts and a shared expert, one term; None)."""
    width = o_proj[3].shape
    mlp = linears[-1]
    if mlp[0] > o_proj[0] and mlp[3].shape == width:
        return mlp[3], mlp[1]
    after = [e[3] for i, e in enumerate(events) if e[0] == "child" and i > o_proj[0] and e[3].shape == width]
    if not after:
        raise UnsupportedAttentionError(f"{name}: no feed-forward projection after the attention's output")
    return after[-1], None


def _place_norms(trace: LayerTrace, norms: list[tuple], name: str) -> None:
    """Post-LN (a norm's output is the layer's output): the norms after the attention and the feed-forward;
    pre-LN: a norm reading the attention's or the feed-forward's output (Gemma 2's post norms)."""
    if norms and torch.equal(norms[-1][3], trace.x_out):
        if len(norms) != 2:
            raise UnsupportedAttentionError(f"{name}: a post-LN layer with {len(norms)} norms after its attention")
        trace.post_ln = (
            norm_map(norms[0][1], norms[0][2], norms[0][3], name),
            norm_map(norms[1][1], norms[1][2], norms[1][3], name),
        )
        return
    for _, module, inp, out in norms:
        if trace.attn_norm is None and inp.shape == trace.attn_out.shape and torch.equal(inp, trace.attn_out):
            trace.attn_norm = norm_map(module, inp, out, name)
        elif trace.mlp_norm is None and inp.shape == trace.mlp_out.shape and torch.equal(inp, trace.mlp_out):
            trace.mlp_norm = norm_map(module, inp, out, name)


def _weight(module: Any) -> np.ndarray:
    """The projection as ``x @ W``: Linear's weight transposed, Conv1D's as it is; float64."""
    weight = module.weight.detach().to("cpu", torch.float64)
    return (weight.T if isinstance(module, torch.nn.Linear) else weight).contiguous().numpy()


def _bias(module: Any, size: int) -> np.ndarray:
    bias = getattr(module, "bias", None)
    return np.zeros(size) if bias is None else bias.detach().to("cpu", torch.float64).numpy()


def _bits(t: torch.Tensor) -> np.ndarray:
    """The raw bits of a tensor (any float dtype, bf16 included), for exact matching."""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.detach().to("cpu").contiguous().view(ints).numpy()


def _value_bias(values: torch.Tensor, before: list[tuple]) -> np.ndarray | None:
    """(H_kv, d_h) value biases: each value column is a biased projection's output column, bit for bit (fused
    q/k/v and NeoX's interleaved heads alike). Zeros without biased projections; None when one is unmatched."""
    biased = [(module, out) for _, module, _, out in before if getattr(module, "bias", None) is not None]
    h_kv, _, d_h = values.shape
    if not biased:
        return np.zeros((h_kv, d_h))
    columns = output_columns(values, [out for _, out in biased], every_row=True)
    if columns is None:
        return None
    biases = [_bias(module, out.shape[-1]) for module, out in biased]
    return np.array([biases[index][c] for index, c in columns]).reshape(h_kv, d_h)


def first_rows(outputs: list[torch.Tensor]) -> dict[bytes, list[tuple[int, int]]]:
    """Each output column's first-row bits -> the (output, column) pairs that start with them, in order, over
    ``outputs`` (each (..., c): a linear's output)."""
    index: dict[bytes, list[tuple[int, int]]] = {}
    for i, out in enumerate(outputs):
        for c, key in enumerate(_bits(out.reshape(-1, out.shape[-1])[:1])[0]):
            index.setdefault(key.tobytes(), []).append((i, c))
    return index


def output_columns(
    target: torch.Tensor, outputs: list[torch.Tensor], index: dict[bytes, list[tuple[int, int]]] | None = None,
    *, every_row: bool,
) -> list[tuple[int, int]] | None:  # fmt: skip
    """For each column of ``target`` (h, n, d_h; head-major) the (output, column) of ``outputs`` that it is, bit
    for bit: the first whose first row matches, or with ``every_row`` the first that matches in every row. None
    where a column has none. ``index``: :func:`first_rows` of ``outputs``, when the caller has it."""
    index = first_rows(outputs) if index is None else index
    flat = target.permute(1, 0, 2).reshape(target.shape[1], -1)  # (n, h d_h): a column per head and e
    T = _bits(flat if every_row else flat[:1])
    candidates = [index.get(key.tobytes(), []) for key in T[0]]
    if not all(candidates):
        return None
    found = _contiguous(candidates)
    if not every_row:
        return found
    pick = np.array(found, dtype=np.int64)
    full = [_bits(out.reshape(-1, out.shape[-1])) for out in outputs]
    equal = np.zeros(T.shape[1], dtype=bool)
    for i in np.unique(pick[:, 0]):
        mine = np.flatnonzero(pick[:, 0] == i)
        equal[mine] = (full[int(i)][:, pick[mine, 1]] == T[:, mine]).all(axis=0)  # every row, bit for bit
    for c in np.flatnonzero(~equal):  # another column shares its first row: the first equal in every row
        match = next((at for at in candidates[c][1:] if np.array_equal(full[at[0]][:, at[1]], T[:, c])), None)
        if match is None:
            return None
        found[c] = match
    return found


def _contiguous(candidates: list[list[tuple[int, int]]]) -> list[tuple[int, int]]:
    """One (output, column) per column where several share its first row's bits (a half-precision value has only
    65536): the one that continues the previous column's run, else the one the next column continues, else the
    first. A head's columns are a run of one projection's output."""
    found: list[tuple[int, int]] = []
    for c, options in enumerate(candidates):
        pick = options[0]
        if len(options) > 1:
            following = set(candidates[c + 1]) if c + 1 < len(candidates) else set()
            after = found[-1] if found else None
            pick = next((x for x in options if after is not None and x == (after[0], after[1] + 1)), None) or next(
                (x for x in options if (x[0], x[1] + 1) in following), options[0]
            )
        found.append(pick)
    return found


def norm_map(module: Any, inp: torch.Tensor, out: torch.Tensor, name: str) -> NormMap:
    """A norm call as a :class:`NormMap` from its input's statistics over the last axis: a LayerNorm (mean,
    biased variance: ``nn.LayerNorm``, Cohere's, OLMo's without a gain) or an RMSNorm, of gain ``w`` or ``1 + w``
    (Gemma's, Nemotron's LayerNorm1P), whichever reproduces the output to :func:`tolerance` of its dtype (a half
    precision output is rounded: the map is the model's own, computed in float64 from its own input)."""
    x = inp.detach().to("cpu", torch.float64).reshape(-1, inp.shape[-1])
    y = out.detach().to("cpu", torch.float64).reshape(x.shape).numpy()
    weight = getattr(module, "weight", None)
    d = x.shape[-1]
    gains = [np.ones(d)] if weight is None else [weight.detach().to("cpu", torch.float64).numpy()]
    gains += [] if weight is None else [1.0 + gains[0]]
    eps = next((float(getattr(module, e)) for e in ("eps", "variance_epsilon", "epsilon") if hasattr(module, e)), 1e-5)
    bias = _bias(module, d)
    mean = x.mean(-1)
    layer = (mean.numpy(), (1.0 / torch.sqrt(x.var(-1, unbiased=False) + eps)).numpy())
    rms = (np.zeros(x.shape[0]), (1.0 / torch.sqrt(x.pow(2).mean(-1) + eps)).numpy())
    kinds = [layer] if isinstance(module, torch.nn.LayerNorm) else [rms, layer]
    maps = [NormMap(g, factor, center, bias) for center, factor in kinds for g in gains]
    xs = x.numpy()
    errors = [_map_error(xs, m, y) for m in maps]
    best = int(np.argmin(errors))
    if not errors[best] <= tolerance(NORM_CHECK, out.dtype, NORM_ULPS) * max(1.0, float(np.abs(y).max())):
        raise UnsupportedAttentionError(
            f"{name}: its norm {type(module).__name__} is neither a LayerNorm nor an RMSNorm as known here (its "
            f"output differs from either by {errors[best]:.3g}){half_hint(out.dtype)}"
        )
    return maps[best]


def _map_error(x: np.ndarray, m: NormMap, y: np.ndarray) -> float:
    """``max |x scale + shift - y|``: ``((x - center) factor) gain + bias - y`` in one buffer (the same map; the
    two (n, d) factors and four temporaries of forming it were most of a norm's placing)."""
    t = x - m.center[:, None]
    t *= m.factor[:, None]
    t *= m.gain[None, :]
    t += m.bias[None, :]
    t -= y
    return float(np.abs(t, out=t).max())
