"""How heads compose (Elhage et al. 2021): every head of an earlier layer against every head of a later one.

Weight-based, in the row convention ``x @ W``: ``W_OV^s = W_V^s W_O^s`` of the source (with the gains of the norms
its output passes through before the destination: its own sandwich norm, a post-LN model's LayerNorms), ``W_QK^d
= W_Q^d W_K^d^T`` of the destination (its input norm's gain folded into W_Q, W_K and W_V, a query/key norm's
gain into W_Q and W_K);
``q = ||W_OV^s W_QK^d||_F / (||W_OV^s||_F ||W_QK^d||_F)`` (the source writes into the queries),
``k = ||W_QK^d W_OV^s^T||_F / (...)`` (into the keys), ``v = ||W_OV^s W_OV^d||_F / (...)``; each in [0, 1]. Every
matrix is a product of rank-d_h factors, ``||A C B^T||_F^2 = tr((A^T A) C (B^T B) C^T)``: d_h x d_h work per pair.

Data-based (``q_data``, ``k_data``): over the destination head's ``edges`` strongest edges (i, j) of the text
(each query's heaviest key, for the queries whose is heaviest),
the source head's part of the scores ``s_ij`` on the query side (its query component with the whole key) and
on the key side (:mod:`.attribution`), summed, over the summed scores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._checks import is_int
from .attribution import head_stream, layer_qk
from .components import Trace, trace_of

if TYPE_CHECKING:
    from .extracted import Extraction

__all__ = ["head_composition"]

COLUMNS = ["src_layer", "src_head", "dst_layer", "dst_head", "q", "k", "v", "q_data", "k_data"]
#: token rows per block when the data-based shares decompose the stream (bounds the (K, rows, d) block)
ROW_BLOCK = 64


def head_composition(ex: Extraction, *, edges: int = 8, data: bool = True, model: Any = None) -> pd.DataFrame:
    """One row per (earlier head, later head): ``src_layer``, ``src_head``, ``dst_layer``, ``dst_head``, the
    weight-based ``q``, ``k``, ``v`` composition scores and the data-based ``q_data``, ``k_data`` over each
    destination head's ``edges`` strongest edges (module doc; ``data=False`` leaves them NaN). ``v`` is NaN where
    the values' projection could not be located."""
    if not is_int(edges) or edges < 1:
        raise ValueError(f"edges must be a positive int, got {edges!r}")
    trace = trace_of(ex, model)
    n_layers = len(trace.layers)
    if n_layers < 2:
        raise ValueError(f"{trace.model_name} has one layer: no head of it composes with a later one")
    factors = [_factors(trace, layer) for layer in range(n_layers)]
    blocks = []
    for dst in range(1, n_layers):
        for src in range(dst):
            blocks.append(_pair_block(trace, factors, src, dst))
    frame = pd.DataFrame(np.concatenate(blocks), columns=COLUMNS[:7])
    for column in COLUMNS[:4]:
        frame[column] = frame[column].astype(int)
    frame["q_data"] = np.nan
    frame["k_data"] = np.nan
    if data:
        _data_shares(ex, trace, frame, int(edges))
    return frame


def _factors(trace: Trace, layer: int) -> dict[str, Any]:
    """The layer's per-head factors (query heads; GQA's key/value heads repeated), the input norm's gain folded in
    and the query/key norm's (their per-token factors, a scalar per head and token, left out as the input
    norm's)."""
    qk = layer_qk(trace, layer)
    t = trace.layers[layer]
    d = t.w_o.shape[-1]
    gain = np.ones(d) if qk.norm is None else qk.norm.gain
    groups = t.n_heads // qk.key.shape[0]
    assert qk.w_q is not None and qk.w_k is not None
    w_q = gain[:, None, None] * qk.w_q * qk.gains("query")[None]
    w_k = gain[:, None, None] * np.repeat(qk.w_k * qk.gains("key")[None], groups, axis=1)
    w_v = None if qk.w_v is None else gain[:, None, None] * np.repeat(qk.w_v, groups, axis=1)
    out_gain = np.ones(d) if t.attn_norm is None else t.attn_norm.gain
    through = np.ones(d) if t.post_ln is None else t.post_ln[0].gain * t.post_ln[1].gain
    return {
        "w_q": w_q,  # (d, H, d_h)
        "w_k": w_k,
        "w_v": w_v,
        "w_o": t.w_o,  # (H, d_h, d)
        "in_gain": gain,
        "out_gain": out_gain,  # the source's own norm on its output (Gemma 2)
        "through": through,  # a post-LN layer's two norms, which every earlier write passes
        "gram_q": np.einsum("dha,dhb->hab", w_q, w_q),
        "gram_k": np.einsum("dha,dhb->hab", w_k, w_k),
        "gram_v": None if w_v is None else np.einsum("dha,dhb->hab", w_v, w_v),
        "gram_o": np.einsum("had,hbd->hab", t.w_o, t.w_o),
    }


def _trace_norm(a: np.ndarray, c: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``tr(A_s C_st B_t C_st^T)`` for every (s, t): ``a`` (S, x, x), ``c`` (S, T, x, y), ``b`` (T, y, y)."""
    return np.einsum("sab,stbc,tce,stae->st", a, c, b, c, optimize=True)


def _pair_block(trace: Trace, factors: list[dict], src: int, dst: int) -> np.ndarray:
    s, t = factors[src], factors[dst]
    between = s["out_gain"].copy()
    for layer in range(src, dst):
        between = between * factors[layer]["through"]
    g = between * t["in_gain"]  # every gain from the source's output to the destination's projections
    w_o = s["w_o"] * between[None, None, :]  # the source's output as the destination's input sees it
    gram_out = np.einsum("had,hbd->hab", w_o, w_o)
    sources, targets = w_o.shape[0], t["w_q"].shape[1]
    w_o_raw = s["w_o"] * g[None, None, :]
    c_q = np.einsum("sad,dtb->stab", w_o_raw, t["w_q"] / t["in_gain"][:, None, None])
    c_k = np.einsum("sad,dtb->stab", w_o_raw, t["w_k"] / t["in_gain"][:, None, None])
    qk_norm = np.einsum("tab,tba->t", t["gram_q"], t["gram_k"])
    result = np.full((sources, targets, 7), np.nan)
    grid = np.meshgrid(np.arange(sources), np.arange(targets), indexing="ij")
    result[..., 0], result[..., 1], result[..., 2], result[..., 3] = src, grid[0], dst, grid[1]
    if s["gram_v"] is not None:
        ov_norm = np.einsum("sab,sba->s", s["gram_v"], gram_out)
        denominator = np.sqrt(np.maximum(ov_norm[:, None] * qk_norm[None, :], 0.0))
        q = _trace_norm(s["gram_v"], c_q, t["gram_k"])
        k = _trace_norm(s["gram_v"], c_k, t["gram_q"])
        result[..., 4] = _ratio(q, denominator)
        result[..., 5] = _ratio(k, denominator)
        if t["w_v"] is not None:
            c_v = np.einsum("sad,dtb->stab", w_o_raw, t["w_v"] / t["in_gain"][:, None, None])
            ov_dst = np.einsum("tab,tba->t", t["gram_v"], t["gram_o"])
            v = _trace_norm(s["gram_v"], c_v, t["gram_o"])
            result[..., 6] = _ratio(v, np.sqrt(np.maximum(ov_norm[:, None] * ov_dst[None, :], 0.0)))
    return result.reshape(-1, 7)


def _ratio(squared: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``sqrt(squared) / denominator`` clipped to [0, 1]; 0 where a head's matrix is 0."""
    value = np.sqrt(np.maximum(squared, 0.0))
    out = np.divide(value, denominator, out=np.zeros_like(value), where=denominator > 0)
    return np.clip(out, 0.0, 1.0)


def _strongest(ex: Extraction, layer: int, head: int, edges: int) -> tuple[np.ndarray, np.ndarray]:
    """The head's strongest edges: each query's heaviest key, for the ``edges`` queries whose is heaviest."""
    weights = ex.attention(layer, head)
    keys = weights.argmax(axis=1)
    heaviest = weights[np.arange(len(keys)), keys]
    queries = np.argsort(-heaviest, kind="stable")[:edges]
    queries = queries[heaviest[queries] > 0]
    return queries, keys[queries]


def _data_shares(ex: Extraction, trace: Trace, frame: pd.DataFrame, edges: int) -> None:
    """q_data and k_data of every (source head, destination head) pair, in place: per destination layer, its heads
    in groups whose edges' tokens fit ROW_BLOCK rows, the stream decomposed once per group."""
    q_data, k_data = np.full(len(frame), np.nan), np.full(len(frame), np.nan)
    n_heads = trace.layers[0].n_heads
    for dst in range(1, len(trace.layers)):
        group: list[tuple[int, np.ndarray, np.ndarray]] = []
        for head in range(n_heads):
            i, j = _strongest(ex, dst, head, edges)
            if len(i):
                group.append((head, i, j))
            rows = {int(r) for _, a, b in group for r in (*a, *b)}
            if group and (len(rows) >= ROW_BLOCK or head == n_heads - 1):
                _group_shares(trace, dst, group, q_data, k_data)
                group = []
    frame["q_data"], frame["k_data"] = q_data, k_data


def _group_shares(
    trace: Trace, dst: int, group: list[tuple[int, np.ndarray, np.ndarray]], q_data: np.ndarray, k_data: np.ndarray
) -> None:
    qk = layer_qk(trace, dst)
    rows = np.unique(np.concatenate([np.concatenate([i, j]) for _, i, j in group]))
    labels, comps = head_stream(trace, dst, rows)
    n_heads = trace.layers[0].n_heads
    assert qk.w_q is not None and qk.w_k is not None
    for head, i, j in group:
        kv = qk.kv_head(head)
        query = qk.query[head, i].double().numpy()
        key = qk.key[kv, j].double().numpy()
        total = float(np.einsum("ed,ed->", query, key)) * qk.scaling
        if total == 0:
            continue
        at_i, at_j = np.searchsorted(rows, i), np.searchsorted(rows, j)
        q_side = qk.finish(comps[:, at_i] @ qk.w_q[:, head], "query", head, i)
        k_side = qk.finish(comps[:, at_j] @ qk.w_k[:, kv], "key", kv, j)
        q_parts = np.einsum("krd,rd->k", q_side, key) * qk.scaling / total
        k_parts = np.einsum("krd,rd->k", k_side, query) * qk.scaling / total
        for (layer, src), qp, kp in zip(labels, q_parts, k_parts):
            row = _row(layer, src, dst, head, n_heads)
            q_data[row], k_data[row] = qp, kp


def _row(src_layer: int, src_head: int, dst_layer: int, dst_head: int, n_heads: int) -> int:
    """The frame's row of a pair: blocks by (dst layer, src layer < dst), heads src-major within a block."""
    block = dst_layer * (dst_layer - 1) // 2 + src_layer
    return (block * n_heads + src_head) * n_heads + dst_head
