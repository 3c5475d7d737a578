"""The thesis studies on a tiny random BERT: row counts, finite KLs, reproducible seeds, real disturbances."""

from __future__ import annotations

import numpy as np
import pytest

from headsne_widget import analyses, extract
from headsne_widget.affinity.affinities import attention_affinities, gaussian_affinities
from headsne_widget.embedding.tsne import tsne

TEXT = "the quick brown fox jumps over the lazy dog because the dog was asleep in the warm sun"
LONG = (
    "we present a new technique that visualizes high dimensional data by giving each datapoint a location "
    "in a two or three dimensional map and the technique is much easier to optimize than the old one"
)


def missing(value) -> bool:
    """None in a list of dicts, pandas.NA in a DataFrame's nullable Int64 column."""
    try:
        import pandas as pd
    except ImportError:
        return value is None
    return value is None or value is pd.NA


def records(rows):
    return rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)


# ---------------------------------------------------------------------------------------- kl_by_layer


def test_kl_by_layer_rows(tiny_bert):
    ex = extract(TEXT, tiny_bert)
    L, H, runs = ex.n_layers, ex.n_heads, 2
    rows = records(analyses.kl_by_layer(TEXT, tiny_bert, runs=runs, n_iter=60, progress=False, perplexity=5.0))
    assert len(rows) == L * (H + 1) * runs
    assert all({"layer", "method", "head", "run", "kl"} <= set(r) for r in rows)
    kl = np.array([r["kl"] for r in rows])
    assert np.all(np.isfinite(kl)) and np.all(kl >= 0)
    for layer in range(L):
        att = [r for r in rows if r["layer"] == layer and r["method"] == "attention"]
        hid = [r for r in rows if r["layer"] == layer and r["method"] == "hidden"]
        assert sorted({int(r["head"]) for r in att}) == list(range(H))
        assert len(att) == H * runs and len(hid) == runs
        assert all(missing(r["head"]) for r in hid)
        assert sorted(r["run"] for r in hid) == list(range(runs))


def test_kl_by_layer_is_reproducible_from_seed(tiny_bert):
    kw = dict(runs=2, heads=[1], n_iter=60, progress=False, perplexity=5.0)
    a = [r["kl"] for r in records(analyses.kl_by_layer(TEXT, tiny_bert, seed=3, **kw))]
    b = [r["kl"] for r in records(analyses.kl_by_layer(TEXT, tiny_bert, seed=3, **kw))]
    c = [r["kl"] for r in records(analyses.kl_by_layer(TEXT, tiny_bert, seed=4, **kw))]
    assert a == b
    assert a != c


def test_kl_by_layer_batches_runs_in_one_tsne_call_per_head(tiny_bert, monkeypatch):
    import headsne_widget.embedding.tsne as tsne_module

    calls = []
    real = tsne_module.tsne

    def counting(P, **kw):
        calls.append(kw["restarts"])
        return real(P, **kw)

    monkeypatch.setattr(tsne_module, "tsne", counting)
    rows = records(
        analyses.kl_by_layer(TEXT, tiny_bert, runs=3, heads=[0, 2], n_iter=30, progress=False, perplexity=5.0)
    )
    ex = extract(TEXT, tiny_bert)
    assert len(rows) == ex.n_layers * 3 * 3
    assert calls == [3] * (ex.n_layers * 3)
    # the rows of one head are that call's restarts, each with its own KL
    head0 = [r["kl"] for r in rows if r["layer"] == 0 and r["method"] == "attention" and r["head"] == 0]
    assert len(set(head0)) == 3


def test_kl_by_layer_keeps_finished_rows_on_interrupt(tiny_bert, monkeypatch):
    real = analyses._tsne_kls
    done = []

    def interrupt_third(*args):
        if len(done) == 2:
            raise KeyboardInterrupt
        done.append(1)
        return real(*args)

    monkeypatch.setattr(analyses, "_tsne_kls", interrupt_third)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        rows = records(analyses.kl_by_layer(TEXT, tiny_bert, runs=2, n_iter=30, progress=False, perplexity=5.0))
    assert len(rows) == 2 * 2
    assert all(np.isfinite(r["kl"]) for r in rows)


def test_kl_by_layer_progress_reports_runs(tiny_bert, capsys):
    analyses.kl_by_layer(TEXT, tiny_bert, runs=1, heads=[0], n_iter=20, progress=True, perplexity=5.0)
    ex = extract(TEXT, tiny_bert)
    assert f"{2 * ex.n_layers}/{2 * ex.n_layers}" in capsys.readouterr().err  # tqdm writes to stderr


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(runs=0), "runs"),
        (dict(heads=[99]), "heads"),
        (dict(heads=[]), "heads"),
        (dict(heads=[0, 0]), "repeated"),
        (dict(n_iter=0), "n_iter"),
        (dict(perplexity=-1.0), "perplexity"),
    ],
)
def test_kl_by_layer_rejects_bad_arguments(tiny_bert, kwargs, match):
    with pytest.raises(ValueError, match=match):
        analyses.kl_by_layer(TEXT, tiny_bert, progress=False, **({"perplexity": 5.0} | kwargs))


def test_kl_by_layer_lowers_a_too_large_perplexity_as_everywhere(tiny_bert):
    ex = extract(TEXT, tiny_bert)
    with pytest.warns(UserWarning, match="perplexity 20 is too large"):
        rows = records(analyses.kl_by_layer(TEXT, tiny_bert, runs=1, heads=[0], n_iter=20, progress=False))
    hidden = [r for r in rows if r["method"] == "hidden"]
    assert [r["perplexity"] for r in hidden] == pytest.approx([(ex.n_tokens - 1) / 3] * ex.n_layers)


def test_kl_by_layer_rows_equal_direct_computations(tiny_bert):
    """Each row is the KL of a direct ``tsne`` on the P the row names, with the documented seed."""
    ex = extract(LONG, tiny_bert)
    runs, n_iter, seed, perplexity = 2, 150, 5, 6.0
    rows = records(
        analyses.kl_by_layer(LONG, tiny_bert, runs=runs, heads=[1, 3], n_iter=n_iter, seed=seed, perplexity=perplexity,
                             progress=False)
    )  # fmt: skip
    for layer in range(ex.n_layers):
        for head in (1, 3):
            P = attention_affinities(ex.attention(layer, head))
            direct = tsne(
                P, n_iter=n_iter, restarts=runs, seed=analyses.study_seed(analyses.study_seed(seed, layer, head), 0)
            ).kls
            got = [r["kl"] for r in rows if (r["layer"], r["method"]) == (layer, "attention") and r["head"] == head]
            np.testing.assert_allclose(got, direct, rtol=1e-6)
        P = gaussian_affinities(ex.hidden_states[layer + 1].astype(np.float64), perplexity=perplexity)
        direct = tsne(
            P, n_iter=n_iter, restarts=runs, seed=analyses.study_seed(analyses.study_seed(seed, layer, ex.n_heads), 0)
        ).kls
        got = [r["kl"] for r in rows if (r["layer"], r["method"]) == (layer, "hidden")]
        np.testing.assert_allclose(got, direct, rtol=1e-6)


# ----------------------------------------------------------------------------------------- robustness


def test_robustness_replaces_the_fraction_of_tokens(tiny_bert):
    ex = extract(LONG, tiny_bert)
    eligible = np.flatnonzero(~ex.special)
    fraction, repeats = 0.1, 3
    res = analyses.robustness(
        LONG, tiny_bert, layer=1, head=2, fraction=fraction, repeats=repeats, n_iter=40, progress=False
    )
    n_replace = round(fraction * len(eligible))
    assert n_replace >= 2
    assert res.disturbed_ids.shape == (repeats, ex.n_tokens)
    np.testing.assert_array_equal(res.token_ids, ex.token_ids)
    vocabulary = set(ex.token_ids[eligible].tolist())
    for ids, positions in zip(res.disturbed_ids, res.positions):
        changed = np.flatnonzero(ids != ex.token_ids)
        assert len(changed) == n_replace
        np.testing.assert_array_equal(changed, positions)
        assert set(changed) <= set(eligible)  # never a special token
        assert set(ids[changed].tolist()) <= vocabulary  # replacements are tokens of the text
    assert set(res.kls) == set(analyses.CONDITIONS)
    for condition, kls in res.kls.items():
        assert kls.shape == (repeats,), condition
        assert np.all(np.isfinite(kls)) and np.all(kls >= 0)
        assert res.std[condition] == pytest.approx(np.std(kls, ddof=1))
    # disturbing changes the attention head's P, so its KLs differ from the undisturbed ones
    assert not np.allclose(res.kls["attention"], res.kls["attention disturbed"])


def test_robustness_is_reproducible_from_seed(tiny_bert):
    kw = dict(layer=0, head=1, fraction=0.1, repeats=2, n_iter=30, progress=False)
    a = analyses.robustness(LONG, tiny_bert, seed=7, **kw)
    b = analyses.robustness(LONG, tiny_bert, seed=7, **kw)
    c = analyses.robustness(LONG, tiny_bert, seed=8, **kw)
    np.testing.assert_array_equal(a.disturbed_ids, b.disturbed_ids)
    for condition in analyses.CONDITIONS:
        np.testing.assert_array_equal(a.kls[condition], b.kls[condition])
    assert not np.array_equal(a.disturbed_ids, c.disturbed_ids)


def test_robustness_keeps_finished_repeats_on_interrupt(tiny_bert, monkeypatch):
    real = analyses._extract_ids
    calls = []

    def interrupt_second(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(analyses, "_extract_ids", interrupt_second)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        res = analyses.robustness(LONG, tiny_bert, layer=0, head=0, fraction=0.1, repeats=4, n_iter=30, progress=False)
    assert res.repeats == 1
    assert res.kls["attention"].shape == res.kls["hidden"].shape == (4,)  # batched, finished before the loop
    assert res.kls["attention disturbed"].shape == res.kls["hidden disturbed"].shape == (1,)
    assert res.disturbed_ids.shape[0] == res.positions.shape[0] == 1
    assert res.std["hidden disturbed"] == 0.0  # one value: no spread, never NaN
    rows = res.to_rows()
    assert len(rows) == 4 + 4 + 1 + 1 and {r["condition"] for r in rows} == set(analyses.CONDITIONS)


def test_robustness_progress_covers_the_first_phase_and_an_interrupt_there_is_consistent(
    tiny_bert, monkeypatch, capsys
):
    real = analyses._tsne_kl_chunks
    chunks = []

    def few_per_chunk(P, restarts, n_iter, seed):  # 2 runs per batched call, interrupted at the 3rd call
        for start in range(0, restarts, 2):
            chunks.append(1)
            if len(chunks) == 3:
                raise KeyboardInterrupt
            yield from real(P, min(2, restarts - start), n_iter, seed + start)

    monkeypatch.setattr(analyses, "_tsne_kl_chunks", few_per_chunk)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        res = analyses.robustness(LONG, tiny_bert, layer=0, head=0, fraction=0.1, repeats=6, n_iter=20, progress=True)
    assert len(res.kls["attention"]) == len(res.kls["hidden"]) == 2  # same repeats in both methods
    assert res.repeats == 0
    assert "4/24" in capsys.readouterr().err  # the first phase moved the bar before the interrupt


def test_robustness_undisturbed_kls_equal_a_direct_computation(tiny_bert):
    ex = extract(LONG, tiny_bert)
    res = analyses.robustness(LONG, tiny_bert, layer=1, head=2, fraction=0.1, repeats=3, runs=2, n_iter=60, seed=4,
                              perplexity=6.0, progress=False)  # fmt: skip
    P = attention_affinities(ex.attention(1, 2))
    direct = tsne(P, n_iter=60, restarts=6, seed=analyses.study_seed(analyses.study_seed(4, 1, 0), 0)).kls
    np.testing.assert_allclose(res.kls["attention"], np.asarray(direct).reshape(3, 2).min(axis=1), rtol=1e-6)
    P = gaussian_affinities(ex.hidden_states[2].astype(np.float64), perplexity=6.0)
    direct = tsne(P, n_iter=60, restarts=6, seed=analyses.study_seed(analyses.study_seed(4, 1, 1), 0)).kls
    np.testing.assert_allclose(res.kls["hidden"], np.asarray(direct).reshape(3, 2).min(axis=1), rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(fraction=0.0), "fraction"),
        (dict(fraction=1.0), "fraction"),
        (dict(fraction=-0.2), "fraction"),
        (dict(fraction=0.001), "fraction"),  # rounds to no token at all
        (dict(repeats=0), "repeats"),
        (dict(runs=0), "runs"),
        (dict(layer=9), "layer"),
        (dict(head=9), "head"),
    ],
)
def test_robustness_rejects_bad_arguments(tiny_bert, kwargs, match):
    args = dict(layer=0, head=0, repeats=1, n_iter=10, progress=False) | kwargs
    with pytest.raises(ValueError, match=match):
        analyses.robustness(LONG, tiny_bert, **args)


# ------------------------------------------------------------------------------------- word embeddings


def test_word_embeddings_one_point_per_word(tiny_bert):
    words = ["teacher", "baker", "new york", "singer", "pilot", "farmer", "nurse"]
    res = analyses.word_embeddings(words, tiny_bert, n_iter=100)
    assert res.words == words
    assert res.embedding.shape == (len(words), 2) and np.all(np.isfinite(res.embedding))
    assert np.isfinite(res.kl) and res.kl >= 0
    # each point is the [CLS] hidden state of the last layer (Def. 4.1), phrases included
    ex = extract("new york", tiny_bert)
    np.testing.assert_allclose(res.X[2], ex.hidden_states[-1][0], rtol=1e-5, atol=1e-6)
    assert res.layer == ex.n_layers
    first = analyses.word_embeddings(words, tiny_bert, layer=0, n_iter=50)
    np.testing.assert_allclose(first.X[0], extract("teacher", tiny_bert).hidden_states[0][0], rtol=1e-5, atol=1e-6)
    again = analyses.word_embeddings(words, tiny_bert, n_iter=100)
    np.testing.assert_array_equal(res.embedding, again.embedding)


def test_word_embeddings_rejects_bad_words(tiny_bert):
    with pytest.raises(ValueError, match="words"):
        analyses.word_embeddings([], tiny_bert)
    with pytest.raises(ValueError, match="words"):
        analyses.word_embeddings(["only"], tiny_bert)
    with pytest.raises(TypeError, match="words"):
        analyses.word_embeddings("teacher", tiny_bert)
    with pytest.raises(ValueError, match="layer"):
        analyses.word_embeddings(["a", "b", "c"], tiny_bert, layer=10)


def test_occupations_are_single_distinct_words():
    assert 90 <= len(analyses.OCCUPATIONS) <= 110
    assert len(set(analyses.OCCUPATIONS)) == len(analyses.OCCUPATIONS)
    assert all(w.isalpha() and w.islower() for w in analyses.OCCUPATIONS)
    for word in ("musician", "choreographer", "millwright", "woodworker", "brickmason"):
        assert word in analyses.OCCUPATIONS
