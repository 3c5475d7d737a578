"""A word's occurrences across many texts, captured (issue 30): where the word is, and its vector at every layer.

:func:`encode` finds every whole-word occurrence of a word in the texts (any case, punctuation around it allowed,
"banks" is not "bank") and tokenizes the texts that hold it; :func:`occurrence_states` runs the model on one of
them and keeps each layer's vectors at the occurrences only, ``(L + 1, d)`` float32 each, never the text's
attention. A word split into word pieces is one occurrence whose vector is the **mean of its pieces** (the tokens
whose character spans overlap the word's), at each layer, as Coenen et al. do. Asked for, it also keeps what each
head gives the word, the largest attention any query of its text pays it (the **maximum over its pieces** of the
maximum-attention grid's column, ``(L, H)``): the widget's grid over the occurrences.

:func:`occurrence_extraction` makes an :class:`~.extracted.Extraction` whose "tokens" are the occurrences, so
that every view of the widget that maps points in a space works on them unchanged (``HeadSNE.contexts``); it has
no attention between its points (:class:`~.sources.NoAttention`). The studies (``studies.contexts``) run the same
tasks on Dask and analyse the vectors.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import torch

from .extracted import Extraction, HiddenStates
from .sources import NoAttention, read_only
from .word_spans import UNSPACED, check_word, find_word, inside_unspaced, sentence_around, token_span

__all__ = [
    "OCCURRENCE_COLUMNS", "TERMS", "UNSPACED", "Occurrences", "capture_occurrences", "check_term", "check_word",
    "check_word_length", "encode", "find_word", "in_order", "inside_unspaced", "occurrence_extraction",
    "occurrence_states", "run_here", "sentence_around", "token_span",
]  # fmt: skip

#: what an occurrence's vector can be: the hidden state, or what one kind of component wrote into it
#: (:func:`~headsne_widget.capture.decompose.decompose`: the input embedding, every head, every feed-forward)
TERMS = ("hidden", "input", "attention", "mlp")
_DECOMPOSED = {"input": "input", "attention": "head", "mlp": "mlp"}
#: the columns of an occurrence's row (``WordContexts.occurrences``)
OCCURRENCE_COLUMNS = ("text", "start", "end", "token_start", "token_end", "sentence", "sentence_start", "full_text")

#: a task's job: (token ids, token spans of the occurrences)
Job = tuple[np.ndarray, list[tuple[int, int]]]


# ------------------------------------------------------------------------- checks (finding: word_spans)


def check_term(term: Any) -> str:
    if not isinstance(term, str) or term not in TERMS:
        raise ValueError(f"term must be one of {', '.join(map(repr, TERMS))}, got {term!r}")
    return term


def check_word_length(word: str, loaded: Any) -> None:
    """A word whose own tokens (with the special ones) exceed the model's positions can never be looked at."""
    from ..errors import TextTooLongError

    limit, tokenizer = loaded.max_positions, loaded.tokenizer
    if limit is None:
        return
    n = len(tokenizer(word, add_special_tokens=False, verbose=False)["input_ids"])
    if n + tokenizer.num_special_tokens_to_add() > limit:
        raise TextTooLongError(
            f"the word {word[:40]!r}{'...' if len(word) > 40 else ''} is {n} tokens for {loaded.name}, which takes "
            f"at most {limit} positions ({loaded.positions_source}) with its special tokens: no text can hold it"
        )


def encode(word: str, items: list[str], loaded: Any) -> tuple[dict[int, Job], list[dict[str, Any]]]:
    """The jobs (text index -> (token ids, token spans)) and one row per occurrence (:data:`OCCURRENCE_COLUMNS`
    and ``k``, its rank in its text), texts in order."""
    from ..errors import TextTooLongError

    found = {i: spans for i, text in enumerate(items) if (spans := find_word(word, text))}
    if not found:
        raise ValueError(
            f"{word!r} occurs in none of the {len(items)} texts searched (whole words, any case): nothing to embed"
        )
    tokenizer, limit = loaded.tokenizer, loaded.max_positions
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(f"{loaded.name}'s tokenizer is not a fast one: it gives no character spans to find words")
    order = list(found)
    encoded = tokenizer([items[i] for i in order], return_offsets_mapping=True, return_special_tokens_mask=True,
                        verbose=False)  # fmt: skip
    jobs: dict[int, Job] = {}
    rows: list[dict[str, Any]] = []
    unspaced = shared = 0
    for j, i in enumerate(order):
        ids = np.asarray(encoded["input_ids"][j], dtype=np.int64)
        if limit is not None and ids.size > limit:
            raise TextTooLongError(f"texts[{i}] holds {word!r} but has {ids.size} tokens; {loaded.name} takes at "
                                   f"most {limit} ({loaded.positions_source}): shorten it or leave it out")  # fmt: skip
        special = encoded["special_tokens_mask"][j]
        offsets = [None if s else (int(o[0]), int(o[1])) for o, s in zip(encoded["offset_mapping"][j], special)]
        kept: list[tuple[int, int]] = []
        for start, end in found[i]:
            tokens = token_span(offsets, start, end)
            if tokens is None:  # no token covers it (characters the tokenizer drops): left out
                continue
            unspaced += inside_unspaced(items[i], start, end)
            shared += _beyond(items[i], start, end, offsets[tokens[0]], offsets[tokens[1] - 1])
            lo, sentence = sentence_around(items[i], start, end)
            rows.append(dict(k=len(kept), text=i, start=start, end=end, token_start=tokens[0], token_end=tokens[1],
                             sentence=sentence, sentence_start=lo, full_text=items[i]))  # fmt: skip
            kept.append(tokens)
        if kept:
            jobs[i] = (ids, kept)
    _warn_unsure(word, len(rows), unspaced, shared, loaded.name)
    return jobs, rows


def _beyond(text: str, start: int, end: int, first: tuple[int, int] | None, last: tuple[int, int] | None) -> bool:
    """Whether the tokens holding ``text[start:end]`` hold other characters than spaces too."""
    assert first is not None and last is not None
    return bool(text[first[0] : start].strip() or text[end : last[1]].strip())


def _warn_unsure(word: str, found: int, unspaced: int, shared: int, model: str) -> None:
    """One warning for the occurrences that may not be the word alone (module doc of :func:`find_word`)."""
    from .loading import user_stacklevel

    notes = []
    if unspaced:
        notes.append(
            f"{unspaced} sit in text written without spaces (Chinese, Japanese, Thai, ...), where nothing marks a "
            f"word's end: each is taken as {word!r}, though it may be part of a longer word"
        )
    if shared:
        notes.append(
            f"{shared} share a token with other characters ({model}'s tokenizer keeps them together, e.g. a run "
            "of characters it does not know as one [UNK]): their vectors are those tokens'"
        )
    if notes:
        warnings.warn(f"of the {found} occurrences of {word!r}, " + "; ".join(notes), UserWarning,
                      stacklevel=user_stacklevel())  # fmt: skip


# ----------------------------------------------------------------------------------------- one text


def occurrence_states(index: int, job: Job, model: Any, *, term: str, attention: bool = False) -> list[dict[str, Any]]:
    """One text's task (see the module doc): one row per occurrence, ``{"text": index, "k": its rank in the text,
    "token_id": its first piece's id, "states": float32 (L + 1, d)}`` and, with ``attention``, ``"attention"``:
    float32 (L, H), each head's largest attention to the word from any query of the text, and ``"above_uniform"``,
    the same above uniform attention (the grid's other normalisation)."""
    from .extraction import extract_token_ids, load_model

    ids, spans = np.asarray(job[0]), job[1]
    loaded = load_model(model)
    captured = extract_token_ids(ids, loaded, components=term != "hidden") if attention or term != "hidden" else None
    if term == "hidden":  # the capture's own states where it ran: one forward pass a text, not two
        states = _hidden_states(ids, loaded) if captured is None else captured.states.states.to(torch.float32)
        pooled = _pool(states, spans)
    else:
        assert captured is not None
        pooled = _decomposed(captured, loaded, _DECOMPOSED[term], spans)
    rows = [{"text": index, "k": k, "token_id": int(ids[a]), "states": s} for k, (s, (a, _)) in
            enumerate(zip(pooled, spans))]  # fmt: skip
    if attention and captured is not None:
        from .scores import statistics

        above = statistics(captured).above_uniform
        for row, (a, b) in zip(rows, spans):
            row["attention"] = captured.max_attention[:, :, a:b].max(axis=2)
            row["above_uniform"] = above[:, :, a:b].max(axis=2)
    return rows


def _hidden_states(ids: np.ndarray, loaded: Any) -> torch.Tensor:
    """float32 (L + 1, n, d): one forward pass with ``output_hidden_states``, no attention kept."""
    from .loading import input_device

    model = loaded.model
    input_ids = torch.as_tensor(ids, device=input_device(model))[None, :]
    with torch.inference_mode():
        output = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), output_hidden_states=True,
                       return_dict=True)  # fmt: skip
    hidden = getattr(output, "hidden_states", None)
    if not hidden or any(h.ndim != 3 for h in hidden):
        raise ValueError(f"{loaded.name} ({type(model).__name__}) returns no (1, tokens, hidden) hidden states")
    return torch.stack([h[0] for h in hidden]).to("cpu", torch.float32)


def _pool(states: torch.Tensor, spans: list[tuple[int, int]]) -> list[np.ndarray]:
    """Each span's mean over its tokens, at every layer: float32 (L + 1, d) each."""
    return [states[:, a:b].mean(dim=1).numpy() for a, b in spans]


def _decomposed(ex: Extraction, loaded: Any, kind: str, spans: list[tuple[int, int]]) -> list[np.ndarray]:
    """Each span's pooled sum of the ``kind`` components at every layer (layer 0: the input term of the stream
    entering the first block for "input", the embeddings through their norm's gain and scale where the model has
    one (:func:`~.decompose.decompose`'s convention); zero for the others, which have written nothing yet)."""
    from .components import trace_of
    from .decompose import components, decompose

    entering = components(trace_of(ex, loaded), 0)[1][0]  # the input term of the stream entering block 0
    first = entering if kind == "input" else np.zeros_like(entering)
    layers = [first.astype(np.float64)]
    for layer in range(ex.n_layers):
        parts = decompose(ex, layer, model=loaded)
        layers.append(parts.vectors[(parts.terms["term"] == kind).to_numpy()].sum(axis=0))
    stacked = np.stack(layers)  # (L + 1, n, d)
    return [stacked[:, a:b].mean(axis=1).astype(np.float32) for a, b in spans]


# ----------------------------------------------------------------------------------------- many texts


def run_here(jobs: dict[int, Job], model: Any, term: str, bar: Any, *, attention: bool = False) -> list[dict[str, Any]]:
    """Every job's rows, computed in this process on one thread per core, each forward pass in one torch thread
    (torch's thread count restored afterwards); ``bar.update()`` after each text; on Ctrl-C a warning and the
    rows of the texts finished.

    Measured on 2 busy cores (load 7), 200 texts of 20-80 tokens: 7.0 s with one torch thread against 100 s
    with two (each pass's threads wait for each other on an oversubscribed machine; ``benchmarks/word_contexts.py``).
    """
    threads = torch.get_num_threads()
    rows: list[dict[str, Any]] = []
    try:
        workers = _cores() if term == "hidden" else 1  # decompose hooks the shared model: one text at a time
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for result in _pooled(
                pool, jobs, lambda i, job: occurrence_states(i, job, model, term=term, attention=attention), workers
            ):
                rows += result
                bar.update()
    except KeyboardInterrupt:
        done = len({r["text"] for r in rows})
        warnings.warn(f"interrupted: returning the occurrences of the {done} texts finished so far (of "
                      f"{len(jobs)})", RuntimeWarning, stacklevel=3)  # fmt: skip
    finally:  # a worker's setting of 1 is what torch gives later threads too: undone
        torch.set_num_threads(threads)
    return rows


def _pooled(
    pool: ThreadPoolExecutor, jobs: dict[int, Job], task: Callable[[int, Job], list[dict]], workers: int
) -> Iterator[list[dict]]:
    """Each job's rows in text order, two per worker in flight; what is left is cancelled when the caller stops."""

    def one(index: int, job: Job) -> list[dict[str, Any]]:
        torch.set_num_threads(1)
        return task(index, job)

    waiting = iter(jobs.items())
    running: list[Future] = [pool.submit(one, *item) for _, item in zip(range(2 * workers), waiting)]
    try:
        while running:
            result = running.pop(0).result()
            following = next(waiting, None)
            if following is not None:
                running.append(pool.submit(one, *following))
            yield result
    finally:
        for future in running:
            future.cancel()


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def in_order(rows: list[dict[str, Any]], results: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """``results`` in the order of ``rows`` (texts, then position), and the rows whose text finished (a Ctrl-C)."""
    results = sorted(results, key=lambda r: (r["text"], r["k"]))
    if len(results) < len(rows):
        done = {(r["text"], r["k"]) for r in results}
        rows = [r for r in rows if (r["text"], r["k"]) in done]
    return rows, results


def capture_occurrences(word: Any, texts: Any, model: Any = None, *, term: str = "hidden",
                        progress: Callable[[int, int], None] | None = None) -> Extraction:  # fmt: skip
    """Every occurrence of ``word`` in ``texts`` run through ``model`` in this process, as an extraction
    (:func:`occurrence_extraction`, its grid included); ``progress(done, total)`` after each text (it may raise
    to stop). Checked first: the word, the texts, the term, the word's length in the model's positions."""
    from .._checks import check_texts
    from .extraction import load_model

    word, items, term = check_word(word), check_texts(texts), check_term(term)
    loaded = load_model(model)
    check_word_length(word, loaded)
    jobs, rows = encode(word, items, loaded)
    bar = _Counter(len(jobs), progress)
    rows, results = in_order(rows, run_here(jobs, loaded, term, bar, attention=True))
    return occurrence_extraction(word, rows, results, loaded.name)


class _Counter:
    """``run_here``'s bar as a callback: ``progress(done, total)``."""

    def __init__(self, total: int, progress: Callable[[int, int], None] | None) -> None:
        self.done, self.total, self.progress = 0, total, progress

    def update(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)


# ----------------------------------------------------------------------------------------- as an extraction


class Occurrences(Extraction):
    """An extraction whose points are the occurrences of :attr:`word` across texts (:func:`occurrence_extraction`):
    :attr:`occurrences` one row each (:data:`OCCURRENCE_COLUMNS`), :attr:`above_uniform` float32 (L, H, m) the
    grid above uniform (each occurrence's in its own text)."""

    word: str
    occurrences: pd.DataFrame
    above_uniform: np.ndarray


def occurrence_extraction(word: str, rows: list[dict[str, Any]], results: list[dict[str, Any]],
                          model_name: str) -> Occurrences:  # fmt: skip
    """The occurrences as an extraction (module doc): one "token" per occurrence (its text as written), ``text``
    the sentences that hold them, one a line (newlines inside a sentence become spaces), ``offsets`` the word in
    it, ``hidden_states`` (L + 1, m, d), ``max_attention`` (L, H, m) from each result's ``"attention"``.
    ``rows`` and ``results`` are in the same order (texts, then position)."""
    lines: dict[tuple[int, int], int] = {}  # (text, sentence start) -> where its line starts in ``text``
    parts: list[str] = []
    offsets: list[tuple[int, int] | None] = []
    tokens: list[str] = []
    at = 0
    for row in rows:
        key = (int(row["text"]), int(row["sentence_start"]))
        if key not in lines:
            lines[key] = at
            parts.append(row["sentence"].replace("\n", " "))
            at += len(parts[-1]) + 1
        start = lines[key] + int(row["start"]) - key[1]
        offsets.append((start, start + int(row["end"]) - int(row["start"])))
        tokens.append(row["full_text"][int(row["start"]) : int(row["end"])])
    states = np.stack([r["states"] for r in results], axis=1)  # (L + 1, m, d)
    grid = np.stack([r["attention"] for r in results], axis=2)  # (L, H, m)
    reason = (f"the points are {len(rows)} occurrences of {word!r} across texts: there is no attention between "
              f"them (only the hidden states: mode='hidden')")  # fmt: skip
    ex = Occurrences(
        "\n".join(parts), tokens, np.array([r["token_id"] for r in results], dtype=np.int64), offsets,
        np.zeros(len(rows), dtype=bool), max_attention=grid, model_name=model_name,
        attention_source=NoAttention(grid.shape, reason), states=HiddenStates(states), head_stats=None,
    )  # fmt: skip
    ex.word, ex.above_uniform = word, read_only(np.stack([r["above_uniform"] for r in results], axis=2))
    ex.occurrences = pd.DataFrame([{c: r[c] for c in OCCURRENCE_COLUMNS} for r in rows], columns=OCCURRENCE_COLUMNS)
    return ex
