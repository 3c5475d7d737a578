"""Why token i attends to token j: the pre-softmax score ``s_ij = (q_i . k_j) * scaling`` split exactly into the
parts of (query-side component, key-side component) pairs.

The residual stream entering layer ``l`` is a sum of components, as :func:`~.decompose.decompose` names them
(the input embedding, every head and feed-forward of the earlier layers, one correction per layer); a pre-LN
layer's input norm is a per-token linear map once its scale is held at its forward-pass value (its shift is one
more component, "input norm"); the query and key projections are affine (their biases: "query bias", "key
bias"), a query/key norm (Qwen3's, Gemma 3's, OLMo 2's RMSNorms; Persimmon's LayerNorms, whose biases are
"query norm bias", "key norm bias") is a per-(token, head) scale given its factor, RoPE is a fixed rotation per
position (:mod:`.qk_trace`), and GQA's query head reads its key/value head.
So ``s_ij = sum_ab (q_i^a . k_j^b) * scaling`` plus the additive terms of the scores (T5's "position bias", a
"mask" value that is not 0: ALiBi folded into the mask); Gemma 2's softcap comes after: the score split is the
pre-cap one. :func:`key_attribution` and :func:`query_attribution` sum one side out over the edges a token
takes part in most; :func:`~.composition.head_composition` links heads.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from .._checks import check_index, is_int
from ..errors import UnsupportedAttentionError
from .components import Trace, trace_of
from .decompose import _f64, components, self_check
from .masks import additive_rows
from .trace_layers import LayerTrace, NormMap, half_hint, tolerance

if TYPE_CHECKING:
    from .extracted import Extraction
    from .qk_trace import QKTrace

__all__ = ["key_attribution", "query_attribution", "score_attribution"]

#: the pairs must sum to the model's own score to this share of its scale (float32: ~1e-6), else refused
SCORE_CHECK = 1e-4
#: in half precision, to this many of the dtype's epsilons of that scale (the model's own queries and keys are
#: rounded to it)
SCORE_ULPS = 16
SIDE_COLUMNS = ("term", "layer", "head")


def _norm_rows(norm: NormMap | None, rows: np.ndarray) -> NormMap | None:
    return None if norm is None else NormMap(norm.gain, norm.factor[rows], norm.center[rows], norm.bias)


def _rows_of(t: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
    """``t[rows]`` through numpy where it can (torch's indexing waited on busy intra-op threads: 6 ms a call)."""
    if t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64):
        return torch.from_numpy(t.numpy()[rows])
    return t[torch.as_tensor(rows)]


def _sliced(t: LayerTrace, rows: np.ndarray) -> LayerTrace:
    return dataclasses.replace(
        t,
        x_in=_rows_of(t.x_in, rows),
        x_out=_rows_of(t.x_out, rows),
        context=_rows_of(t.context, rows),
        attn_out=_rows_of(t.attn_out, rows),
        mlp_out=_rows_of(t.mlp_out, rows),
        post_ln=None if t.post_ln is None else (_norm_rows(t.post_ln[0], rows), _norm_rows(t.post_ln[1], rows)),  # type: ignore[arg-type]
        attn_norm=_norm_rows(t.attn_norm, rows),
        mlp_norm=_norm_rows(t.mlp_norm, rows),
        embed_in=None if t.embed_in is None else _rows_of(t.embed_in, rows),
        embed_norm=_norm_rows(t.embed_norm, rows),
    )


def stream(trace: Trace, layer: int, rows: np.ndarray) -> tuple[list[tuple[str, int, int]], np.ndarray]:
    """The residual stream entering ``layer`` at token ``rows``: labels (term, layer, head) and float64 (K, r, d)
    vectors (the decomposition of layer ``layer - 1``'s output, the input embedding for layer 0)."""
    sliced = Trace(trace.model_name, [_sliced(t, rows) for t in trace.layers[: max(layer, 1)]])
    labels, vectors = components(sliced, layer)
    stacked = np.stack(vectors)
    target = _f64(_rows_of(trace.layers[layer].x_in, rows))
    error = float(np.abs(stacked.sum(axis=0) - target).max())
    if not self_check(error, target, trace.dtype, max(layer - 1, 0)):
        raise UnsupportedAttentionError(
            f"{trace.model_name}: its components sum to layer {layer}'s input only within {error:.3g}"
            + half_hint(trace.dtype)
        )
    return labels, stacked


def layer_qk(trace: Trace, layer: int) -> QKTrace:
    """The layer's :class:`~.qk_trace.QKTrace`, or an UnsupportedAttentionError naming the model and why."""
    qk = trace.layers[layer].qk
    if qk is None:
        raise UnsupportedAttentionError(f"{trace.model_name}: layer {layer}'s queries and keys were not traced")
    qk = qk.rebuilt()
    if qk.error:
        raise UnsupportedAttentionError(
            f"{qk.error}; its attention scores cannot be attributed exactly (decompose, mode='norm' and "
            "mode='head-output' work for it; see docs/what-a-head-writes.md's architecture table)"
        )
    return qk


def head_stream(trace: Trace, layer: int, rows: np.ndarray) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The earlier heads' components of the stream entering ``layer`` at ``rows``, through its input norm's
    per-token scale: (layer, head) labels and float64 (K_heads, r, d)."""
    qk = layer_qk(trace, layer)
    labels, comps = stream(trace, layer, rows)
    keep = [k for k, label in enumerate(labels) if label[0] == "head"]
    comps = comps[keep]
    if qk.norm is not None:
        comps = comps * _norm_rows(qk.norm, rows).scale()[None]  # type: ignore[union-attr]
    return [(labels[k][1], labels[k][2]) for k in keep], comps


def side(
    trace: Trace, layer: int, rows: np.ndarray, kind: str, head: int
) -> tuple[list[tuple[str, int, int]], np.ndarray]:
    """Each component's query (``kind`` "query", query head ``head``) or key ("key": the key/value head query
    head ``head`` reads) at token ``rows``, through its query/key norm's scale and rotated: labels and float64
    (K, r, d_h)."""
    qk = layer_qk(trace, layer)
    labels, comps = stream(trace, layer, rows)
    group = head if kind == "query" else qk.kv_head(head)
    w, b = (qk.w_q, qk.b_q) if kind == "query" else (qk.w_k, qk.b_k)
    assert w is not None and b is not None
    if qk.norm is not None:
        norm = _norm_rows(qk.norm, rows)
        assert norm is not None
        comps, shift = comps * norm.scale()[None], norm.shift()
        if np.any(shift != 0):
            labels, comps = [*labels, ("input norm", layer, -1)], np.concatenate([comps, shift[None]])
    projected = comps @ w[:, group]
    if np.any(b[group] != 0):
        labels = [*labels, (f"{kind} bias", layer, group)]
        projected = np.concatenate([projected, np.broadcast_to(b[group], (1, len(rows), len(b[group])))])
    if qk.norm_bias(kind, group) is not None:
        labels = [*labels, (f"{kind} norm bias", layer, group)]
    return labels, qk.finish(projected, kind, group, rows, bias=True)


def _extra(qk: QKTrace, layer: int, head: int, i: int, j: int) -> list[tuple[str, float]]:
    """The additive terms of s_ij besides q . k: T5's position bias, a mask value that is not 0; a masked pair is
    refused."""
    extra = []
    if qk.bias is not None:
        extra.append(("position bias", float(qk.bias[0, head, i, j])))
    mask = additive_rows(qk.mask, [i], torch.device("cpu"))
    if mask is not None:
        value = float(mask[0, head if mask.shape[1] > 1 else 0, 0, j])
        if value <= torch.finfo(torch.float32).min / 2 or not np.isfinite(value):
            raise ValueError(
                f"token {j} is not visible to token {i} in layer {layer} (masked: its score is -inf, the "
                "attention weight 0); pick a key the query can see"
            )
        if value != 0:
            extra.append(("mask", value))
    return extra


def _model_score(qk: QKTrace, head: int, i: int, j: int) -> tuple[float, float]:
    """The model's ``q_i . k_j * scaling`` and its size before cancellation, ``|q_i| |k_j| scaling``."""
    kv = qk.kv_head(head)
    q, k = qk.query[head, i].double(), qk.key[kv, j].double()
    return float(q @ k) * qk.scaling, float(q.norm() * k.norm()) * abs(qk.scaling)


def _checked(ex: Extraction, layer: int, head: int, tokens: dict[str, Any]) -> tuple[int, int, dict[str, int]]:
    layer = check_index(layer, ex.n_layers, "layer", "layers")
    head = check_index(head, ex.n_heads, "head", "heads per layer")
    checked = {}
    for name, value in tokens.items():
        if not is_int(value):
            raise TypeError(f"{name} must be an int token index, got {type(value).__name__} {value!r}")
        checked[name] = check_index(value, ex.n_tokens, f"token {name}", "tokens")
    return layer, head, checked


def score_attribution(ex: Extraction, layer: int, head: int, i: int, j: int, *, model: Any = None) -> pd.DataFrame:
    """Query token ``i``'s pre-softmax score on key ``j`` in head ``head`` of ``layer`` as one row per (query-side
    component, key-side component) pair (columns ``query_term``, ``query_layer``, ``query_head``, ``key_term``,
    ``key_layer``, ``key_head``, ``score``) and one row per additive term ("position bias", "mask" on both sides);
    the rows sum to the model's score (``attrs["score"]``; before Gemma 2's softcap, ``attrs["softcap"]``).
    ``model``: the model that made ``ex`` when it was extracted without ``components=True``."""
    layer, head, t = _checked(ex, layer, head, {"i": i, "j": j})
    i, j = t["i"], t["j"]
    trace = trace_of(ex, model)
    qk = layer_qk(trace, layer)
    extra = _extra(qk, layer, head, i, j)
    q_labels, q = side(trace, layer, np.array([i]), "query", head)
    k_labels, k = side(trace, layer, np.array([j]), "key", head)
    scores = (q[:, 0] @ k[:, 0].T) * qk.scaling
    columns = [f"query_{c}" for c in SIDE_COLUMNS] + [f"key_{c}" for c in SIDE_COLUMNS]
    q_side = pd.DataFrame(q_labels, columns=columns[:3]).loc[np.repeat(np.arange(len(q_labels)), len(k_labels))]
    k_side = pd.DataFrame(k_labels, columns=columns[3:]).loc[np.tile(np.arange(len(k_labels)), len(q_labels))]
    frame = pd.concat([q_side.reset_index(drop=True), k_side.reset_index(drop=True)], axis=1)
    frame["score"] = scores.reshape(-1)
    if extra:
        more = pd.DataFrame([(n, layer, head, n, layer, head, v) for n, v in extra], columns=[*columns, "score"])
        frame = pd.concat([frame, more], ignore_index=True)
    model_score, size = _model_score(qk, head, i, j)
    model_score += sum(v for _, v in extra)
    _check_total(trace, float(frame["score"].sum()), model_score, scores, size)
    frame.attrs.update(score=model_score, softcap=qk.softcap, layer=layer, head=head, i=i, j=j)
    return frame


def _check_total(trace: Trace, total: float, target: float, parts: np.ndarray, size: float) -> None:
    """Refused unless ``total`` is ``target`` to the check's share of the score's scale: the largest of the score,
    its parts and ``size``, ``|q| |k| scaling`` (the scale of the model's own rounding of q . k: a score that
    cancels is rounded to that, half-precision queries normalised by a query/key norm to about 1 ulp of it)."""
    scale = max(abs(target), float(np.abs(parts).max(initial=0.0)), size, 1e-30)
    if not abs(total - target) <= tolerance(SCORE_CHECK, trace.dtype, SCORE_ULPS) * scale:
        raise UnsupportedAttentionError(
            f"{trace.model_name}: the attributed parts sum to {total:.6g}, the model's score is {target:.6g}; its "
            "attention scores cannot be attributed exactly" + half_hint(trace.dtype)
        )


def key_attribution(ex: Extraction, layer: int, head: int, j: int, *, top: int = 8, model: Any = None) -> pd.DataFrame:
    """Each key-side component's part of the scores that the ``top`` queries attending most to key ``j`` give it:
    one row per component (``term``, ``layer``, ``head``), ``score`` its mean part, ``share`` its part of the
    summed ``q . k`` scores (the additive terms aside). ``attrs["tokens"]``: the queries used."""
    return _one_side(ex, layer, head, j, top, model, kind="key")


def query_attribution(
    ex: Extraction, layer: int, head: int, i: int, *, top: int = 8, model: Any = None
) -> pd.DataFrame:
    """The twin of :func:`key_attribution`: each query-side component's part of query ``i``'s scores on the
    ``top`` keys it attends to most."""
    return _one_side(ex, layer, head, i, top, model, kind="query")


def _one_side(ex: Extraction, layer: int, head: int, token: int, top: int, model: Any, *, kind: str) -> pd.DataFrame:
    name = "j" if kind == "key" else "i"
    layer, head, t = _checked(ex, layer, head, {name: token})
    token = t[name]
    if not is_int(top) or top < 1:
        raise ValueError(f"top must be a positive int, got {top!r}")
    trace = trace_of(ex, model)
    qk = layer_qk(trace, layer)
    weights = ex.attention(layer, head)
    line = weights[:, token] if kind == "key" else weights[token]
    others = np.argsort(-line, kind="stable")[: int(top)]
    others = others[line[others] > 0]
    kv = qk.kv_head(head)
    labels, vectors = side(trace, layer, np.array([token]), kind, head)
    opposite = (qk.query[head, others] if kind == "key" else qk.key[kv, others]).double().numpy()
    parts = vectors[:, 0] @ opposite.T * qk.scaling  # (K, t)
    own = (qk.key[kv, token] if kind == "key" else qk.query[head, token]).double().numpy()
    totals = opposite @ own * qk.scaling
    size = float(np.linalg.norm(opposite, axis=1).sum() * np.linalg.norm(own)) * abs(qk.scaling)
    _check_total(trace, float(parts.sum()), float(totals.sum()), parts, size)
    frame = pd.DataFrame(labels, columns=list(SIDE_COLUMNS))
    frame["score"] = parts.mean(axis=1)
    frame["share"] = parts.sum(axis=1) / totals.sum() if totals.sum() != 0 else np.nan
    frame.attrs.update(tokens=others.tolist(), scores=totals.tolist(), layer=layer, head=head, token=token)
    return frame
