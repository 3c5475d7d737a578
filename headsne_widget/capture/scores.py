"""Per-head scores, folded over query chunks during the capture: which heads are sinks, previous-token, local, ...

A researcher's first question about a model with hundreds of heads is which of them to look at. The capture
computes every head's attention in query chunks anyway (:mod:`.attention`); :class:`LayerScores` folds each chunk
into a few sums per head and two ``(H, n)`` profiles, so that every head's scores cost O(L x H x n) memory and
never an n x n array. With ``A`` one head's attention over all n tokens (``A[i, j]``: how much query i attends to
key j) and ``m_i`` the number of keys row i may attend to (its non-zero entries):

- ``sink`` = mean over i of ``A[i, 0]`` (attention to the first token, whatever it is);
- ``previous`` = mean over i >= 1 of ``A[i, i - 1]``;
- ``next`` = mean over i <= n - 2 of ``A[i, i + 1]`` (0 in a causal model);
- ``self`` = mean over i of ``A[i, i]``;
- ``local`` = mean over i of the sum of ``A[i, j]`` over ``|i - j| <= LOCAL_WINDOW`` (3);
- ``entropy`` = mean over the rows with ``m_i >= 2`` of ``H(A[i]) / log(m_i)`` (1 = uniform over what it sees);
- ``special`` = mean over i of the attention on the special tokens ([CLS], [SEP], <s>, ...);
- ``future`` = mean over i of the sum of ``A[i, j]`` over ``j > i`` (0 in every head of a causal model).

A score with no row to average (``previous`` or ``entropy`` of a 1-token text) is NaN. The profiles are
``received`` (mean over i of ``A[i, j]``: the attention each key receives) and the maximum-attention grid above
uniform (:func:`~.maximum_attention.max_attention_above_uniform`). :func:`head_scores` gives the table with each
head's ``kind`` (:func:`head_kind`); :func:`statistics` computes the same for an extraction without them (dense
attention from the eager path or substituted with ``dataclasses.replace``; captured layers without the capture's
scores, refolded chunk by chunk) with the same code, so both agree with the formulas on dense attention to float
rounding (``tests/test_head_scores.py``: within 1e-6).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    import pandas as pd

    from .layers import LayerAttention, Scratch

__all__ = [
    "KINDS",
    "KIND_RULES",
    "LOCAL_WINDOW",
    "SCORES",
    "HeadStatistics",
    "LayerScores",
    "head_kind",
    "head_scores",
    "statistics",
]

#: the keys within this distance of the query count as ``local`` (a 7-token band)
LOCAL_WINDOW = 3
#: the most weights in one piece of the fold, whose logarithms numpy takes at once (256 KiB of float32: within a
#: core's L2 cache, where the compiled pass reads them back; :func:`fold_pieces`)
LOG_BLOCK_VALUES = 65536
#: the least positive float32 (subnormal): a weight's floor before its logarithm (a masked key's 0 * log is 0)
_TINY = np.float32(1e-45)
#: the scores of :func:`head_scores`, in its column order (each in [0, 1])
SCORES = ("sink", "previous", "next", "self", "local", "entropy", "special", "future")
#: the kinds of :func:`head_kind`
KINDS = ("sink", "previous", "next", "self", "special", "local", "broad", "focused")
#: the rule of :func:`head_kind`, as the docs and the legend state it
KIND_RULES = (
    "sink / previous / next / self: the largest of the four when it is at least 0.5 (most of the head's attention); "
    "special: else when special >= 0.5; local: else when local >= 0.5; broad: else when entropy >= 0.75; "
    "focused: the rest (concentrated, but on tokens that depend on the text)"
)
#: a score at least this large names the head's kind (the majority of its attention)
KIND_SHARE = 0.5
#: normalised entropy from which an unclassified head is ``broad``
BROAD_ENTROPY = 0.75

# the sums a layer accumulates per head (row counts for the means with their own rows)
_SUMS = ("sink", "previous", "next", "self", "local", "entropy", "entropy_rows", "future")


class LayerScores:
    """The running sums of one layer's heads over its query chunks (see the module doc), on the layer's device.

    :meth:`update` takes a chunk's float32 weights ``(H, r, k)`` of the query rows ``rows`` over the keys ``keys``
    (every weight outside the span is 0). Sums are kept in float64, the profiles in float32 (as the grid).
    """

    def __init__(self, n_heads: int, n_tokens: int, device: torch.device | str = "cpu") -> None:
        self.n_heads, self.n_tokens = n_heads, n_tokens
        self.sums = torch.zeros((len(_SUMS), n_heads), dtype=torch.float64, device=device)
        self.received = torch.zeros((n_heads, n_tokens), dtype=torch.float64, device=device)
        self.uniform = torch.zeros((n_heads, n_tokens), dtype=torch.float32, device=device)
        offsets = torch.arange(-LOCAL_WINDOW, LOCAL_WINDOW + 1, device=device)
        self._offsets = offsets

    def update(self, rows: slice, keys: slice, w: torch.Tensor) -> None:
        """Fold the chunk ``w`` (float32 ``(H, r, k)``: rows ``rows``, keys ``keys``) into the sums: on the CPU in one
        compiled pass per piece of the chunk (:func:`fold_pieces`, :func:`~.score_kernels.fold_heads`), the pieces
        shared by this thread and the workers; elsewhere with torch's operations (:meth:`update_with_torch`)."""
        if w.device.type != "cpu":
            self.update_with_torch(rows, keys, w)
            return
        from .._parallel import shares, threads
        from .score_kernels import fold_heads

        chunk = w.contiguous().numpy()
        sums, received, uniform = self.sums.numpy(), self.received.numpy(), self.uniform.numpy()
        n_heads, r, k = chunk.shape
        pieces, step = fold_pieces(n_heads, r, k, threads())

        def fold(p: int) -> None:  # a piece's heads, a block of rows at a time, in order (each head's sums are serial)
            heads = pieces[p]
            for a in range(0, r, step):
                part = chunk[heads, a : a + step]
                logs = np.maximum(part, _TINY)  # the block's logarithms, in numpy's SIMD lanes
                np.log(logs, out=logs)
                fold_heads(part, logs, heads.start, rows.start + a, keys.start, LOCAL_WINDOW, sums, received, uniform)

        shares(len(pieces), fold)

    def update_with_torch(self, rows: slice, keys: slice, w: torch.Tensor) -> None:
        """:meth:`update` with torch's operations, on any device (a pass over the chunk per quantity)."""
        h, r, k = w.shape
        device, ks = w.device, keys.start
        sums = self.sums
        i = torch.arange(rows.start, rows.stop, device=device)
        # the band |i - j| <= LOCAL_WINDOW, read by a gather of 7 columns a row (entries outside the span are 0)
        columns = i[:, None] + self._offsets[None, :] - ks
        inside = (columns >= 0) & (columns < k)
        band = w.gather(-1, columns.clamp(0, k - 1).expand(h, r, -1)) * inside
        sums[_SUMS.index("local")] += band.sum(dim=(1, 2), dtype=torch.float64)
        sums[_SUMS.index("self")] += band[..., LOCAL_WINDOW].sum(dim=1, dtype=torch.float64)
        sums[_SUMS.index("previous")] += band[..., LOCAL_WINDOW - 1].sum(dim=1, dtype=torch.float64)
        sums[_SUMS.index("next")] += band[..., LOCAL_WINDOW + 1].sum(dim=1, dtype=torch.float64)
        if ks == 0:
            sums[_SUMS.index("sink")] += w[..., 0].sum(dim=1, dtype=torch.float64)
        # m_i and the normalised entropy of the rows that see at least 2 keys
        m = (w != 0).sum(dim=-1)
        seen = m >= 2
        m64 = m.to(torch.float64)
        entropy = torch.special.entr(w).sum(dim=-1, dtype=torch.float64)
        normalised = torch.where(
            seen, entropy / torch.log(m64.clamp(min=2)), torch.zeros((), dtype=torch.float64, device=device)
        )
        sums[_SUMS.index("entropy")] += normalised.sum(dim=1)
        sums[_SUMS.index("entropy_rows")] += seen.sum(dim=1)
        # the attention each key receives
        self.received[:, keys] += w.sum(dim=1, dtype=torch.float64)
        # the grid above uniform: max over rows with m_i >= 2 of (A_ij m_i - 1) / (m_i - 1), at least 0
        scale = torch.where(seen, m64 / (m64 - 1).clamp(min=1), 0.0).to(torch.float32)
        shift = torch.where(seen, 1.0 / (m64 - 1).clamp(min=1), 1.0).to(torch.float32)
        above = torch.addcmul(-shift[..., None], w, scale[..., None]).amax(dim=1)
        self.uniform[:, keys] = torch.maximum(self.uniform[:, keys], above)
        # attention to later keys: every column from the chunk's last row on, and the chunk's upper triangle
        low, high = max(rows.start + 1, ks), ks + k
        middle = max(min(rows.stop, high), low)
        future = sums[_SUMS.index("future")]
        if high > middle:
            future += w[..., middle - ks :].sum(dim=(1, 2), dtype=torch.float64)
        if middle > low:
            later = torch.arange(low, middle, device=device)[None, :] > i[:, None]
            future += (w[..., low - ks : middle - ks] * later).sum(dim=(1, 2), dtype=torch.float64)

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(sums (S, H) float64, received (H, n) float32, uniform (H, n) float32)`` on the CPU."""
        received = (self.received / max(self.n_tokens, 1)).to(torch.float32)
        return self.sums.cpu().numpy(), received.cpu().numpy(), self.uniform.cpu().numpy()


@dataclass(frozen=True, eq=False)
class HeadStatistics:
    """Every head's sums and profiles, as the capture (or :func:`statistics`) folded them.

    ``sums`` float64 ``(L, S, H)`` in the order of ``_SUMS``; ``received`` float32 ``(L, H, n)``: mean attention
    each key receives; ``above_uniform`` float32 ``(L, H, n)``: the maximum-attention grid above uniform.
    """

    sums: np.ndarray
    received: np.ndarray
    above_uniform: np.ndarray

    @classmethod
    def stack(cls, layers: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> HeadStatistics:
        sums, received, uniform = zip(*layers)
        out = cls(np.stack(sums), np.stack(received), np.stack(uniform))
        for a in (out.sums, out.received, out.above_uniform):
            a.flags.writeable = False
        return out

    @property
    def causal(self) -> bool:
        """Whether no head of the model attends to a later token (a decoder's causal mask)."""
        return bool(np.all(self.sums[:, _SUMS.index("future")] == 0.0))

    def table(self, special: np.ndarray) -> dict[str, np.ndarray]:
        """Each score of :data:`SCORES` as float64 ``(L, H)`` (NaN where it has no row to average)."""
        n = self.received.shape[-1]
        sums = {name: self.sums[:, k] for k, name in enumerate(_SUMS)}
        with np.errstate(invalid="ignore", divide="ignore"):
            out = {
                "sink": sums["sink"] / n,
                "previous": sums["previous"] / (n - 1) if n > 1 else np.full_like(sums["sink"], np.nan),
                "next": sums["next"] / (n - 1) if n > 1 else np.full_like(sums["sink"], np.nan),
                "self": sums["self"] / n,
                "local": sums["local"] / n,
                "entropy": np.where(sums["entropy_rows"] > 0, sums["entropy"] / sums["entropy_rows"], np.nan),
                "special": self.received[..., np.asarray(special, dtype=bool)].astype(np.float64).sum(axis=-1),
                "future": sums["future"] / n,
            }
        return out


def fold_pieces(n_heads: int, r: int, k: int, threads: int) -> tuple[list[slice], int]:
    """How a chunk of ``n_heads`` x ``r`` rows x ``k`` keys is folded: its pieces (ranges of heads, each folded by one
    thread, so that a head's sums are added in row order) and the rows of a block (a piece's heads folded a block
    of rows at a time). A block's weights and their logarithms stay within ``LOG_BLOCK_VALUES`` each (a core's
    cache); there are at least two pieces per thread where the heads allow it (a thread slowed by other work takes
    fewer). One compiled call and one numpy logarithm a block: one a head cost a 2 MiB chunk of 32 heads at 2048
    tokens (a few rows of each) more in calls than in folding."""
    per_head = r * k
    heads = max(1, min(LOG_BLOCK_VALUES // max(per_head, 1), -(-n_heads // (2 * threads))))
    step = r if per_head * heads <= LOG_BLOCK_VALUES else max(1, LOG_BLOCK_VALUES // max(k, 1))
    return [slice(h, min(h + heads, n_heads)) for h in range(0, n_heads, heads)], step


def chunk_rows(n_heads: int, n: int, budget: int = 32 * 2**20) -> Iterator[slice]:
    """Query chunks of an (H, n, n) float32 stack whose weights stay within ``budget`` bytes."""
    step = max(1, min(n, budget // max(1, 4 * n_heads * n)))
    return (slice(start, min(start + step, n)) for start in range(0, n, step))


@torch.inference_mode()
def layer_statistics(heads: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One layer's sums and profiles from its dense attention ``(H, n, n)``, chunk by chunk (as the capture); a
    numpy array is read in place (a float32 copy of one chunk at a time, never of the layer)."""
    h, n, _ = heads.shape
    scores = LayerScores(h, n, heads.device if isinstance(heads, torch.Tensor) else "cpu")
    for rows in chunk_rows(h, n):
        chunk = heads[:, rows]
        w = chunk.float() if isinstance(chunk, torch.Tensor) else torch.from_numpy(np.array(chunk, dtype=np.float32))
        scores.update(rows, slice(0, n), w)
    return scores.finish()


@torch.inference_mode()
def captured_layer_statistics(layer: LayerAttention) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One captured layer's sums and profiles, folded from its queries and keys as the capture folds them (the
    same chunks, in order on this thread: the same sums), in O(H x chunk) memory, never an n x n head."""
    scores = LayerScores(layer.n_heads, layer.n_tokens, layer.query.device)

    def fold(rows: slice, scratch: Scratch | None) -> None:
        keys, w = layer.weights(rows, scratch=scratch)
        scores.update(rows, keys, w.float())

    layer.each_chunk(fold, in_order=True)
    return scores.finish()


def statistics(ex: Any) -> HeadStatistics:  # an Extraction (extracted.py imports this module)
    """``ex``'s head statistics: the capture's, else computed now from its attention source and kept on ``ex``:
    captured layers refolded chunk by chunk from their queries and keys, a dense array a layer at a time in place
    (an extraction without the capture's scores: attention substituted with ``dataclasses.replace``, the eager
    path, or one built by hand). No n x n head is made: at 65536 tokens each would take 16 GiB."""
    from .sources import CapturedAttention

    kept = getattr(ex, "head_stats", None)
    if kept is not None:
        return kept
    source = ex.attention_source
    if isinstance(source, CapturedAttention):
        layers = [captured_layer_statistics(layer) for layer in source.layers]
    else:  # a dense (L, H, n, n) array, a layer's view at a time; a source without attention raises its reason
        layers = [layer_statistics(heads) for heads in source.dense()]
    stats = HeadStatistics.stack(layers)
    ex.head_stats = stats
    return stats


def head_kind(scores: dict[str, float]) -> str:
    """A head's class by :data:`KIND_RULES` (NaN scores never pass a threshold)."""
    positional = max(("sink", "previous", "next", "self"), key=lambda name: _value(scores, name))
    if _value(scores, positional) >= KIND_SHARE:
        return positional
    if _value(scores, "special") >= KIND_SHARE:
        return "special"
    if _value(scores, "local") >= KIND_SHARE:
        return "local"
    if _value(scores, "entropy") >= BROAD_ENTROPY:
        return "broad"
    return "focused"


def _value(scores: dict[str, float], name: str) -> float:
    value = float(scores.get(name, math.nan))
    return -math.inf if math.isnan(value) else value


def head_scores(ex: Any) -> pd.DataFrame:  # an Extraction (extracted.py imports this module)
    """Every head's scores: one row per (layer, head), in model order.

    Columns: ``layer``, ``head``, the scores of :data:`SCORES` (see the module doc for their formulas; each in
    [0, 1], NaN where it has no row to average) and ``kind`` (:func:`head_kind`). Computed during the capture for
    every head in O(L x H x n) memory (:class:`LayerScores`); for an extraction without them, by :func:`statistics`.
    ``sink`` is the attention to the first token whatever it is: [CLS] or <s> in most models; in a model that puts
    no special token first it is attention to the first word, which a causal model's first query cannot avoid (its
    row 0 is all on token 0).
    """
    import pandas as pd

    stats = statistics(ex)
    table = stats.table(np.asarray(ex.special, dtype=bool))
    n_layers, n_heads = table["sink"].shape
    frame = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(n_layers), n_heads),
            "head": np.tile(np.arange(n_heads), n_layers),
            **{name: table[name].reshape(-1) for name in SCORES},
        }
    )
    frame["kind"] = [head_kind(row) for row in frame[list(SCORES)].to_dict("records")]
    return frame
