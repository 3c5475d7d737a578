"""Which head over a corpus and in bokeh: corpus_study(scores=True), score_summary, plots.head_map."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_head_scores import planted_gpt2

from headsne_widget import extract, head_scores, plots
from headsne_widget.capture.scores import SCORES
from headsne_widget.studies.corpus import SCORE_SUMMARY_COLUMNS, corpus_study, score_summary

TEXTS = ["The cat sat on the mat.", "Attention heads look at tokens.", "A short third text here."]


def test_corpus_scores_are_each_texts_head_scores(minilm_path):
    rows = corpus_study(TEXTS, minilm_path, client="sync", scores=True, kl=False, progress=False)
    assert set(rows["method"]) == {"attention"} and rows["kl"].isna().all() and (rows["runs"] == 0).all()
    assert len(rows) == len(TEXTS) * 6 * 12
    for index, text in enumerate(TEXTS):
        expected = head_scores(extract(text, minilm_path))
        got = rows[rows["text"] == index].reset_index(drop=True)
        np.testing.assert_allclose(got[list(SCORES)].to_numpy(), expected[list(SCORES)].to_numpy(), atol=1e-6)
        assert got["kind"].tolist() == expected["kind"].tolist()
    summary = score_summary(rows)
    assert list(summary.columns[: len(SCORE_SUMMARY_COLUMNS)]) == list(SCORE_SUMMARY_COLUMNS)
    assert len(summary) == 72 and (summary["texts"] == 3).all()
    first = rows[(rows["layer"] == 0) & (rows["head"] == 2)]
    head = summary[(summary["layer"] == 0) & (summary["head"] == 2)].iloc[0]
    assert head["sink_mean"] == pytest.approx(first["sink"].mean()) and head["sink_min"] == first["sink"].min()
    assert head["kind_share"] == pytest.approx(first["kind"].value_counts().iloc[0] / 3)


def test_planted_sink_is_a_sink_in_every_text(tiny_gpt2, tmp_path):
    path = planted_gpt2(tiny_gpt2.tokenizer, tmp_path)
    rows = corpus_study(TEXTS, path, client="sync", scores=True, kl=False, progress=False)
    summary = score_summary(rows)
    sinks = summary[(summary["kind"] == "sink") & (summary["kind_share"] == 1.0)]
    assert (0, 2) in set(zip(sinks["layer"], sinks["head"]))
    previous = summary[(summary["layer"] == 0) & (summary["head"] == 1)].iloc[0]
    assert previous["kind"] == "previous" and previous["kind_share"] == 1.0 and previous["previous_min"] > 0.99


def test_scores_alongside_kl_and_bad_input(minilm_path):
    rows = corpus_study(TEXTS[:1], minilm_path, client="sync", scores=True, layers=[0], heads=[2], runs=1,
                        n_iter=50, progress=False)  # fmt: skip
    attention = rows[rows["method"] == "attention"].iloc[0]
    assert np.isfinite(attention["kl"]) and attention["kind"] == "previous"
    assert rows[rows["method"] == "hidden"]["kind"].isna().all()
    with pytest.raises(ValueError, match="kl=False computes no KL"):
        corpus_study(TEXTS, minilm_path, client="sync", kl=False, progress=False)
    with pytest.raises(ValueError, match="scores=True"):
        score_summary(corpus_study(TEXTS[:1], minilm_path, client="sync", layers=[0], heads=[0], runs=1, n_iter=20,
                                   progress=False))  # fmt: skip


def test_plots_head_map(abstract_ex):
    layout = plots.head_map(abstract_ex)
    source = layout.select_one({"name": "head_map"})
    table = head_scores(abstract_ex)
    assert len(source.data["x"]) == 72 and source.data["kind"] == table["kind"].tolist()
    assert source.data["sink"] == pytest.approx(table["sink"].tolist())
    placed = plots.head_map(table)  # a table without positions: placed by the scores' principal components
    data = placed.select_one({"name": "head_map"}).data
    assert np.ptp(data["x"]) > 0 and np.ptp(data["y"]) > 0
    own = plots.head_map(table.assign(x=np.arange(72.0), y=np.zeros(72)))
    assert own.select_one({"name": "head_map"}).data["x"] == list(np.arange(72.0))
    with pytest.raises(TypeError, match="Extraction or a table"):
        plots.head_map([1, 2, 3])
    with pytest.raises(ValueError, match="lacks the columns"):
        plots.head_map(pd.DataFrame({"layer": [0], "head": [0]}))
