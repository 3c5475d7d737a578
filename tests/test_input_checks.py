"""Issue 32, findings 7 to 10: tiny texts, huge texts, the sparse engine's exact KL and clear errors for bad
input, each a regression test that failed before its fix."""

from __future__ import annotations

import ast
import dataclasses
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from headsne_widget import attention_affinities, embedding, extract, induction_scores, tsne
from headsne_widget.capture.extraction import Extraction, LoadedModel
from headsne_widget.embedding.tsne import kl_divergence, tsne_frames
from headsne_widget.errors import TextTooLongError
from headsne_widget.export import save_html
from headsne_widget.studies.corpus import corpus_study
from headsne_widget.texts import TSNE_ABSTRACT


def test_default_tsne_converges_on_every_minilm_head_of_a_tiny_text(minilm: LoadedModel):
    """Finding 7: the floor of 5 on the 'auto' learning rate made a tiny text's steps up to 2.5 times too large;
    12 of the 72 heads of a 4-token text raised TSNEDivergedError with the defaults. A floor too low (n / 12)
    collapsed the runs no longer than the exaggeration (the atlas's 300 iterations) to a point instead."""
    for words in range(2, 9):  # n = 4 to 10 tokens with [CLS] and [SEP]
        ex = extract(" ".join("abcdefgh"[:words]), minilm)
        for layer in range(6):
            for head in range(12):
                P = attention_affinities(ex.attention(layer, head))
                assert P.shape == (words + 2, words + 2)
                res = tsne(P, seed=0)
                assert np.isfinite(res.kl) and res.learning_rate == pytest.approx(min(5.0, (words + 2) / 2))
                short = tsne(P, seed=0, n_iter=300)
                assert np.abs(short.embedding).max() > 1e-2, f"layer {layer} head {head} collapsed to a point"


def _local_imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that the module at ``path`` imports, at any depth (lazy imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module] if node.module else [alias.name for alias in node.names]
            found.update(f"{package}.{name.split('.')[0]}" for name in names)
    return found


def test_the_embedding_modules_import_each_other_without_a_circle():
    """engines imported kernels (lazily) and kernels imported MAX_STEP_NORM from engines: the optimiser's
    constants now live in kernel_common, below both."""
    folder = Path(embedding.__file__).parent
    graph = {f"embedding.{p.stem}": _local_imports(p, "embedding") for p in folder.glob("*.py")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    circular = sorted(module for module in graph if reaches(module, module, set()))
    assert circular == []
    from headsne_widget.embedding import engines, kernel_common

    assert engines.MAX_STEP_NORM is kernel_common.MAX_STEP_NORM == 5.0  # still importable where it was


def _numpy_kl(P: np.ndarray, Y: np.ndarray) -> float:
    """KL(P || Q(Y)) from its definition, in float64 with n x n arrays (an independent reference)."""
    Y = Y.astype(np.float64)
    W = 1.0 / (1.0 + ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(axis=-1))
    np.fill_diagonal(W, 0.0)
    Q = W / W.sum()
    kept = P > 0
    return float((P[kept] * np.log(P[kept] / Q[kept])).sum())


@pytest.mark.parametrize("n", [4, 8, 200])
@pytest.mark.parametrize("exact_up_to", [None, 2])
def test_a_sparse_p_reports_the_exact_kl_and_picks_the_best_restart_by_it(n, exact_up_to, monkeypatch):
    """Finding 9: the sparse engine's KL used the interpolated Z (18 % too high at n = 4, 2.6 % at 8, 0.09 % at
    200) for the result's KL and its best restart. ``exact_up_to=2``: above EXACT_KL_MAX_N only the last KL is
    exact, and that is the one the result reports and chooses by."""
    from headsne_widget.embedding import sparse_engine

    if exact_up_to is not None:
        monkeypatch.setattr(sparse_engine, "EXACT_KL_MAX_N", exact_up_to)
    rng = np.random.default_rng(n)
    A = rng.random((n, n)) ** 4
    P = A + A.T
    np.fill_diagonal(P, 0.0)
    P /= P.sum()
    res = tsne(sp.csr_matrix(P), seed=0, restarts=3, n_iter=300)
    reference = np.array([_numpy_kl(P, Y) for Y in res.embeddings])
    np.testing.assert_allclose(res.kls, reference, rtol=2e-5)
    assert res.best == int(np.argmin(reference)) and res.kl == pytest.approx(reference.min(), rel=2e-5)


class _RecordingTokenizer:
    """A tokenizer that records the length of every text it is called on (everything else is the wrapped one)."""

    def __init__(self, inner: Any):
        self.inner, self.lengths = inner, []

    def __call__(self, text: str, **options: Any) -> Any:
        self.lengths.append(len(text))
        return self.inner(text, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _recording(minilm: LoadedModel) -> tuple[LoadedModel, _RecordingTokenizer]:
    tokenizer = _RecordingTokenizer(minilm.tokenizer)
    return dataclasses.replace(minilm, tokenizer=tokenizer), tokenizer


def _same_tokens(a: Extraction, b: Extraction) -> None:
    assert a.tokens == b.tokens and a.token_ids.tolist() == b.token_ids.tolist()
    assert a.offsets == b.offsets and a.special.tolist() == b.special.tolist()


def test_a_huge_text_is_cut_from_a_prefix_not_tokenised_whole(minilm: LoadedModel):
    """Finding 8: a 10 MB text was tokenised whole, twice, for 64 tokens (14 s, 2.6 GiB), and whole before its
    TextTooLongError (10 s, 2 GiB). Now only prefixes of a few thousand characters are."""
    huge = TSNE_ABSTRACT + "\n" + TSNE_ABSTRACT * (4_000_000 // len(TSNE_ABSTRACT))
    loaded, tokenizer = _recording(minilm)
    with pytest.warns(UserWarning, match="truncated from more than 64 to 64 tokens"):
        cut = extract(huge, loaded, max_tokens=64)
    with pytest.warns(UserWarning, match="truncated from 271 to 64 tokens"):
        _same_tokens(cut, extract(TSNE_ABSTRACT, minilm, max_tokens=64))
    assert cut.truncated and cut.n_tokens == 64 and cut.text is huge
    with pytest.raises(TextTooLongError, match=r"has more than 512 tokens but .* at most 512"):
        extract(huge, loaded)
    assert max(tokenizer.lengths) < 100_000 < len(huge)


def test_a_prefix_cut_inside_a_word_does_not_change_the_tokens(minilm: LoadedModel):
    """A prefix that ends inside a word tokenises it differently (here 98 characters of a 200-character word:
    word pieces, where the whole word is one [UNK]); the tokens are taken only once a longer prefix agrees."""
    words = "hello " * 5 + "ab" * 100
    loaded, tokenizer = _recording(minilm)
    with pytest.warns(UserWarning, match="truncated"):
        long = extract(words + " hello" * 2000, loaded, max_tokens=14)
    expected = minilm.tokenizer(words + " hello" * 20, truncation=True, max_length=14)["input_ids"]
    assert long.token_ids.tolist() == expected and long.tokens[6] == "[UNK]"
    assert max(tokenizer.lengths) < len(words) + 6 * 2000


def test_a_text_that_fits_is_tokenised_as_before(minilm: LoadedModel):
    """Short texts (whole, cut by max_tokens, or at the positions' limit) keep the tokenizer's own tokens."""
    for text, max_tokens in [(TSNE_ABSTRACT, None), (TSNE_ABSTRACT, 100), ("a [SEP] b", None), ("x " * 510, None)]:
        options: dict[str, Any] = {"return_special_tokens_mask": True}
        if max_tokens is not None:
            options.update(truncation=True, max_length=max_tokens)
        expected = minilm.tokenizer(text, **options)["input_ids"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            assert extract(text, minilm, max_tokens=max_tokens).token_ids.tolist() == expected
    with pytest.raises(TextTooLongError, match="has 513 tokens"):
        extract("x " * 511, minilm)


# ------------------------------------------------------------------------------------------ finding 10: clear errors


def _P(n: int = 8) -> np.ndarray:
    A = np.random.default_rng(0).random((n, n))
    P = A + A.T
    np.fill_diagonal(P, 0.0)
    return P / P.sum()


def test_induction_scores_names_length_and_seed(minilm: LoadedModel):
    """length=300 spoke of '601 token ids' the caller never passed; seed=-1 gave numpy's 'expected non-negative
    integer'; seed=True ran as seed 1."""
    with pytest.raises(TextTooLongError, match=r"length=300 needs 601 positions .* pass length <= 255"):
        induction_scores(minilm, length=300)
    with pytest.raises(ValueError, match="seed must be non-negative, got -1"):
        induction_scores(minilm, seed=-1)
    with pytest.raises(TypeError, match="seed must be an int, got bool"):
        induction_scores(minilm, seed=True)
    assert induction_scores(minilm, length=255).token_ids.size == 511


def test_corpus_study_names_a_lone_surrogate_and_a_bool_for_layers(minilm: LoadedModel):
    """A lone surrogate reached the tokenizer (its TypeError names no text); layers=True fell on 'bool is not
    iterable'."""
    with pytest.raises(ValueError, match=r"texts\[1\] holds a lone surrogate '\\ud800' at index 4"):
        corpus_study(["a fine text", "bad \ud800 text"], minilm, client="sync", progress=False)
    for layers in (True, "0", 1.0):
        with pytest.raises(TypeError, match=r"layers must be None .*, an index or a list of indices"):
            corpus_study([TSNE_ABSTRACT[:200]], minilm, client="sync", layers=layers, progress=False)


def test_save_html_expands_the_home_folder(tmp_path, monkeypatch):
    """save_html('~/x.html') looked for a folder named '~' ("the folder '~' does not exist")."""
    monkeypatch.setenv("HOME", str(tmp_path))
    ex = SimpleNamespace(tokens=["[CLS]", "a", "b", "[SEP]"], max_attention=np.full((1, 1, 4), 0.5, np.float32),
                         model_name="m", n_layers=1, n_heads=1)  # fmt: skip
    state = SimpleNamespace(
        extraction=ex, model_name="m", layer=0, head=0, mode="attention", kept=[1, 2], embedding=None, kl=None,
        iteration=0, kl_history=[], kl_iterations=[], quantile=False, quantile_k=100, perplexity=20.0,
    )  # fmt: skip
    assert save_html(state, "~/x.html", view="bokeh") == tmp_path / "x.html"
    assert (tmp_path / "x.html").is_file()


@pytest.mark.parametrize(
    "make_P, error, message",
    [
        (lambda P: torch.as_tensor(P).to_sparse(), TypeError, r"torch sparse tensor .* scipy.sparse matrix"),
        (lambda P: torch.as_tensor(P).to_sparse_csr(), TypeError, r"torch sparse tensor .*\(P.to_dense\(\)\)"),
        (lambda P: torch.as_tensor(P).to(torch.bfloat16), TypeError, r"torch.bfloat16 .* pass P.float\(\)"),
        (lambda P: sp.csr_matrix(P.astype(np.complex128)), TypeError, "real-valued .* got dtype complex128"),
        (lambda P: P.astype(np.complex128), TypeError, "real-valued .* got dtype complex128"),
    ],
)
def test_tsne_names_a_p_it_cannot_take(make_P, error, message):
    """A torch sparse or bfloat16 P failed in torch's .numpy(); a complex sparse P was cast to real with only
    scipy's warning (a dense one was refused)."""
    P = make_P(_P())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: sparse CSR support is in beta
        with pytest.raises(error, match=message):
            tsne(P, seed=0, n_iter=10)
        with pytest.raises(error, match=message):
            kl_divergence(P, np.random.default_rng(0).normal(size=(8, 2)))


@pytest.mark.parametrize("value", ["no", 0, 1, None])
@pytest.mark.parametrize("name", ["first_kl", "check_input"])
def test_tsne_frames_takes_only_a_bool_for_its_switches(name, value):
    """first_kl="no" was taken as True (a non-empty string is truthy)."""
    for P in (_P(), sp.csr_matrix(_P())):
        with pytest.raises(TypeError, match=f"{name} must be True or False, got"):
            next(tsne_frames(P, seed=0, n_iter=10, **{name: value}))
    frames = list(tsne_frames(_P(), seed=0, n_iter=10, every=5, kl_every=10, first_kl=np.False_))
    assert frames[0].kl is None and frames[-1].kl is not None


def test_perplexity_has_one_bound_for_the_function_api_and_the_widget():
    """The bound is affinity.spec.MAX_PERPLEXITY, read by the widget's trait too (issue 51: it was 1e4 in the widget
    and none in the function API)."""
    from headsne_widget.affinity.spec import MAX_PERPLEXITY, check_perplexity
    from headsne_widget.widget.protocol import TRAITS

    assert check_perplexity(MAX_PERPLEXITY) == MAX_PERPLEXITY
    with pytest.raises(ValueError, match="perplexity must be a finite number in"):
        check_perplexity(MAX_PERPLEXITY * 1.5)
    trait = next(spec.trait for spec in TRAITS if spec.name == "perplexity")
    assert trait.max == MAX_PERPLEXITY
