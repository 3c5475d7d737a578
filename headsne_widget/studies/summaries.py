"""Tables over a corpus study's rows (:func:`.corpus.corpus_study`): each head's KL across the texts, with its
rank (:func:`head_summary`, drawn by :func:`headsne_widget.plots.corpus_heads`), and each head's scores and usual
kind (:func:`score_summary`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SCORE_SUMMARY_COLUMNS", "SUMMARY_COLUMNS", "head_summary", "score_summary"]

#: the columns of :func:`head_summary`
SUMMARY_COLUMNS = ("layer", "head", "median", "q1", "q3", "iqr", "texts", "rank", "hidden_median")
#: the columns of :func:`score_summary` besides each score's mean, minimum and maximum
SCORE_SUMMARY_COLUMNS = ("layer", "head", "texts", "kind", "kind_share")


def head_summary(rows: Any) -> pd.DataFrame:
    """Per (layer, head): the median KL across the corpus, its quartiles and IQR, and the head's rank.

    Parameters
    ----------
    rows : what :func:`.corpus.corpus_study` returns (a DataFrame, or records with its columns).

    Returns
    -------
    pandas.DataFrame
        One row per (layer, head) of the attention rows, sorted by layer and head, with
        :data:`SUMMARY_COLUMNS`: ``median``, ``q1``, ``q3``, ``iqr`` (= q3 - q1) of the KL over the texts,
        ``texts`` (how many), ``rank`` (1 = lowest median KL; ties share the lower rank) and
        ``hidden_median`` (the layer's median hidden-state KL, NaN without hidden rows).
    """
    import pandas as pd

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    missing = {"layer", "method", "head", "kl"} - set(df.columns)
    if missing:
        raise ValueError(f"rows lack the columns {sorted(missing)}: pass what corpus_study returns")
    attention = df[df["method"] == "attention"]
    if attention.empty:
        raise ValueError("rows hold no attention-head KLs: there is nothing to summarise")
    kl = attention.astype({"head": "int64"}).groupby(["layer", "head"])["kl"]
    out = pd.DataFrame(
        {"median": kl.median(), "q1": kl.quantile(0.25), "q3": kl.quantile(0.75), "texts": kl.count()}
    ).reset_index()
    out["iqr"] = out["q3"] - out["q1"]
    out["rank"] = out["median"].rank(method="min").astype("int64")
    hidden = df[df["method"] == "hidden"].groupby("layer")["kl"].median()
    out["hidden_median"] = out["layer"].map(hidden).astype("float64")
    return out[list(SUMMARY_COLUMNS)].sort_values(["layer", "head"], ignore_index=True)


def score_summary(rows: Any) -> pd.DataFrame:
    """Per (layer, head): each score's mean, minimum and maximum over the corpus, and the head's usual kind.

    ``rows`` is what ``corpus_study(..., scores=True)`` returns. Columns: :data:`SCORE_SUMMARY_COLUMNS` (``texts``:
    how many texts; ``kind``: the kind the head has in most texts, ties in the order of
    :data:`~headsne_widget.capture.scores.KINDS`; ``kind_share``: the share of texts in which it has that kind, 1 =
    every text), then ``<score>_mean``, ``<score>_min``, ``<score>_max`` for each score. The heads that are sinks in
    every text: ``s[(s.kind == "sink") & (s.kind_share == 1)]``.
    """
    import pandas as pd

    from ..capture.scores import KINDS, SCORES

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    missing = {"layer", "method", "head", "kind", *SCORES} - set(df.columns)
    if missing:
        raise ValueError(f"rows lack the columns {sorted(missing)}: pass what corpus_study(..., scores=True) returns")
    attention = df[df["method"] == "attention"].astype({"head": "int64"})
    if attention.empty:
        raise ValueError("rows hold no attention heads: there is nothing to summarise")
    groups = attention.groupby(["layer", "head"])
    out = groups.size().rename("texts").reset_index()
    rank = {kind: k for k, kind in enumerate(KINDS)}

    def usual(kinds: pd.Series) -> tuple[str, float]:
        counts = kinds.value_counts()
        best = min(counts.index, key=lambda kind: (-counts[kind], rank.get(kind, len(rank))))
        return best, float(counts[best] / len(kinds))

    kinds = groups["kind"].apply(usual)
    out["kind"] = [kinds[(layer, head)][0] for layer, head in zip(out["layer"], out["head"])]
    out["kind_share"] = [kinds[(layer, head)][1] for layer, head in zip(out["layer"], out["head"])]
    for name in SCORES:
        stats = groups[name].agg(["mean", "min", "max"])
        for how in ("mean", "min", "max"):
            out[f"{name}_{how}"] = stats[how].to_numpy()
    return out.sort_values(["layer", "head"], ignore_index=True)
