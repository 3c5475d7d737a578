"""Each token's hidden state as an exact sum of what wrote it (Mickus, Paperno & Constant, TACL 2022:
``e_t = i_t + h_t + f_t + c_t``), what each key sends through a head (Kobayashi et al., EMNLP 2020), and what a
head writes into each token, from a :class:`~.components.Trace` of the model on the extraction's tokens.

- :func:`decompose` ``(ex, layer)``: the input embedding, every head and feed-forward of the layers up to
  ``layer``, and one correction per layer (output and value biases, the norms' biases and mean shifts), each
  carried through every later norm's per-token scale, summing to ``ex.layer_output(layer)``. Post-LN encoders
  (BERT, RoBERTa, DistilBERT, MiniLM) scale every earlier term by each LayerNorm's ``gain / std``; pre-LN
  decoders add to the residual stream, and the final norm (when the last hidden state is after it) scales
  every term per token.
- :func:`value_norms` ``(ex)`` (L, H, n): ``||f_h(x_j)||``, ``f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h``, and
  :func:`norm_attention` ``(ex, layer, head)``: ``alpha_ij ||f_h(x_j)||``, rows renormalised.
- :func:`head_outputs` ``(ex, layer, head)``: the head's (n, d_h) context and a factor ``F`` of W_O's Gram
  matrix, ``||o_s - o_t|| = ||(c_s - c_t) F||``; :func:`head_output_distances` the (n, n) squared distances.

The trace comes from ``extract(..., components=True)`` or from ``model=`` (one more forward pass with hooks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._checks import check_index
from ..budget import within_budget
from ..errors import UnsupportedAttentionError
from .components import Trace, trace_of
from .sources import NoAttention, read_only
from .trace_layers import LayerTrace, NormMap, half_hint, tolerance

if TYPE_CHECKING:
    from .extracted import Extraction

__all__ = [
    "Decomposition",
    "HeadOutputs",
    "decompose",
    "head_output_distances",
    "head_outputs",
    "norm_attention",
    "norm_attention_into",
    "value_norms",
]

VALUE_BIAS = ("correction", "head")
EMBEDDING_BIAS = ("correction", "input")
#: the sum of the components must reproduce the layer's output to this share of its largest entry, else the
#: model is refused as not decomposable (a float32 model is exact to about 1e-6 of it)
SELF_CHECK = 1e-4
#: in half precision, to this many of the dtype's epsilons times sqrt(layer + 1): the model rounds every
#: projection and every residual sum (measured against its own forward: bfloat16 MiniLM 0.5-0.9 epsilons, tiny
#: Llama 0.4-0.7; float16 0.5-0.8 and 0.6-0.7)
HALF_ULPS = 4


def self_check(error: float, target: np.ndarray, dtype: Any, layer: int) -> bool:
    """Whether components summing to ``target`` (layer ``layer``'s state) within ``error`` are exact to what the
    model computes in ``dtype``: :data:`SELF_CHECK` of its largest entry, or the half-precision bound."""
    bound = tolerance(SELF_CHECK, dtype, HALF_ULPS * float(np.sqrt(layer + 1)))
    return error <= bound * max(1.0, float(np.abs(target).max()))


@dataclass(eq=False)
class Decomposition:
    """``ex.layer_output(layer)`` split into components: ``terms`` one row per component (``term`` "input",
    "head", "mlp" or "correction"; ``layer``, -1 for the input; ``head``, -1 where none), ``vectors`` float64
    (K, n, d), ``vector(k)`` one of them; ``shares`` (K, n) is ``t . e / ||e||^2`` (sums to 1 over k)."""

    layer: int
    terms: pd.DataFrame
    vectors: np.ndarray
    model_name: str

    def vector(self, k: int) -> np.ndarray:
        return self.vectors[check_index(k, len(self.vectors), "component", "components")]

    @property
    def total(self) -> np.ndarray:
        """(n, d) float64: the sum of every component, the layer's output."""
        return self.vectors.sum(axis=0)

    @property
    def shares(self) -> np.ndarray:
        total = self.total
        return np.einsum("knd,nd->kn", self.vectors, total) / np.einsum("nd,nd->n", total, total)[None, :]

    def __repr__(self) -> str:
        k, n, d = self.vectors.shape
        return f"Decomposition(model_name={self.model_name!r}, layer={self.layer}, components={k}, n={n}, d={d})"


def decompose(
    ex: Extraction, layer: int, *, value_bias: str = "correction", embedding_bias: str = "correction", model: Any = None
) -> Decomposition:
    """Layer ``layer``'s output (0-based) as a sum of components (module doc). ``value_bias``: "correction"
    (the paper's: ``b_V^h W_O^h`` joins the layer's correction) or "head" (kept in its head). ``embedding_bias``:
    "correction" (the paper's: the input term is the embeddings through the embedding norm's gain and scale, its
    bias and mean shift join layer 0's correction) or "input" (the input term is the embedding norm's output
    whole); the same where the model has no embedding norm. ``model``: the model that made ``ex`` when it was
    extracted without ``components=True`` (a name, path or loaded model)."""
    layer = check_index(layer, ex.n_layers, "layer", "layers")
    if value_bias not in VALUE_BIAS:
        raise ValueError(f"value_bias must be one of {VALUE_BIAS}, got {value_bias!r}")
    if embedding_bias not in EMBEDDING_BIAS:
        raise ValueError(f"embedding_bias must be one of {EMBEDDING_BIAS}, got {embedding_bias!r}")
    trace = _trace(ex, model, f"decompose(ex, {layer})")
    count = 1 + sum(t.n_heads + 2 for t in trace.layers[: layer + 1])
    within_budget(
        2 * count * int(np.prod(trace.layers[0].x_in.shape)) * 8,
        f"decompose(ex, {layer}): {count} components of {ex.n_tokens} tokens",
        "an earlier layer, a shorter text (max_tokens=)",
    )
    labels, vectors = components(trace, layer + 1, value_bias == "correction", embedding_bias == "correction")
    if layer == ex.n_layers - 1 and trace.final_norm is not None:
        _apply(trace.final_norm, vectors, len(vectors) - 1)
    stacked = read_only(np.stack(vectors))
    target = ex.states.states[layer + 1].double().numpy()
    error = float(np.abs(stacked.sum(axis=0) - target).max())
    if not self_check(error, target, trace.dtype, layer):
        raise UnsupportedAttentionError(
            f"{trace.model_name}: its components sum to layer {layer}'s output only within {error:.3g}; this "
            "architecture's blocks are not the post-LN or pre-LN residual blocks headsne-widget decomposes exactly"
            + half_hint(trace.dtype)
        )
    terms = pd.DataFrame(labels, columns=["term", "layer", "head"])
    return Decomposition(layer, terms, stacked, ex.model_name)


def components(
    trace: Trace, layers: int, value_bias: bool = True, embedding_bias: bool = True
) -> tuple[list[tuple[str, int, int]], list[np.ndarray]]:
    """The components of the residual stream after the first ``layers`` layers of ``trace`` (before the final norm):
    labels (term, layer, head) and float64 (n, d) vectors; ``value_bias`` / ``embedding_bias``: those biases in
    the corrections (the paper's conventions, :func:`decompose`)."""
    first = trace.layers[0]
    labels: list[tuple[str, int, int]] = [("input", -1, -1)]
    carried = None
    if embedding_bias and first.embed_norm is not None and first.embed_in is not None:
        vectors = [_f64(first.embed_in) * first.embed_norm.scale()]  # the paper's i_t: the embeddings, gain / std
        carried = first.embed_norm.shift()  # its bias and mean shift: layer 0's correction
    else:
        vectors = [_f64(first.x_in)]
    for index in range(layers):
        _add_layer(trace, index, value_bias, labels, vectors, carried if index == 0 else None)
    if layers == 0 and carried is not None:  # the stream entering layer 0: the shift is a correction of its own
        labels.append(("correction", -1, -1))
        vectors.append(carried)
    return labels, vectors


def _add_layer(
    trace: Trace,
    index: int,
    bias_to_correction: bool,
    labels: list[tuple[str, int, int]],
    vectors: list,
    carried: np.ndarray | None = None,
) -> None:
    """Append layer ``index``'s heads, feed-forward and correction, applying its norms to every term so far;
    ``carried``: a part of the layer's input stream that joins its correction (the embedding norm's shift)."""
    t = trace.layers[index]
    heads, correction = _heads(t, bias_to_correction, trace.model_name)
    correction = correction + t.b_o[None, :]
    carry: float | np.ndarray = 0.0 if carried is None else carried
    mlp = _f64(t.mlp_out) - t.b_f[None, :]
    if t.post_ln is not None:  # LN1(x + attention), then LN2(. + feed-forward): every term so far scaled
        vectors.extend([*heads, correction + carry])
        _apply(t.post_ln[0], vectors, len(vectors) - 1)
        vectors[-1:] = [mlp, vectors[-1] + t.b_f[None, :]]
        _apply(t.post_ln[1], vectors, len(vectors) - 1)
    else:
        if t.attn_norm is not None:
            scale = t.attn_norm.scale()
            heads = [h * scale for h in heads]
            correction = correction * scale + t.attn_norm.shift()
        feed = [mlp, np.broadcast_to(t.b_f[None, :], mlp.shape)]
        if t.mlp_norm is not None:
            scale = t.mlp_norm.scale()
            feed = [mlp * scale, feed[1] * scale + t.mlp_norm.shift()]
        vectors.extend(heads)
        vectors.extend([feed[0], correction + feed[1] + carry])
    labels.extend(("head", index, h) for h in range(len(heads)))
    labels.extend([("mlp", index, -1), ("correction", index, -1)])


def _apply(norm: NormMap, vectors: list, correction: int) -> None:
    """Scale every vector by ``norm``'s per-token scale, its shift into ``vectors[correction]``."""
    scale = norm.scale()
    for k, v in enumerate(vectors):
        vectors[k] = v * scale
    vectors[correction] = vectors[correction] + norm.shift()


def _heads(t: LayerTrace, bias_to_correction: bool, name: str) -> tuple[list[np.ndarray], np.ndarray]:
    """Each head's ``c W_O^h`` (n, d), less ``b_V^h W_O^h`` when it goes to the correction (returned summed)."""
    context = _f64(t.context)
    heads = [context[:, h] @ t.w_o[h] for h in range(t.n_heads)]
    correction = np.zeros_like(heads[0])
    if bias_to_correction:
        if t.b_v is None:
            raise UnsupportedAttentionError(
                f"{name}: its value biases could not be located among its projections; pass value_bias='head'"
            )
        for h in range(t.n_heads):
            sent = t.b_v[h // t.kv_groups] @ t.w_o[h]  # attention rows sum to 1: the bias passes whole
            heads[h] = heads[h] - sent[None, :]
            correction = correction + sent[None, :]
    return heads, correction


def _trace(ex: Extraction, model: Any, what: str) -> Trace:
    """``ex``'s trace (:func:`~.components.trace_of`); for the occurrences of a word across texts (the contexts
    view), which have none, an error that says so rather than asking for ``extract(..., components=True)``."""
    if isinstance(ex.attention_source, NoAttention):
        raise ValueError(f"{what} needs the components of one text's forward pass, and {ex.attention_source.reason}")
    return trace_of(ex, model)


def _f64(t: Any) -> np.ndarray:
    return t.detach().to("cpu").double().numpy()


def value_norms(ex: Extraction, model: Any = None) -> np.ndarray:
    """float32 (L, H, n): ``||(x_j W_V^h + b_V^h) W_O^h||`` of every key j, through W_O's Gram matrix (GQA: the
    key/value head query head h reads); computed once per trace, kept with it."""
    trace = _trace(ex, model, "value-weighted attention (mode='norm')")
    if trace.value_norms is not None:
        return trace.value_norms
    out = np.empty((ex.n_layers, ex.n_heads, ex.n_tokens), dtype=np.float32)
    for index, t in enumerate(trace.layers):
        values = _f64(t.values)
        for h in range(t.n_heads):
            v = values[h // t.kv_groups]
            gram = t.w_o[h] @ t.w_o[h].T
            out[index, h] = np.sqrt(np.maximum(np.einsum("nk,kl,nl->n", v, gram, v), 0.0))
    trace.value_norms = read_only(out)
    return trace.value_norms


def norm_attention(ex: Extraction, layer: int, head: int, model: Any = None) -> np.ndarray:
    """float32 (n, n): ``alpha_ij ||f_h(x_j)||`` with each row renormalised to sum 1 (Kobayashi et al. 2020); a
    row whose keys all send nothing stays 0. In float32 as the attention is (the row sums in float64): one (n, n)
    array, refused beyond the memory budget before it is allocated."""
    n = ex.n_tokens
    within_budget(4 * n * n, f"norm_attention(ex, {layer}, {head}) over {n} tokens", "a shorter text (max_tokens=)")
    return read_only(norm_attention_into(ex, layer, head, np.empty((n, n), dtype=np.float32), model))


def norm_attention_into(ex: Extraction, layer: int, head: int, out: np.ndarray, model: Any = None) -> np.ndarray:
    """:func:`norm_attention` written into ``out`` (a C-contiguous float32 (n, n) array of the caller's): the head's
    attention, then its rows weighted by the value norms and renormalised in place, in shares on the package's
    threads (:mod:`.norm_kernels`)."""
    from .._parallel import in_shares
    from .norm_kernels import weigh_rows

    layer = check_index(layer, ex.n_layers, "layer", "layers")
    head = check_index(head, ex.n_heads, "head", "heads per layer")
    norms = value_norms(ex, model)[layer, head].astype(np.float32)
    ex.attention_into(layer, head, out)
    n = ex.n_tokens
    in_shares(n, lambda lo, hi: weigh_rows(out, norms, lo, hi), count=max(1, min(16, n // 256)))
    return out


@dataclass(eq=False)
class HeadOutputs:
    """What head ``head`` of ``layer`` writes into each token, ``o_t = c_t W_O^h``, without forming (n, d):
    ``context`` (n, d_h), ``w_o`` (d_h, d), ``gram = W_O^h W_O^h^T`` and ``factor`` (d_h, r) with
    ``factor @ factor.T == gram``, so that ``||o_s - o_t||^2 = (c_s - c_t) gram (c_s - c_t)^T``. float64."""

    context: np.ndarray
    w_o: np.ndarray
    gram: np.ndarray
    factor: np.ndarray

    def points(self) -> np.ndarray:
        """(n, r): ``context @ factor``, whose Euclidean distances are those of the outputs o_t."""
        return self.context @ self.factor

    def outputs(self) -> np.ndarray:
        """(n, d): the outputs themselves (for checks; the distances need only :meth:`points`)."""
        return self.context @ self.w_o


def head_outputs(ex: Extraction, layer: int, head: int, model: Any = None) -> HeadOutputs:
    """Head ``head`` of ``layer``: its context and W_O's Gram factor (class doc)."""
    layer = check_index(layer, ex.n_layers, "layer", "layers")
    head = check_index(head, ex.n_heads, "head", "heads per layer")
    t = _trace(ex, model, "what a head writes (mode='head-output')").layers[layer]
    w_o = t.w_o[head]
    gram = w_o @ w_o.T
    eigenvalues, vectors = np.linalg.eigh(gram)
    keep = eigenvalues > eigenvalues.max() * 1e-13
    factor = vectors[:, keep] * np.sqrt(eigenvalues[keep])[None, :]
    return HeadOutputs(_f64(t.context[:, head]), w_o, gram, factor)


def head_output_distances(ex: Extraction, layer: int, head: int, model: Any = None) -> np.ndarray:
    """float64 (n, n): squared Euclidean distances between the head's outputs ``o_t``, from the (n, r) points;
    refused (``MemoryBudgetError``) before the points are made where (n, n) float64 exceeds the memory budget."""
    from scipy.spatial.distance import cdist

    n = ex.n_tokens
    within_budget(
        8 * n * n,
        f"head_output_distances(ex, {layer}, {head}) over {n} tokens",
        f"head_outputs(ex, {layer}, {head}).points() (n x r) and a neighbour search, or a shorter text",
    )
    points = head_outputs(ex, layer, head, model).points()
    return cdist(points, points, "sqeuclidean")  # differences first: no cancellation between near outputs
