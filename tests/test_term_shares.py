"""Issue 28 item 5: term_shares, term_share_summary and compare_models on the bundled MiniLM (a few short texts),
checked against decompose() directly, across runners, and their bokeh figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from headsne_widget import compare_models, decompose, extract, term_shares
from headsne_widget.errors import IndexOutOfRangeError
from headsne_widget.studies.term_shares import TERMS, term_share_summary

TEXTS = ["The cat sat on the mat.", "A dog barked at the mailman today.", "The cat sat on the mat."]
KEY = ["text", "token", "layer"]


@pytest.fixture(scope="module")
def rows(minilm_path: str) -> pd.DataFrame:
    return term_shares(TEXTS, minilm_path, client="sync", progress=False)


@pytest.fixture(scope="module")
def head_rows(minilm_path: str) -> pd.DataFrame:
    return term_shares(TEXTS[:1], minilm_path, layers=[0, 5], client="sync", progress=False, by_head=True)


def test_rows_are_tidy_and_sum_to_one_over_terms(rows):
    assert list(rows.columns) == ["text", "token", "piece", "special", "start", "end", "layer", "term", "share"]
    assert rows.groupby(KEY).size().eq(len(TERMS)).all()
    assert set(rows["layer"]) == set(range(6)) and set(rows["term"]) == set(TERMS)
    np.testing.assert_allclose(rows.groupby(KEY)["share"].sum(), 1.0, atol=1e-9)
    first = rows[(rows["text"] == 0) & (rows["layer"] == 0) & (rows["term"] == "input")]
    assert first["piece"].tolist()[:3] == ["[CLS]", "the", "cat"] and first["special"].tolist()[0]
    assert first[["start", "end"]].to_numpy()[1].tolist() == [0, 3]


def test_shares_equal_decompose_directly(rows, minilm):
    ex = extract(TEXTS[1], minilm, components=True)
    for layer in (0, 3, 5):
        dec = decompose(ex, layer)
        mine = rows[(rows["text"] == 1) & (rows["layer"] == layer)]
        for term in TERMS:
            expected = dec.shares[(dec.terms["term"] == term).to_numpy()].sum(axis=0)
            got = mine[mine["term"] == term].sort_values("token")["share"].to_numpy()
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_by_head_rows_sum_to_the_head_term(rows, head_rows):
    heads = head_rows[head_rows["term"] == "head"]
    assert heads.groupby(["token", "layer"]).size().to_dict() == {
        **{(t, 0): 12 for t in range(9)},
        **{(t, 5): 72 for t in range(9)},
    }
    assert set(heads.loc[heads["layer"] == 5, "from_layer"]) == set(range(6))
    assert (head_rows.loc[head_rows["term"] != "head", ["from_layer", "head"]] == -1).all().all()
    summed = heads.groupby(["token", "layer"])["share"].sum()
    plain = rows[(rows["text"] == 0) & (rows["term"] == "head") & rows["layer"].isin([0, 5])]
    np.testing.assert_allclose(
        summed.to_numpy(), plain.set_index(["token", "layer"])["share"].loc[summed.index], atol=1e-12
    )
    others = head_rows[head_rows["term"] != "head"].set_index(["token", "layer", "term"])["share"]
    plain_others = rows[(rows["text"] == 0) & (rows["term"] != "head")].set_index(["token", "layer", "term"])["share"]
    np.testing.assert_array_equal(others.to_numpy(), plain_others.loc[others.index].to_numpy())
    np.testing.assert_allclose(term_share_summary(head_rows), term_share_summary(rows[rows["text"] == 0]).loc[[0, 5]])


def test_the_same_text_twice_gives_identical_rows(rows):
    a = rows[rows["text"] == 0].drop(columns="text").reset_index(drop=True)
    b = rows[rows["text"] == 2].drop(columns="text").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_threads_equal_in_process(rows, minilm_path):
    pytest.importorskip("distributed")
    threaded = term_shares(TEXTS, minilm_path, client="threads", progress=False)
    pd.testing.assert_frame_equal(threaded, rows, check_exact=True)


def test_summary_is_the_per_layer_mean(rows):
    table = term_share_summary(rows)
    assert list(table.columns) == list(TERMS) and list(table.index) == list(range(6))
    np.testing.assert_allclose(table.sum(axis=1), 1.0, atol=1e-9)
    at2 = rows[(rows["layer"] == 2) & (rows["term"] == "mlp")]["share"].mean()
    assert table.loc[2, "mlp"] == pytest.approx(at2, abs=1e-15)
    no_special = term_share_summary(rows, exclude_special=True)
    assert not np.allclose(no_special.to_numpy(), table.to_numpy())
    with pytest.raises(ValueError, match="empty"):
        term_share_summary(rows.iloc[:0])


def test_a_model_compared_with_itself_has_rho_one(minilm_path):
    result = compare_models(TEXTS[:2], minilm_path, minilm_path, client="sync", progress=False)
    assert list(result.columns) == ["layer", "term", "rho", "p_value", "n"]
    assert (
        len(result) == 6 * len(TERMS) and (result["n"] == 9 + 11).all()
    )  # [CLS] a dog barked at the mail ##man today . [SEP]
    np.testing.assert_allclose(result["rho"], 1.0, atol=1e-12)


@pytest.mark.parametrize(
    ("texts", "layers", "error", "match"),
    [
        ([], None, ValueError, "empty"),
        (["The cat sat."], 6, IndexOutOfRangeError, "layers 6 is out of range"),
        (["The cat sat.", 3], None, TypeError, r"texts\[1\] is a int"),
        ("The cat sat.", None, TypeError, "not one string"),
    ],
)
def test_bad_input_is_refused_by_name(minilm_path, texts, layers, error, match):
    with pytest.raises(error, match=match):
        term_shares(texts, minilm_path, layers=layers, client="sync", progress=False)


def test_the_plots_build(rows):
    from bokeh.models import HoverTool, Line, Scatter, VBar

    from headsne_widget import plots

    table = term_share_summary(rows)
    for given in (table, rows):
        fig = plots.term_shares(given).children[0]
        bars = [r for r in fig.renderers if isinstance(r.glyph, VBar)]
        assert [r.name for r in bars] == [f"term_{t}" for t in TERMS]
        assert len(fig.select(type=HoverTool)) == len(TERMS)
        data = fig.select(name="term_shares")[0].data
        assert list(data["layer"]) == [str(k) for k in range(6)]
        np.testing.assert_allclose(data["mlp"], table["mlp"])
        ends = np.array([data[f"{t}_{end}"] for t in TERMS for end in ("top", "bottom")])
        np.testing.assert_allclose(ends.max(axis=0) + ends.min(axis=0), 1.0, atol=1e-9)  # + above 0, - below
    with pytest.raises(ValueError, match="by head"):
        plots.term_shares(rows.assign(from_layer=-1))
    result = pd.DataFrame({"layer": [0, 1, 0, 1], "term": ["head", "head", "mlp", "mlp"], "rho": [1, 0.5, 0.2, -0.1]})
    fig = plots.compare_models(result).children[0]
    assert sum(isinstance(r.glyph, Line) for r in fig.renderers) == 2
    assert sum(isinstance(r.glyph, Scatter) for r in fig.renderers) == 2
    assert list(fig.select(name="model_rho_mlp")[0].data["rho"]) == [0.2, -0.1]
    with pytest.raises(ValueError, match="empty"):
        plots.compare_models(result.iloc[:0])


def test_a_loaded_model_runs_under_the_default_client(rows, minilm):
    """A LoadedModel cannot be pickled (transformers leaves an output-capturing hook on it); the default client
    (a local cluster of threads in this process) takes it as it is, and the rows are the in-process ones."""
    pytest.importorskip("distributed")
    import pickle

    with pytest.raises(Exception, match="output_capturing_hook"):
        pickle.dumps(minilm)
    got = term_shares(TEXTS[:2], minilm, progress=False)
    pd.testing.assert_frame_equal(got, rows[rows["text"] < 2].reset_index(drop=True), check_exact=True)


def test_workers_in_other_processes_refuse_it_naming_what_works(minilm):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
        pytest.raises(TypeError, match=r"cannot be pickled.*client='sync' or client='threads'"),
    ):
        term_shares(TEXTS[:1], minilm, client=client, progress=False)


@pytest.mark.parametrize("layers", [torch.tensor(1), torch.tensor([0, 1]), 1.0, "1", [0, 1.5], {"a": 1}])
def test_layers_are_checked_before_the_model_loads(layers):
    """Not torch's "iteration over a 0-d tensor": a TypeError naming what was given, before any model loads."""
    with pytest.raises(TypeError, match=r"layers must be None .*, an int or a list of ints, got"):
        term_shares(["The cat sat."], "/no/such/model", layers=layers, client="sync", progress=False)


def test_layers_as_numpy_ints_and_a_range_are_taken(minilm_path, rows):
    got = term_shares(TEXTS[:1], minilm_path, layers=np.array([0, 5]), client="sync", progress=False)
    also = term_shares(TEXTS[:1], minilm_path, layers=range(0, 6, 5), client="sync", progress=False)
    expected = rows[(rows["text"] == 0) & rows["layer"].isin([0, 5])].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    pd.testing.assert_frame_equal(also, expected, check_exact=True)
