"""A layer's queries, keys and values as the affine maps of its input they are (for :mod:`.attribution`).

The attention call hands over the post-RoPE queries and keys; the projections that made them are found among the
layer's ``Linear``/``Conv1D`` calls before it by matching columns bit for bit at position 0 (where RoPE is the
identity), fused q/k/v and interleaved heads alike; the norm between the layer's input and the projections' input
(pre-LN) is placed by what it reads and writes. RoPE is read off the data as a fixed rotation per position: each
pair of dimensions (``rotate_half``'s ``(e, e + w/2)`` or the interleaved ``(2e, 2e+1)``) of a head's first ``w``
(every one, or partial rotary's share, as Phi's and GPT-NeoX's, the rest left as projected) turns by one angle per
position, shared by every head, fitted in closed form and then checked. A query/key norm between the projections
and RoPE (Qwen3's and Gemma 3's per-head ``q_norm``/``k_norm``, OLMo 2's and OLMoE's over every head at once:
RMSNorms; Persimmon's per-head LayerNorms) is, given its per-token factor ``1/rms`` (``1/std``), linear:
``y = z * factor[t, h] * gain[h, e]`` plus a LayerNorm's bias, its centring folded into the projection
(:class:`HeadScale`); its call is found by the queries' columns in its output (in its layout) and its input's in
a projection's output, and its factor is read from that input as the model normalised it. Nothing here raises: a
layer whose maps cannot be rebuilt exactly keeps a reason instead (:attr:`QKTrace.error`), and attribution
refuses it by name.

The capture finds the columns and copies the weights; the projections of every token, RoPE's fit and the checks
wait for the first use (:meth:`QKTrace.rebuilt`): they were 30% of a components capture at 512 tokens (MiniLM),
which norm and head-output modes pay for without attributing a score.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import UnsupportedAttentionError
from .trace_layers import NormMap, first_rows, norm_map, output_columns, tolerance

__all__ = ["HeadScale", "QKTrace", "Rotation", "find_qk"]

#: the rebuilt queries and keys must match the model's to this share of their largest entry (in half precision:
#: :data:`QK_ULPS` of its epsilons, as the model rounds its projections and its rotation)
QK_CHECK = 1e-4
QK_ULPS = 8


@dataclass
class Rotation:
    """RoPE as ``kind`` ("none", "half" or "interleaved") and per-position ``cos``, ``sin`` (n, width / 2) on the
    first ``width`` dimensions of each head (None: all of them; partial rotary, as Phi's, GPT-NeoX's and Nemotron's,
    turns the first ones and leaves the rest as projected)."""

    kind: str
    cos: np.ndarray
    sin: np.ndarray
    width: int | None = None

    def pairs(self, d_h: int) -> tuple[np.ndarray, np.ndarray]:
        width = d_h if self.width is None else self.width
        half = np.arange(width // 2)
        return (half, half + width // 2) if self.kind == "half" else (2 * half, 2 * half + 1)

    def apply(self, v: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """``v`` (..., r, d_h) at token ``positions`` (r,), rotated as the model rotates them."""
        if self.kind == "none":
            return v
        a, b = self.pairs(v.shape[-1])
        cos, sin = self.cos[positions], self.sin[positions]
        out = np.empty_like(v) if 2 * len(a) == v.shape[-1] else v.copy()  # partial: the rest kept as it is
        out[..., a] = v[..., a] * cos - v[..., b] * sin
        out[..., b] = v[..., b] * cos + v[..., a] * sin
        return out


@dataclass
class HeadScale:
    """A query/key norm once its factor is fixed: the model multiplies head h's projected query (key) at token t by
    ``factor[t, h] * gain[h]`` (``factor`` (n, H): 1/rms or 1/std of the head's group; ``gain`` (H, d_h): ``w``
    or Gemma's ``1 + w``) and adds ``shift`` (H, d_h: a LayerNorm's bias, or None). A LayerNorm's centring, linear,
    is folded into the projection (``groups`` (H, d_h): each column's group; None for an RMSNorm)."""

    factor: np.ndarray
    gain: np.ndarray
    shift: np.ndarray | None = None
    groups: np.ndarray | None = None

    def at(self, head: int | slice, rows: Any) -> np.ndarray:
        """The scale of ``head`` at token ``rows``: (r, d_h), or (H, r, d_h) for a slice of heads."""
        factor = self.factor[rows][:, head]
        return factor[..., None] * self.gain[head] if factor.ndim == 1 else factor.T[..., None] * self.gain[head, None]


@dataclass
class QKTrace:
    """One layer's attention inputs: ``query`` (H, n, d_h) and ``key`` (H_kv, n, d_h) as the model attended with
    them, ``mask``, ``scaling``, ``softcap``, ``bias`` (T5's (1, H, n, n) or None); and, unless ``error``, the
    maps ``q = R(S_q * (norm(x) W_Q + b_Q))`` (``w_q`` (d, H, d_h), ``b_q`` (H, d_h); keys alike), ``w_v``/``b_v``
    (None when the values' projection was not found), the input ``norm`` (None: the projections read the layer
    input), ``q_scale``/``k_scale`` the query/key norm ``S`` (None: there is none). The maps and ``error`` are
    final only in :meth:`rebuilt`'s result."""

    query: torch.Tensor
    key: torch.Tensor
    mask: Any
    scaling: float
    softcap: float | None
    bias: torch.Tensor | None
    error: str = ""
    norm: NormMap | None = None
    w_q: np.ndarray | None = None
    b_q: np.ndarray | None = None
    w_k: np.ndarray | None = None
    b_k: np.ndarray | None = None
    w_v: np.ndarray | None = None
    b_v: np.ndarray | None = None
    rotation: Rotation | None = None
    q_scale: HeadScale | None = None
    k_scale: HeadScale | None = None
    pending: Callable[[], None] | None = field(default=None, repr=False)  # the rebuild still to run
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def nbytes(self) -> int:
        """Bytes of the queries, keys and maps kept (the mask is its function, the bias shared by reference)."""
        arrays = [self.w_q, self.b_q, self.w_k, self.b_k, self.w_v, self.b_v]
        arrays += [a for s in (self.q_scale, self.k_scale) if s is not None for a in (s.factor, s.gain, s.shift)]
        tensors = self.query.numel() * self.query.element_size() + self.key.numel() * self.key.element_size()
        return tensors + sum(0 if a is None else a.nbytes for a in arrays)

    def kv_head(self, head: int) -> int:
        """The key/value head query head ``head`` reads (grouped-query attention: H / H_kv query heads a group)."""
        return head // (self.query.shape[0] // self.key.shape[0])

    def rebuilt(self) -> QKTrace:
        """This trace with its maps rebuilt and checked against the model's queries and keys, or ``error`` saying
        why they could not be: the first call does it (module doc), from any thread."""
        with self._lock:
            pending, self.pending = self.pending, None
            if pending is not None:
                pending()
        return self

    def gains(self, kind: str) -> np.ndarray:
        """(H, d_h): the query (``kind`` "query") or key norm's gain of each head's dimensions (ones: none)."""
        scale, like = (self.q_scale, self.query) if kind == "query" else (self.k_scale, self.key)
        return np.ones((like.shape[0], like.shape[2])) if scale is None else scale.gain

    def norm_bias(self, kind: str, head: int) -> np.ndarray | None:
        """(d_h,): the query (``kind`` "query") or key norm's bias on head ``head``; None where there is none."""
        scale = self.q_scale if kind == "query" else self.k_scale
        return None if scale is None or scale.shift is None else scale.shift[head]

    def finish(self, parts: np.ndarray, kind: str, head: int, rows: np.ndarray, *, bias: bool = False) -> np.ndarray:
        """Parts (K, r, d_h) of head ``head``'s projected query (``kind`` "query"; "key": of key/value head
        ``head``) at token ``rows``, taken as the model takes their sum: the query/key norm's scale at each token,
        then RoPE. With ``bias`` and a norm that has one (:meth:`norm_bias`), it is one more part, last. The parts
        sum to the model's query (key) there."""
        assert self.rotation is not None
        scale = self.q_scale if kind == "query" else self.k_scale
        if scale is not None:
            parts = parts * scale.at(head, rows)[None]
        shift = self.norm_bias(kind, head)
        if bias and shift is not None:
            parts = np.concatenate([parts, np.broadcast_to(shift, (1, len(rows), len(shift)))])
        return self.rotation.apply(parts, rows)


def _projection(module: Any) -> tuple[np.ndarray, np.ndarray]:
    weight = module.weight.detach().to("cpu", torch.float64)
    weight = weight.T if isinstance(module, torch.nn.Linear) else weight
    bias = getattr(module, "bias", None)
    b = np.zeros(weight.shape[1]) if bias is None else bias.detach().to("cpu", torch.float64).numpy()
    return weight.contiguous().numpy(), b


def find_qk(events: list[tuple], x_in: torch.Tensor, name: str, layer: Any) -> QKTrace | None:
    """The layer's :class:`QKTrace` from its hooked calls (see :mod:`.components`); None without a "qk" call.
    ``layer``: the layer's trace, whose ``x_in`` and ``values`` (on the CPU by then) the rebuild reads."""
    at = next((i for i, e in enumerate(events) if e[0] == "qk"), None)
    if at is None:
        return None
    _, query, key, mask, scaling, softcap, bias = events[at]
    qk = QKTrace(query.to("cpu"), key.to("cpu"), mask, scaling, softcap, bias)
    with _refusals(qk, name):
        values = next(e[1] for e in events if e[0] == "attention")
        linears = [e for e in events[:at] if e[0] == "linear"]
        rebuild = _locate(qk, linears, [e for e in events[:at] if e[0] == "norm"], x_in, values, layer)

        def pending() -> None:
            with _refusals(qk, name):
                rebuild()

        qk.pending = pending
    return qk


class _Refused(Exception):
    pass


@contextlib.contextmanager
def _refusals(qk: QKTrace, name: str) -> Iterator[None]:
    """Within it, a refusal or an unforeseen layout becomes ``qk.error`` (never raised)."""
    try:
        yield
    except _Refused as refused:
        qk.error = f"{name}: {refused}"
    except (RuntimeError, ValueError, IndexError, KeyError) as error:  # an unforeseen layout: refused, never raised
        qk.error = f"{name}: its queries and keys could not be rebuilt ({type(error).__name__}: {error})"


def _locate(
    qk: QKTrace, linears: list[tuple], norms: list[tuple], x_in: torch.Tensor, values: torch.Tensor, layer: Any
) -> Callable[[], None]:
    """The layer's projections found (their columns, their input, the norm before them) and their weights copied;
    returns the rest (module doc): the projections of every token, RoPE's fit and the checks, from the layer
    trace's input (through the input norm's map where there is one: no array of its own is kept)."""
    outputs = [out for _, _, _, out in linears]
    row0 = first_rows(outputs)
    (q_cols, qk.q_scale), (k_cols, qk.k_scale) = (_columns(t, outputs, row0, norms) for t in (qk.query, qk.key))
    if q_cols is None or k_cols is None:
        raise _Refused(
            "its queries or keys are not a projection's output columns, nor a norm's of them (a scale or another "
            "map between them?)"
        )
    used = {i for i, _ in q_cols + k_cols}
    inputs = [linears[i][2] for i in used]
    if any(inp.shape != inputs[0].shape or not torch.equal(inp, inputs[0]) for inp in inputs):
        raise _Refused("its query and key projections read different inputs")
    x_attn = inputs[0]
    qk.norm = _input_norm(x_attn, x_in, norms)
    qk.w_q, qk.b_q = _centred(_weights(linears, q_cols, qk.query.shape), qk.q_scale)
    qk.w_k, qk.b_k = _centred(_weights(linears, k_cols, qk.key.shape), qk.k_scale)
    v_cols = output_columns(values, outputs, row0, every_row=False)
    if v_cols is not None:  # kept only where the rebuild finds that they reproduce the values
        qk.w_v, qk.b_v = _weights(linears, v_cols, values.shape)

    def rebuild() -> None:
        assert qk.w_q is not None and qk.b_q is not None and qk.w_k is not None and qk.b_k is not None
        x = layer.x_in.to(torch.float64).reshape(qk.query.shape[1], -1).numpy()
        if qk.norm is not None:  # the norm as the per-token affine map attribution composes through
            x = x * qk.norm.scale() + qk.norm.shift()
        pre_q, pre_k = _project(x, qk.w_q, qk.b_q), _project(x, qk.w_k, qk.b_k)
        for pre, scale in ((pre_q, qk.q_scale), (pre_k, qk.k_scale)):
            if scale is not None:  # the query/key norm at every token, as the model applied it
                pre *= scale.at(slice(None), slice(None))
                pre += 0.0 if scale.shift is None else scale.shift[:, None, :]
        check = tolerance(QK_CHECK, qk.query.dtype, QK_ULPS)
        post = torch.cat([qk.query, qk.key]).double().numpy()
        qk.rotation = _fit_rotation(np.concatenate([pre_q, pre_k]), post, check)
        if qk.w_v is not None and qk.b_v is not None and not _reproduces(x, (qk.w_v, qk.b_v), layer.values, check):
            qk.w_v = qk.b_v = None

    return rebuild


def _columns(
    target: torch.Tensor, outputs: list[torch.Tensor], row0: dict, norms: list[tuple]
) -> tuple[list[tuple[int, int]] | None, HeadScale | None]:
    """The (projection, column) of each of ``target``'s (H, n, d_h) columns, and the query/key norm between (None:
    none): a projection's output columns as they are, else a query/key norm's output columns (in a layout of
    :func:`_layouts`) whose input columns are a projection's, in every row."""
    cols = output_columns(target, outputs, row0, every_row=False)
    if cols is not None:
        return cols, None
    for _, module, inp, out in norms:
        for flat_in, flat_out, head_major in _layouts(inp, out, target.shape[1]):
            found = output_columns(target, [flat_out], every_row=False)
            sources = None if found is None else output_columns(flat_in[None], outputs, row0, every_row=True)
            if found is not None and sources is not None:
                columns = np.array([c for _, c in found]).reshape(target.shape[0], -1)
                scale = _head_scale(module, (inp, out), columns, target.shape[1], head_major)
                return [sources[c] for c in columns.ravel()], scale
    return None, None


def _layouts(inp: torch.Tensor, out: torch.Tensor, n: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, bool]]:
    """A norm call's input and output as (n, columns), token by token, in each layout its shape allows: (n, c)
    (OLMo 2's over every head), (n, H, d_h) (Qwen3's), (H, n, d_h) (Gemma 3's, after the heads' transpose; then
    ``head_major``)."""
    if inp.shape != out.shape or inp.ndim not in (2, 3):
        return
    if inp.shape[0] == n:
        yield inp.reshape(n, -1), out.reshape(n, -1), False
    if inp.ndim == 3 and inp.shape[1] == n:
        yield inp.permute(1, 0, 2).reshape(n, -1), out.permute(1, 0, 2).reshape(n, -1), True


def _head_scale(module: Any, call: tuple, columns: np.ndarray, n: int, head_major: bool) -> HeadScale:
    """The norm's :class:`HeadScale` for the target's heads, whose columns are the norm output's ``columns``
    (H, d_h) over ``n`` tokens: its factor per (token, group of its last axis), each head's that of the group
    holding it. ``call``: the norm call's input and output."""
    inp, out = call
    try:
        norm = norm_map(module, inp, out, "")
    except UnsupportedAttentionError as error:  # not a norm known here: the layer's reason
        raise _Refused(
            f"its query/key norm{str(error).removeprefix(': its norm')}, or its output is changed after it "
            "(OLMoE's clip_qkv clips it)"
        ) from error
    kind = type(module).__name__
    g = out.shape[-1]
    groups = columns // g
    if np.any(groups != groups[:, :1]):
        raise _Refused(f"its query/key norm {kind} normalises groups that straddle heads")
    centred = bool(np.any(norm.center != 0))
    if centred and np.any(np.bincount(groups.ravel()) % g):
        raise _Refused(f"its query/key norm {kind} centres groups of which only some columns are its queries/keys")
    factor = norm.factor.reshape(-1, n).T if head_major else norm.factor.reshape(n, -1)  # (n, groups)
    shift, gain = (norm.bias[columns % g] if np.any(norm.bias != 0) else None), norm.gain[columns % g]
    return HeadScale(np.ascontiguousarray(factor[:, groups[:, 0]]), gain, shift, groups if centred else None)


def _centred(projection: tuple[np.ndarray, np.ndarray], scale: HeadScale | None) -> tuple[np.ndarray, np.ndarray]:
    """W (d, H, d_h) and b (H, d_h) less each norm group's mean over its columns, where the query/key norm is a
    LayerNorm (its centring is that linear map); as they are otherwise."""
    w, b = projection
    if scale is None or scale.groups is None:
        return w, b
    w, b = w.copy(), b.copy()
    for group in np.unique(scale.groups):
        mine = scale.groups == group
        w[:, mine] -= w[:, mine].mean(axis=1, keepdims=True)
        b[mine] -= b[mine].mean()
    return w, b


def _project(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(h, n, e): ``x`` (n, d) through the per-head projection ``w`` (d, h, e) plus ``b`` (h, e), as one matrix
    product (BLAS; numpy's einsum of the same was 10 times slower and a third of a components capture)."""
    d, h, e = w.shape
    return (x @ w.reshape(d, h * e)).reshape(-1, h, e).transpose(1, 0, 2) + b[:, None, :]


def _input_norm(x_attn: torch.Tensor, x_in: torch.Tensor, norms: list[tuple]) -> NormMap | None:
    if x_attn.shape == x_in.shape and torch.equal(x_attn, x_in):
        return None
    for _, module, inp, out in norms:
        if (
            inp.shape == x_in.shape
            and torch.equal(inp, x_in)
            and out.shape == x_attn.shape
            and torch.equal(out, x_attn)
        ):
            try:
                return norm_map(module, inp, out, "")
            except UnsupportedAttentionError as error:  # a norm not known here: the layer's reason
                raise _Refused(str(error)) from error
    raise _Refused("its query and key projections read neither the layer's input nor a norm of it")


def _weights(linears: list[tuple], cols: list[tuple[int, int]], shape: torch.Size) -> tuple[np.ndarray, np.ndarray]:
    """W (d, h, d_h) and b (h, d_h) of the (linear, column) pairs ``cols``, head-major: each linear's columns
    taken at once (a column at a time was a fifth of :func:`find_qk`)."""
    h, _, d_h = shape
    index, column = np.array(cols, dtype=np.int64).reshape(-1, 2).T
    w_out: np.ndarray | None = None
    b_out = np.empty(len(cols))
    for at in np.unique(index):
        w, b = _projection(linears[int(at)][1])
        mine = np.flatnonzero(index == at)
        if w_out is None:
            w_out = np.empty((w.shape[0], len(cols)))
        w_out[:, mine], b_out[mine] = w[:, column[mine]], b[column[mine]]
    assert w_out is not None
    return w_out.reshape(-1, h, d_h), b_out.reshape(h, d_h)


def _fit_rotation(pre: np.ndarray, post: np.ndarray, check: float = QK_CHECK) -> Rotation:
    """The per-position rotation taking ``pre`` (G, n, d_h) to ``post`` (every head alike), checked."""
    n, d_h = pre.shape[1], pre.shape[2]
    scale = max(1.0, float(np.abs(post).max()))
    moved = np.flatnonzero(np.abs(pre - post).max(axis=(0, 1)) > check * scale)
    if moved.size == 0:
        return Rotation("none", np.ones((n, d_h // 2)), np.zeros((n, d_h // 2)))
    for width in _widths(int(moved[-1]) + 1, d_h):
        for kind in ("half", "interleaved"):
            rotation = Rotation(kind, np.ones((n, width // 2)), np.zeros((n, width // 2)), width)
            a, b = rotation.pairs(d_h)
            a1, a2, b1, b2 = pre[..., a], pre[..., b], post[..., a], post[..., b]
            norm = np.maximum((a1**2 + a2**2).sum(axis=0), 1e-300)
            rotation.cos = (a1 * b1 + a2 * b2).sum(axis=0) / norm
            rotation.sin = (a1 * b2 - a2 * b1).sum(axis=0) / norm
            if np.abs(rotation.apply(pre, np.arange(n)) - post).max() <= check * scale:
                rotation.width = None if width == d_h else width
                return rotation
    raise _Refused(
        "its queries and keys are not a fixed rotation per position of the projections' outputs in pairs (e, e + "
        "w/2) or (2e, 2e + 1) of the first w dimensions of a head (RoPE in other pairs, or a map other than a norm "
        "between the projections and RoPE)"
    )


def _widths(last: int, d_h: int) -> list[int]:
    """The rotated widths to try when the last dimension that moved is ``last - 1``: the even width that holds
    it and up to 4 pairs more (a pair's lowest frequencies may turn less than the check over a short text), then
    the whole head."""
    first = last + last % 2
    return sorted({*range(first, min(first + 10, d_h + 1), 2), d_h})


def _reproduces(x: np.ndarray, v_map: tuple[np.ndarray, np.ndarray], values: torch.Tensor, check: float) -> bool:
    """Whether W_V and b_V (for V-composition) rebuild the model's values from the projections' input."""
    rebuilt = _project(x, *v_map)
    target = values.to(torch.float64).numpy()
    return bool(np.abs(rebuilt - target).max() <= check * max(1.0, float(np.abs(target).max())))
