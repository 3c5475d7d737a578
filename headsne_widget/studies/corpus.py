"""Corpus studies: the KL-by-layer study (thesis Fig. 12) over many texts, run on Dask.

:func:`corpus_study` runs, for every text and every selected (layer, head), attention-head t-SNE (best of
``runs`` restarts) and, per layer, standard t-SNE on the layer's output hidden states, and returns one tidy
row per (text, layer, method, head). :func:`head_summary` turns the rows into the median, the interquartile
range and the rank of every head across the corpus; :func:`headsne_widget.plots.corpus_heads` draws it.
This module runs the study; where its tasks run is :mod:`.workers`, the tables over its rows
(:func:`head_summary`, :func:`score_summary`, importable from here) are :mod:`.summaries`.

How the work is spread
----------------------
The client tokenises every text (the tokenizer alone) and submits one task per text carrying its token ids;
the task loads the model through the per-process cache of :func:`~headsne_widget.extraction.load_model`
(so once per worker process, never per task), runs :func:`~headsne_widget.extraction.extract_token_ids`,
every head's t-SNE and returns the text's rows. Only token ids, the model's name or path and rows travel;
never a model (unless you pass a model object, which is then sent once to each worker) nor an n x n array.
Results stream back as they finish (``distributed.as_completed``); a tqdm bar counts texts; Ctrl-C warns,
cancels what is left and returns the finished rows; a worker that dies costs only its tasks in flight,
which the scheduler runs again elsewhere (and ``retries`` more times if a task raises).

Every random choice comes from ``seed``, the text's position in the corpus, the layer and the head (as
:func:`headsne_widget.analyses.kl_by_layer` does for one text), never from a worker's state, and the
compiled t-SNE kernels reduce in a fixed order; so the rows are identical in-process (``client="sync"``),
on threads and on a cluster of processes, as long as every machine computes on the CPU with the same
build (a CUDA worker would run the torch engine instead and differ in the last digits).

The local default (``client=None``)
-----------------------------------
``client=None`` uses the Dask client already made in this session (``distributed.default_client()``), if
there is one; otherwise a local cluster of threads in this process (one worker, one thread per core) that
the call starts (about 2 s) and closes. Measured on this project's 2-core machine, shared with other jobs
(``benchmarks/corpus_speed.py``: 20 corpus texts, MiniLM, every head, 3 runs of 1000 iterations, settings
interleaved round by round, medians; two runs, at load averages 9-13 and 6-8), threads beat processes twice:
88.7 and 100.0 texts per minute on a running client, 87.5 and 84.7 for a whole call that starts its own
cluster, against 71.5 and 62.5 (21.2 and 34.5 per call) for two worker processes, 26.0 and 92.2 (27.9 and
42.8) for one, and 103.8 and 96.7 in-process without Dask. Threads need no start-up and no second copy of
the model: worker processes each import torch and load the model before their first text (25 to 50 s
here) and hold about 0.5 GB each, and on two busy cores they gained nothing back, since the compiled
t-SNE holds the GIL either way and there was no idle core to run a second process on. On a machine with
idle cores, or across machines, pass ``client="processes"`` or a ``distributed.Client``: the rows are the
same. ``client="sync"`` runs the texts one after another in this process, without Dask (for debugging and
for the reference rows).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import check_texts, int_at_least
from .summaries import SCORE_SUMMARY_COLUMNS, SUMMARY_COLUMNS, head_summary, score_summary
from .workers import LOCAL_CLIENTS, check_client, progress_bar, run_tasks, session

if TYPE_CHECKING:
    import pandas as pd

    from ..capture.extraction import Extraction

__all__ = ["COLUMNS", "SCORE_SUMMARY_COLUMNS", "SUMMARY_COLUMNS", "corpus_study", "head_summary", "score_summary"]

#: the columns of :func:`corpus_study`'s rows
COLUMNS = ("text", "layer", "method", "head", "kl", "n_tokens", "perplexity", "runs")

#: the hidden-state perplexity of the thesis (A.2), used when ``perplexity=None``
THESIS_PERPLEXITY = 20.0

_METHOD_ORDER = {"attention": 0, "hidden": 1}


# -------------------------------------------------------------------------------------------- input


def _indices(value: Any, count: int, name: str, unit: str) -> list[int]:
    """``None`` -> all of ``range(count)``, else the given indices checked against ``count``; no repeats."""
    from .._checks import check_index

    if value is None:
        return list(range(count))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = [value]
    elif isinstance(value, (bool, np.bool_, str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be None (all {unit}), an index or a list of indices, got {value!r}")
    chosen = [check_index(v, count, name, unit) for v in value]
    if not chosen:
        raise ValueError(f"{name} is empty: pass None for all {unit} or at least one index")
    if len(set(chosen)) < len(chosen):
        raise ValueError(f"{name} has repeated entries {chosen}: each is studied once")
    return chosen


def _check_perplexity(perplexity: Any) -> float:
    from ..affinity.spec import check_perplexity

    if perplexity is None:
        return THESIS_PERPLEXITY
    return check_perplexity(perplexity)  # the type and range checks; lowering is per text


def _check_max_tokens(max_tokens: Any) -> int | None:
    if max_tokens is None:
        return None
    return int_at_least(max_tokens, "max_tokens", 1)


# ------------------------------------------------------------------------------------- tokenising


def _encode(
    texts: Sequence[str], loaded: Any, max_tokens: int | None, exclude_special: bool
) -> tuple[dict[int, np.ndarray], list[int], int]:
    """Token ids of every text long enough for t-SNE, the indices of those too short, and how many were cut.

    Follows :func:`~headsne_widget.extraction.extract`: a text longer than the model's positions is
    refused unless ``max_tokens`` (special tokens included) truncates it.
    """
    from ..affinity.selection import MIN_TOKENS
    from ..errors import TextTooLongError

    tokenizer = loaded.tokenizer
    limit = getattr(loaded, "max_positions", None)
    if max_tokens is not None and limit is not None and max_tokens > limit:
        raise TextTooLongError(f"max_tokens={max_tokens} is above {loaded.name}'s {limit} positions")
    special_ids = sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id})
    options: dict[str, Any] = {"return_special_tokens_mask": True, "verbose": False}
    if max_tokens is not None:
        options.update(truncation=True, max_length=max_tokens)
    encoded: dict[int, np.ndarray] = {}
    short: list[int] = []
    truncated = 0
    for i, text in enumerate(texts):
        if max_tokens is not None:
            truncated += len(tokenizer(text, verbose=False)["input_ids"]) > max_tokens
        enc = tokenizer(text, **options)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        if max_tokens is None and limit is not None and ids.size > limit:
            raise TextTooLongError(
                f"texts[{i}] has {ids.size} tokens but {loaded.name} takes at most {limit} (its positions); "
                f"pass max_tokens={limit} (or less) to truncate long texts"
            )
        special = np.asarray(enc["special_tokens_mask"], dtype=bool) | np.isin(ids, special_ids)
        kept = int(np.sum(~special)) if exclude_special else ids.size
        if kept < MIN_TOKENS:
            short.append(i)
        else:
            encoded[i] = ids
    return encoded, short, truncated


# ------------------------------------------------------------------------------------ one text (a task)


def _row(text: int, layer: int, method: str, head: int | None, kl: float, *, n: int, perplexity: float | None,
         runs: int) -> dict[str, Any]:  # fmt: skip
    """One row of :data:`COLUMNS`."""
    perplexity = math.nan if perplexity is None else float(perplexity)
    return dict(zip(COLUMNS, (text, layer, method, head, float(kl), n, perplexity, runs)))


def text_rows(
    index: int,
    token_ids: np.ndarray,
    model: Any,
    *,
    layers: Sequence[int] | None,
    heads: Sequence[int] | None,
    runs: int,
    n_iter: int,
    seed: int,
    perplexity: float,
    exclude_special: bool,
    scores: bool = False,
    kl: bool = True,
) -> list[dict[str, Any]]:
    """The rows of one text: what one Dask task computes, in a worker or in-process.

    With ``scores`` each attention row also holds the head's scores and kind (:func:`~headsne_widget.head_scores`,
    folded during the capture: no extra pass); without ``kl`` no t-SNE runs (attention rows only, ``kl`` NaN).

    The model is taken from this process's :func:`~headsne_widget.extraction.load_model` cache. Text
    ``index``'s head ``(layer, head)`` runs as ``tsne_kls(P, runs, n_iter, study_seed(seed, index, layer, head))``
    and the hidden states of ``layer`` with ``study_seed(seed, index, layer, n_heads)``
    (:func:`~headsne_widget.studies.common.study_seed`), so the result depends on nothing else.
    """
    from ..affinity.selection import selection_affinities
    from ..affinity.spec import kept_count
    from ..capture.extraction import extract_token_ids, load_model
    from .common import study_seed, tsne_kls

    ex = extract_token_ids(np.asarray(token_ids, dtype=np.int64), load_model(model))
    table = _score_table(ex) if scores else None
    kept = kept_count(ex, exclude_special)
    rows = []
    for layer in range(ex.n_layers) if layers is None else layers:
        for head in range(ex.n_heads) if heads is None else heads:
            if kl:
                sel = selection_affinities(ex, "attention", layer, head, exclude_special=exclude_special)
                value = tsne_kls(sel.P, runs, n_iter, study_seed(seed, index, layer, head)).min()
            else:
                value = math.nan
            rows.append(_row(index, layer, "attention", head, value, n=kept, perplexity=None, runs=runs if kl else 0))
            if table is not None:
                rows[-1].update(table[layer * ex.n_heads + head])
        if not kl:
            continue
        sel = selection_affinities(ex, "hidden", layer, perplexity=perplexity, exclude_special=exclude_special)
        hidden_kl = tsne_kls(sel.P, runs, n_iter, study_seed(seed, index, layer, ex.n_heads)).min()
        rows.append(
            _row(index, layer, "hidden", None, hidden_kl, n=len(sel.kept), perplexity=sel.perplexity, runs=runs)
        )
    return rows


def _score_table(ex: Extraction) -> list[dict[str, Any]]:
    """Each head's scores and kind, in model order (layer * H + head)."""
    from ..capture.scores import SCORES, head_scores

    return head_scores(ex)[[*SCORES, "kind"]].to_dict("records")


def _frame(rows: list[dict]) -> pd.DataFrame:
    import pandas as pd

    rows = sorted(rows, key=lambda r: (r["text"], r["layer"], _METHOD_ORDER[r["method"]], r["head"] or 0))
    extra = [] if not rows else [k for k in rows[0] if k not in COLUMNS]  # scores=True: each head's scores, kind
    df = pd.DataFrame(rows, columns=[*COLUMNS, *extra])
    df["head"] = df["head"].astype("Int64")
    df = df.astype({"text": "int64", "layer": "int64", "n_tokens": "int64", "runs": "int64"})
    return df


def corpus_study(
    texts: Iterable[str],
    model: Any = None,
    *,
    heads: Iterable[int] | int | None = None,
    layers: Iterable[int] | int | None = None,
    runs: int = 3,
    n_iter: int = 1000,
    seed: int = 0,
    client: Any = None,
    perplexity: float | None = None,
    max_tokens: int | None = None,
    exclude_special: bool = False,
    retries: int = 2,
    progress: bool = True,
    on_text: Callable[[list[dict]], None] | None = None,
    scores: bool = False,
    kl: bool = True,
) -> pd.DataFrame:
    """KL of attention-head t-SNE for every head and of standard t-SNE for every layer, over a corpus.

    Parameters
    ----------
    texts : any iterable of strings, or a pandas Series (its values, in order); e.g.
        :data:`headsne_widget.texts.CORPUS`. Row ``text`` is the position in it.
    model : a hub id or model directory (sent to the workers as that string; each loads it once), a loaded
        model that can be pickled (sent once to each worker), or None for the default model (each worker
        resolves it as :func:`~headsne_widget.extraction.load_model` does: on a cluster, pass a path).
    heads, layers : the heads (applied in every selected layer) and layers to study; None for all.
    runs : t-SNE restarts per selection; a row holds the lowest final KL.
    n_iter : gradient steps per run (thesis: 1000).
    seed : the study's seed; every run's seed is derived from (seed, text, layer, head).
    client : None (the session's Dask client, else a local cluster of threads started for the call: see
        the module doc), ``"sync"`` (in this process, no Dask), ``"threads"``, ``"processes"``, or a
        ``dask.distributed.Client`` to run on its cluster.
    perplexity : of the hidden-state t-SNE; lowered per text to (m - 1) / 3 for m tokens when larger (the
        policy of :mod:`~headsne_widget.selection`), the value used is in the ``perplexity`` column. None: 20
        (thesis A.2), lowered where needed without a word (most short texts); a number: one warning
        counting the texts where it was lowered.
    max_tokens : truncate longer texts to this many tokens (special ones included), with one warning; without
        it a text longer than the model's positions raises TextTooLongError before any work.
    exclude_special : leave [CLS], [SEP], ... out of every P.
    retries : times a task that raised is run again (a task whose worker died is rerun regardless).
    progress : show a tqdm bar counting texts.
    on_text : called in this process with each text's rows as they arrive (e.g. to watch a long study).
    scores : also give every attention row the head's scores (``sink``, ``previous``, ... and ``kind``, see
        :func:`headsne_widget.head_scores`), computed during the capture at no extra pass; :func:`score_summary`
        aggregates them over the corpus (which heads are sinks in every text?).
    kl : run the t-SNEs; ``kl=False`` (with ``scores=True``) gives the scores alone, in the time of the texts'
        forward passes: attention rows only, ``kl`` NaN and ``runs`` 0.

    Returns
    -------
    pandas.DataFrame
        One row per (text, layer, method, head), sorted, with :data:`COLUMNS`: ``text`` (position in
        ``texts``), ``layer`` (0-based), ``method`` ("attention" or "hidden"), ``head`` (nullable Int64, NA
        for hidden), ``kl``, ``n_tokens`` (tokens in P), ``perplexity`` (NaN for attention), ``runs``.
        Texts with fewer than 4 tokens are skipped with one warning; Ctrl-C warns and returns the rows of
        the texts finished so far.

    Raises
    ------
    ValueError : an empty corpus or a bad argument. TypeError : a text that is not a str, a model that
    cannot be sent to the workers. TextTooLongError : see ``max_tokens``. RuntimeError : a closed client.
    """
    items = check_texts(texts)
    settings, retries = _settings(
        runs=runs, n_iter=n_iter, seed=seed, retries=retries, kl=kl, scores=scores, perplexity=perplexity
    )
    loaded, jobs, short = _prepare(items, model, max_tokens, client, bool(exclude_special))
    if not jobs:
        return _frame([])
    settings.update(selected_indices(loaded, jobs, layers, heads), exclude_special=bool(exclude_special))
    with session(client) as active, progress_bar(len(items), len(short), bool(progress)) as bar:
        rows = run_tasks(text_rows, jobs, settings, model, client=active, retries=retries, bar=bar, on_text=on_text)
    return _warn_lowered(_frame(rows), settings["perplexity"], asked=perplexity)


def _settings(
    *, runs: Any, n_iter: Any, seed: Any, retries: Any, kl: Any, scores: Any, perplexity: Any
) -> tuple[dict[str, Any], int]:
    """The keywords of :func:`text_rows` that do not depend on the model, checked, and ``retries``."""
    runs = int_at_least(runs, "runs", 1)
    n_iter = int_at_least(n_iter, "n_iter", 1)
    seed = int_at_least(seed, "seed", 0)
    retries = int_at_least(retries, "retries", 0)
    if not kl and not scores:
        raise ValueError("kl=False computes no KL: ask for scores=True, or leave kl on")
    perplexity = _check_perplexity(perplexity)
    settings = dict(runs=runs, n_iter=n_iter, seed=seed, perplexity=perplexity, scores=bool(scores), kl=bool(kl))
    return settings, retries


def _prepare(
    items: list[str], model: Any, max_tokens: Any, client: Any, exclude_special: bool
) -> tuple[Any, dict[int, np.ndarray], list[int]]:
    """The loaded model, the token ids of the texts to study and the indices of those too short, after the last
    checks of the arguments; warns once about truncated texts and once about skipped ones."""
    from ..capture.extraction import load_model

    max_tokens = _check_max_tokens(max_tokens)
    if isinstance(client, str) and client not in LOCAL_CLIENTS:
        raise ValueError(f"client must be one of {', '.join(map(repr, LOCAL_CLIENTS))}, got {client!r}")
    if not isinstance(client, str) and client is not None:
        check_client(client)
    loaded = load_model(model)
    jobs, short, truncated = _encode(items, loaded, max_tokens, exclude_special)
    if truncated:
        warnings.warn(f"{truncated} of {len(items)} texts truncated to max_tokens={max_tokens} tokens", UserWarning,
                      stacklevel=3)  # fmt: skip
    if short:
        warnings.warn(
            f"{len(short)} of {len(items)} texts skipped: fewer than 4 tokens for t-SNE (texts {short[:10]}"
            f"{' ...' if len(short) > 10 else ''})",
            UserWarning,
            stacklevel=3,
        )
    return loaded, jobs, short


def selected_indices(loaded: Any, jobs: dict[int, np.ndarray], layers: Any, heads: Any) -> dict[str, list[int]]:
    """``layers`` and ``heads`` as lists of indices, checked against the model's shape (from its first text)."""
    from ..capture.extraction import extract_token_ids

    probe = extract_token_ids(next(iter(jobs.values())), loaded)
    return {
        "layers": _indices(layers, probe.n_layers, "layers", "layers"),
        "heads": _indices(heads, probe.n_heads, "heads", "heads per layer"),
    }


def _warn_lowered(df: pd.DataFrame, perplexity: float, asked: Any) -> pd.DataFrame:
    """``df``, after one warning counting the texts whose hidden-state perplexity was lowered from the one asked."""
    lowered = df.loc[(df["method"] == "hidden") & (df["perplexity"] < perplexity), "text"].nunique()
    if lowered and asked is not None:
        warnings.warn(
            f"perplexity {perplexity:g} is too large for {lowered} short texts: lowered to (tokens - 1) / 3 "
            "there (the column perplexity holds the value used)",
            UserWarning,
            stacklevel=3,
        )
    return df
