"""What wrote each token's state, layer by layer, over a corpus (issue 28 item 5; Mickus, Paperno & Constant,
TACL 2022, Fig. 3): :func:`term_shares` decomposes every text's hidden states with
:func:`~headsne_widget.capture.decompose.decompose` and keeps, for every token and layer, the share
``t . e / ||e||^2`` (the paper's Eq. 6) of each kind of term: the input embedding, the attention heads, the
feed-forwards and the corrections (biases, the norms' mean shifts), each summed over the layers up to that one.
The shares of a (text, token, layer) sum to 1 and can be negative. :func:`term_share_summary` gives the mean per
layer (the paper's Fig. 3a), :func:`compare_models` the Spearman rho between two models' per-token shares.

The texts run like :func:`~.corpus.corpus_study`'s (:mod:`.workers`): ``client="sync"`` in this process,
``"threads"`` / ``"processes"`` on a local Dask cluster, a ``distributed.Client``, or None (the session's client,
else a local cluster of threads). Each task runs its text once through the model (the capture and the
component trace of ``extract_token_ids(..., components=True)`` in one pass); a process runs one text's pass at a
time, since the trace hooks the model itself (the decomposition's arithmetic then runs in parallel).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from .corpus import check_texts, selected_indices
from .workers import progress_bar, run_tasks, session

__all__ = ["COLUMNS", "TERMS", "compare_models", "term_share_summary", "term_shares"]

#: the kinds of term, in the paper's order
TERMS = ("input", "head", "mlp", "correction")
#: the columns of :func:`term_shares`'s rows (``by_head=True`` adds ``from_layer`` and ``head`` before ``share``)
COLUMNS = ("text", "token", "piece", "special", "start", "end", "layer", "term", "share")


def _encode(items: list[str], loaded: Any) -> tuple[dict[int, np.ndarray], dict[int, list[tuple[int, int]]]]:
    """Every text's token ids and character spans ((-1, -1) for a special token), checked against the positions."""
    from ..errors import TextTooLongError

    tokenizer, limit = loaded.tokenizer, getattr(loaded, "max_positions", None)
    fast = bool(getattr(tokenizer, "is_fast", False))
    jobs: dict[int, np.ndarray] = {}
    spans: dict[int, list[tuple[int, int]]] = {}
    for i, text in enumerate(items):
        enc = tokenizer(text, return_special_tokens_mask=True, return_offsets_mapping=fast, verbose=False)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        if limit is not None and ids.size > limit:
            raise TextTooLongError(f"texts[{i}] has {ids.size} tokens but {loaded.name} takes at most {limit}")
        if ids.size < 2:
            raise ValueError(f"texts[{i}] has {ids.size} token: a decomposition needs at least 2, give a longer text")
        offsets = enc["offset_mapping"] if fast else [(-1, -1)] * ids.size
        spans[i] = [(-1, -1) if s else (int(a), int(b)) for (a, b), s in zip(offsets, enc["special_tokens_mask"])]
        jobs[i] = ids
    return jobs, spans


def check_layers(layers: Any) -> int | list[int] | None:
    """``layers=`` at the boundary, before the model loads: None, an int or an iterable of ints (numpy's
    included), else a TypeError naming what was given (a torch tensor among them: ``int(t)`` or ``t.tolist()``)."""
    from .._checks import is_int

    if layers is None or is_int(layers):
        return layers
    torch_value = type(layers).__module__.split(".")[0] == "torch"
    values = (
        None if torch_value or isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable) else list(layers)
    )
    if values is None or not all(is_int(v) for v in values):
        hint = ": pass int(t) or t.tolist()" if torch_value else ""
        raise TypeError(
            f"layers must be None (all layers), an int or a list of ints, got {type(layers).__name__} {layers!r}{hint}"
        )
    return [int(v) for v in values]


def text_shares(index: int, token_ids: np.ndarray, model: Any, *, layers: list[int], by_head: bool) -> list[dict]:
    """The rows of one text (one task, in a worker or in-process): its states decomposed at each layer."""
    from ..capture.attention import _SWITCH_LOCK
    from ..capture.decompose import decompose
    from ..capture.extraction import extract_token_ids, load_model

    loaded = load_model(model)
    with _SWITCH_LOCK:  # the trace's hooks sit on the model: no other capture of this process may run meanwhile
        ex = extract_token_ids(np.asarray(token_ids, dtype=np.int64), loaded, components=True)
    rows: list[dict] = []
    for layer in layers:
        dec = decompose(ex, layer)
        shares, kinds = dec.shares, dec.terms["term"].to_numpy()
        sums = {term: shares[kinds == term].sum(axis=0) for term in TERMS}
        heads = [
            (k, int(dec.terms["layer"].iat[k]), int(dec.terms["head"].iat[k])) for k in np.flatnonzero(kinds == "head")
        ]
        for t in range(ex.n_tokens):
            base = {"text": index, "token": t, "piece": ex.tokens[t], "special": bool(ex.special[t]), "layer": layer}
            for term in TERMS:
                if by_head and term == "head":
                    rows += [{**base, "term": term, "from_layer": f, "head": h, "share": float(shares[k, t])}
                             for k, f, h in heads]  # fmt: skip
                else:
                    extra = {"from_layer": -1, "head": -1} if by_head else {}
                    rows.append({**base, "term": term, **extra, "share": float(sums[term][t])})
    return rows


def term_shares(
    texts: Iterable[str],
    model: Any = None,
    *,
    layers: Iterable[int] | int | None = None,
    client: Any = None,
    progress: bool = True,
    by_head: bool = False,
) -> pd.DataFrame:
    """Each token's state at each layer split into the shares of the input, heads, feed-forwards and corrections.

    ``texts``: strings (e.g. :data:`headsne_widget.texts.CORPUS`); ``model``: a hub id, a path, a loaded model
    or None (:func:`~headsne_widget.load_model`'s default). ``layers``: 0-based block indices (None: all).
    ``client``: where the texts run (module doc). ``progress``: a tqdm bar over the texts. ``by_head``: one
    ``head`` row per head of every layer so far (``from_layer``, ``head``) instead of one summed row; the other
    terms then have ``from_layer`` and ``head`` -1.

    Returns one row per (text, token, layer, term[, from_layer, head]) with :data:`COLUMNS`: ``text`` (position in
    ``texts``), ``token`` (position in the text), ``piece`` (the token), ``special``, ``start``/``end`` (its
    characters, -1 for a special token or a slow tokenizer), ``layer``, ``term`` (:data:`TERMS`) and ``share``.

    Raises ValueError for an empty ``texts`` or a 1-token text, TypeError for a non-str text,
    IndexOutOfRangeError for a layer the model lacks, TextTooLongError for a text over the model's positions.
    """
    from .._checks import flag
    from ..capture.extraction import load_model

    items, by_head, layers = check_texts(texts), flag(by_head, "by_head"), check_layers(layers)
    loaded = load_model(model)
    jobs, spans = _encode(items, loaded)
    settings = {"layers": selected_indices(loaded, jobs, layers, None)["layers"], "by_head": by_head}
    with session(client) as active, progress_bar(len(items), 0, bool(progress)) as bar:
        shipped = loaded if active is None else model  # workers load a name or path once each (corpus_study)
        rows = run_tasks(text_shares, jobs, settings, shipped, client=active, retries=0, bar=bar, on_text=None)
    for row in rows:
        row["start"], row["end"] = spans[row["text"]][row["token"]]
    return _frame(rows, by_head)


def _frame(rows: list[dict], by_head: bool) -> pd.DataFrame:
    columns = [*COLUMNS[:-1], *(["from_layer", "head"] if by_head else []), "share"]
    frame = pd.DataFrame(rows, columns=columns)
    order = {term: k for k, term in enumerate(TERMS)}
    keys = ["text", "layer", "token", "order", *(["from_layer", "head"] if by_head else [])]
    frame = frame.assign(order=frame["term"].map(order)).sort_values(keys, kind="stable").drop(columns="order")
    types: dict[str, Any] = {c: "int64" for c in ("text", "token", "start", "end", "layer", "from_layer", "head")}
    types.update(special=bool, share="float64")
    return frame.astype({c: t for c, t in types.items() if c in columns}).reset_index(drop=True)


def _per_term(rows: pd.DataFrame, exclude_special: bool) -> pd.DataFrame:
    """One share per (text, token, layer, term): a ``by_head`` table's heads summed."""
    missing = {"text", "token", "layer", "term", "share"} - set(rows.columns)
    if missing:
        raise ValueError(f"rows lack the columns {sorted(missing)}: pass what term_shares returns")
    if exclude_special and "special" in rows:
        rows = rows[~rows["special"].astype(bool)]
    return rows.groupby(["text", "token", "layer", "term"], as_index=False, sort=False)["share"].sum()


def term_share_summary(rows: pd.DataFrame, *, exclude_special: bool = False) -> pd.DataFrame:
    """The mean share of each term per layer over every (text, token) of :func:`term_shares`'s rows (the paper's
    Fig. 3a): index ``layer``, one column per term of :data:`TERMS` (each row sums to 1)."""
    if len(rows) == 0:
        raise ValueError("rows is empty: there is nothing to summarise")
    per = _per_term(rows, exclude_special)
    table = per.pivot_table(index="layer", columns="term", values="share", aggfunc="mean")
    return table.reindex(columns=[t for t in TERMS if t in table.columns]).rename_axis(columns=None)


def compare_models(
    texts: Iterable[str],
    a: Any,
    b: Any,
    *,
    layers: Iterable[int] | int | None = None,
    client: Any = None,
    progress: bool = True,
    exclude_special: bool = False,
) -> pd.DataFrame:
    """Per layer and term, the Spearman rho between models ``a``'s and ``b``'s per-token shares over ``texts``.

    Tokens are paired by position where the two tokenisations of a text are the same, else by identical character
    spans (special tokens then left out). ``layers`` must exist in both models (None: those both have). Returns
    one row per (layer, term): ``rho``, ``p_value`` (scipy.stats.spearmanr) and ``n`` (tokens paired); rho is NaN
    where a model's shares are constant.
    """
    from scipy.stats import spearmanr

    items = check_texts(texts)
    left = term_shares(items, a, layers=layers, client=client, progress=progress)
    right = term_shares(items, b, layers=layers, client=client, progress=progress)
    pairs = _paired(left, right, exclude_special)
    out = []
    for (layer, term), group in pairs.groupby(["layer", "term"], sort=False):
        if len(group) < 3 or group["share_a"].nunique() < 2 or group["share_b"].nunique() < 2:
            rho, p_value = float("nan"), float("nan")
        else:
            rho, p_value = (float(v) for v in spearmanr(group["share_a"], group["share_b"]))
        out.append({"layer": int(layer), "term": term, "rho": rho, "p_value": p_value, "n": len(group)})
    frame = pd.DataFrame(out, columns=["layer", "term", "rho", "p_value", "n"])
    order = frame["term"].map({t: k for k, t in enumerate(TERMS)})
    return frame.assign(o=order).sort_values(["layer", "o"]).drop(columns="o").reset_index(drop=True)


def _paired(left: pd.DataFrame, right: pd.DataFrame, exclude_special: bool) -> pd.DataFrame:
    """The two models' rows joined token by token (same pieces: by position; else by character span)."""
    same = {text for text in set(left["text"]) & set(right["text"]) if _same_tokens(left, right, text)}
    keys = ["text", "layer", "term"]
    by_token = left[left["text"].isin(same)].merge(right, on=[*keys, "token"], suffixes=("_a", "_b"))
    spans = [f[~f["text"].isin(same) & ~f["special"] & (f["start"] >= 0)] for f in (left, right)]
    by_span = spans[0].merge(spans[1], on=[*keys, "start", "end"], suffixes=("_a", "_b"))
    joined = pd.concat([by_token, by_span], ignore_index=True)
    if exclude_special:
        joined = joined[~joined["special_a"] & ~joined["special_b"]]
    if joined.empty:
        raise ValueError("the two models share no layer or no token of these texts to compare")
    return joined


def _same_tokens(left: pd.DataFrame, right: pd.DataFrame, text: int) -> bool:
    a = left[(left["text"] == text) & (left["layer"] == left["layer"].iat[0]) & (left["term"] == TERMS[0])]
    b = right[(right["text"] == text) & (right["layer"] == right["layer"].iat[0]) & (right["term"] == TERMS[0])]
    return a["piece"].tolist() == b["piece"].tolist() and a["start"].tolist() == b["start"].tolist()
