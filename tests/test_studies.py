"""The corpus study on the bundled real MiniLM, in-process and on a real LocalCluster of two worker processes."""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import signal
import threading
import time
import warnings

import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from headsne_widget import plots  # noqa: E402
from headsne_widget.errors import TextTooLongError  # noqa: E402
from headsne_widget.studies.corpus import COLUMNS, SUMMARY_COLUMNS, corpus_study, head_summary  # noqa: E402
from headsne_widget.texts import CORPUS  # noqa: E402

TEXTS = [CORPUS[i] for i in (1, 24, 60, 71, 84, 95)]  # science, everyday, dialogue, list, code, question
SETTINGS = dict(heads=[0, 5], layers=[0, 3], runs=2, n_iter=200, seed=7, progress=False)
SHORT = "Hi."  # [CLS] hi . [SEP]: 4 tokens, but 2 without the special ones


@pytest.fixture(scope="module")
def client():
    """A real local cluster: two worker processes with one thread each, started once for this module."""
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def rows(minilm_path):
    """The in-process rows (no Dask) that every other way of running must reproduce."""
    return corpus_study(TEXTS, minilm_path, client="sync", **SETTINGS)


def text_rows(frame: pd.DataFrame, index: int) -> pd.DataFrame:
    return frame[frame["text"] == index].reset_index(drop=True)


# ------------------------------------------------------------------------------------------- the rows


def test_rows_are_tidy(rows, minilm):
    layers, heads = SETTINGS["layers"], SETTINGS["heads"]
    assert list(rows.columns) == list(COLUMNS)
    assert len(rows) == len(TEXTS) * len(layers) * (len(heads) + 1)
    assert str(rows["head"].dtype) == "Int64"
    hidden = rows[rows["method"] == "hidden"]
    attention = rows[rows["method"] == "attention"]
    assert hidden["head"].isna().all() and not attention["head"].isna().any()
    assert attention["perplexity"].isna().all()
    for index, text in enumerate(TEXTS):
        n = len(minilm.tokenizer(text)["input_ids"])
        one = rows[rows["text"] == index]
        assert set(one["n_tokens"]) == {n}
        assert sorted(set(zip(one["layer"], one["method"], one["head"].fillna(-1)))) == sorted(
            [(layer, "attention", head) for layer in layers for head in heads]
            + [(layer, "hidden", -1) for layer in layers]
        )
        # the selection policy's perplexity: 20 lowered to (n - 1) / 3 for these short texts
        assert np.allclose(one.loc[one["method"] == "hidden", "perplexity"], min(20.0, (n - 1) / 3))
    assert np.all(np.isfinite(rows["kl"])) and np.all(rows["kl"] > 0)
    assert (rows["runs"] == SETTINGS["runs"]).all()


def test_a_row_is_the_best_of_runs_of_that_head_with_its_derived_seed(rows, minilm):
    from headsne_widget.affinity.selection import selection_affinities
    from headsne_widget.capture.extraction import extract
    from headsne_widget.studies.analyses import _tsne_kls, study_seed

    index, layer, head, runs, n_iter = 2, 3, 5, SETTINGS["runs"], SETTINGS["n_iter"]
    ex = extract(TEXTS[index], minilm)
    attention = selection_affinities(ex, "attention", layer, head).P
    hidden = selection_affinities(ex, "hidden", layer, perplexity=20.0).P
    one = rows[(rows["text"] == index) & (rows["layer"] == layer)]
    assert (
        one.loc[one["head"] == head, "kl"].item()
        == _tsne_kls(attention, runs, n_iter, study_seed(7, index, layer, head)).min()
    )
    assert (
        one.loc[one["method"] == "hidden", "kl"].item()
        == _tsne_kls(hidden, runs, n_iter, study_seed(7, index, layer, 12)).min()
    )


def test_seed_changes_every_kl(rows, minilm_path):
    other = corpus_study(TEXTS[:2], minilm_path, client="sync", **{**SETTINGS, "seed": 8})
    assert (other["kl"].to_numpy() != rows[rows["text"] < 2]["kl"].to_numpy()).all()


def test_a_pandas_series_is_read_in_order(rows, minilm_path):
    series = pd.Series(TEXTS[:3], index=[30, 10, 20], name="sentence")
    got = corpus_study(series, minilm_path, client="sync", **SETTINGS)
    pd.testing.assert_frame_equal(got, rows[rows["text"] < 3].reset_index(drop=True), check_exact=True)


# -------------------------------------------------------------------------------------------- on Dask


def test_cluster_rows_equal_the_in_process_rows(rows, client, minilm_path):
    """Two worker processes (the numba kernels and torch in other processes) give bit-identical KLs."""
    got = corpus_study(TEXTS, minilm_path, client=client, **SETTINGS)
    pd.testing.assert_frame_equal(got, rows, check_exact=True)


def test_thread_rows_equal_the_in_process_rows(rows, minilm_path):
    got = corpus_study(TEXTS, minilm_path, client="threads", **SETTINGS)
    pd.testing.assert_frame_equal(got, rows, check_exact=True)


def test_the_session_client_is_the_default(rows, client, minilm_path):
    with distributed.Client(client.scheduler.address) as default, distributed.get_task_stream(default) as stream:
        got = corpus_study(TEXTS[:2], minilm_path, **SETTINGS)  # client=None: the session's client
    pd.testing.assert_frame_equal(got, rows[rows["text"] < 2].reset_index(drop=True), check_exact=True)
    assert sum(str(task["key"]).startswith("corpus_study-") for task in stream.data) == 2


def test_without_a_session_client_the_default_runs_on_local_threads(rows, minilm_path):
    with pytest.raises(ValueError):
        distributed.default_client()
    got = corpus_study(TEXTS[:2], minilm_path, **SETTINGS)
    pd.testing.assert_frame_equal(got, rows[rows["text"] < 2].reset_index(drop=True), check_exact=True)


def test_progress_bar_counts_every_text(client, minilm_path, capsys):
    texts = [*TEXTS[:3], SHORT]
    with pytest.warns(UserWarning, match="1 of 4 texts skipped"):
        corpus_study(texts, minilm_path, client=client, **{**SETTINGS, "progress": True, "exclude_special": True})
    counts = re.findall(r"(\d+)/(\d+)", capsys.readouterr().err)
    assert counts, "no progress bar was drawn"
    assert counts[-1] == ("4", "4")


def test_a_worker_killed_mid_study_costs_nothing(rows, client, minilm_path):
    """Kill (SIGKILL) a worker that holds tasks as soon as the first text is back: every row still arrives."""
    killed: list[int] = []

    def kill_a_busy_worker(_rows):
        if killed:
            return
        pids = client.run(os.getpid)
        address, tasks = max(client.processing().items(), key=lambda kv: len(kv[1]))
        assert tasks, "no worker had a task in flight when the first text came back"
        os.kill(pids[address], signal.SIGKILL)
        killed.append(pids[address])

    got = corpus_study(TEXTS, minilm_path, client=client, on_text=kill_a_busy_worker, **SETTINGS)
    assert killed and killed[0] not in client.run(os.getpid).values()
    pd.testing.assert_frame_equal(got, rows, check_exact=True)
    client.wait_for_workers(2, timeout=120)  # the nanny's new worker, before the next test uses the cluster


def test_ctrl_c_keeps_the_finished_rows_and_cancels_the_rest(rows, client, minilm_path):
    def interrupt(_rows):
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends

    def study_tasks(dask_scheduler):
        return [key for key in dask_scheduler.tasks if str(key).startswith("corpus_study-")]

    # Only this study's tasks count: after a killed worker the scheduler may keep another study's key a while.
    before = set(client.run_on_scheduler(study_tasks))
    with pytest.warns(RuntimeWarning, match="interrupted: returning the rows of the 1 texts finished"):
        got = corpus_study(TEXTS, minilm_path, client=client, on_text=interrupt, **SETTINGS)
    assert got["text"].nunique() == 1
    pd.testing.assert_frame_equal(got, text_rows(rows, int(got["text"].iloc[0])), check_exact=True)

    def left() -> set[str]:
        return set(client.run_on_scheduler(study_tasks)) - before

    deadline = time.monotonic() + 60  # the cancelled tasks leave the scheduler
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left() == set()


def test_a_closed_client_is_refused(client, minilm_path):
    other = distributed.Client(client.scheduler.address, set_as_default=False)
    other.close()
    with pytest.raises(RuntimeError, match="client is closed"):
        corpus_study(TEXTS[:1], minilm_path, client=other, **SETTINGS)


def test_a_model_object_that_cannot_be_pickled_is_refused(client, tiny_bert):
    model = copy.deepcopy(tiny_bert.model)
    model.lock = threading.Lock()  # something that cannot travel
    loaded = dataclasses.replace(tiny_bert, model=model)
    with pytest.raises(TypeError, match="pass the model's directory or hub id"):
        corpus_study(TEXTS[:1], loaded, client=client, **{**SETTINGS, "layers": [0], "heads": [0, 1]})
    assert len(corpus_study(TEXTS[:1], loaded, client="sync", **{**SETTINGS, "layers": [0], "heads": [0, 1]})) == 3


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("empty", [[], (), pd.Series([], dtype=object), iter([])])
def test_an_empty_corpus_is_refused(empty, minilm_path):
    with pytest.raises(ValueError, match="corpus is empty"):
        corpus_study(empty, minilm_path, client="sync")


@pytest.mark.parametrize(
    ("texts", "message"),
    [("one string", "not one string"), ([TEXTS[0], 3], r"texts\[1\] is a int"), ([TEXTS[0], None], r"texts\[1\]")],
)
def test_non_strings_are_refused(texts, message, minilm_path):
    with pytest.raises(TypeError, match=message):
        corpus_study(texts, minilm_path, client="sync")


def test_short_texts_are_skipped_with_one_warning(rows, minilm_path):
    texts = [TEXTS[0], "", SHORT, TEXTS[1], "   "]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = corpus_study(texts, minilm_path, client="sync", **{**SETTINGS, "exclude_special": True})
    skipped = [w for w in caught if "skipped" in str(w.message)]
    assert len(skipped) == 1 and "3 of 5 texts skipped" in str(skipped[0].message)
    assert sorted(set(got["text"])) == [0, 3]
    with pytest.warns(UserWarning, match="1 of 1 texts skipped"):
        assert corpus_study([""], minilm_path, client="sync", **SETTINGS).empty


def test_a_text_too_long_is_refused_or_truncated(minilm_path):
    long = " ".join(["word"] * 600)
    with pytest.raises(TextTooLongError, match="max_tokens"):
        corpus_study([TEXTS[0], long], minilm_path, client="sync", **SETTINGS)
    with pytest.warns(UserWarning, match="2 of 2 texts truncated to max_tokens=16"):
        got = corpus_study([TEXTS[0], long], minilm_path, client="sync", max_tokens=16, **SETTINGS)
    assert set(got["n_tokens"]) == {16}


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        (dict(client="cluster"), ValueError),
        (dict(client=42), TypeError),
        (dict(heads=[12]), ValueError),
        (dict(layers=[]), ValueError),
        (dict(heads=[1, 1]), ValueError),
        (dict(runs=0), ValueError),
        (dict(perplexity=0), ValueError),
        (dict(max_tokens=0), ValueError),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, minilm_path):
    with pytest.raises(error):
        corpus_study(TEXTS[:1], minilm_path, **{**SETTINGS, "client": "sync", **kwargs})


# -------------------------------------------------------------------------------------------- summary


def test_head_summary_of_known_values():
    rows = pd.DataFrame(
        {
            "text": [0, 1, 2, 3, 0, 1, 2, 3, 0, 1],
            "layer": [0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
            "method": ["attention"] * 8 + ["hidden"] * 2,
            "head": pd.array([2, 2, 2, 2, 0, 0, 0, 0, None, None], dtype="Int64"),
            "kl": [4.0, 1.0, 3.0, 2.0, 0.5, 0.5, 0.7, 0.9, 5.0, 7.0],
        }
    )
    got = head_summary(rows)
    assert list(got.columns) == list(SUMMARY_COLUMNS)
    assert got[["layer", "head"]].values.tolist() == [[0, 2], [1, 0]]
    assert got["median"].tolist() == [2.5, 0.6]
    assert got["q1"].tolist() == [1.75, 0.5] and got["q3"].tolist() == pytest.approx([3.25, 0.75])
    assert got["iqr"].tolist() == pytest.approx([1.5, 0.25])
    assert got["rank"].tolist() == [2, 1] and got["texts"].tolist() == [4, 4]
    assert np.isnan(got["hidden_median"][0]) and got["hidden_median"][1] == 6.0


def test_head_summary_of_a_study(rows):
    got = head_summary(rows)
    assert len(got) == len(SETTINGS["layers"]) * len(SETTINGS["heads"])
    medians = rows[rows["method"] == "attention"].groupby(["layer", "head"])["kl"].median().to_numpy()
    assert np.array_equal(got["median"].to_numpy(), medians)
    assert got.loc[got["rank"] == 1, "median"].item() == medians.min()
    assert sorted(got["rank"]) == list(range(1, len(got) + 1))
    with pytest.raises(ValueError, match="no attention"):
        head_summary(rows[rows["method"] == "hidden"])


def test_heat_map_of_the_summary(rows):
    from bokeh.models import HoverTool, LinearColorMapper
    from bokeh.palettes import Viridis256

    summary = head_summary(rows)
    layout = plots.corpus_heads(summary)
    source = layout.select_one({"name": "corpus_heads"})
    assert list(source.data["median"]) == list(summary["median"])
    assert list(source.data["rank"]) == list(summary["rank"])
    assert list(source.data["iqr"]) == list(summary["iqr"])
    (hover,) = layout.select({"type": HoverTool})
    labels = " ".join(label for label, _ in hover.tooltips)
    assert all(word in labels for word in ("median", "IQR", "rank"))
    (mapper,) = layout.select({"type": LinearColorMapper})
    assert tuple(mapper.palette) == tuple(Viridis256)  # the max-attention grids' palette
    best = summary.loc[summary["rank"] == 1].iloc[0]
    outline = layout.select_one({"name": "corpus_heads_best"}).data
    assert (outline["x"], outline["y"]) == ([str(int(best["head"]))], [str(int(best["layer"]))])
    full = pd.DataFrame(
        [dict(row, layer=layer, head=head) for layer in range(6) for head in range(12) for row in [summary.iloc[0]]]
    )
    (figure,) = plots.corpus_heads(full).children
    assert figure.width <= plots.OUTPUT_WIDTH and figure.height <= 640


def test_without_dask_the_corpus_study_names_the_extra_and_runs_in_process(tiny_bert, monkeypatch):
    """Dask is an extra (pip install 'headsne-widget[dask]'): without it a cluster run says what to install,
    and client="sync" still runs."""
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    with pytest.raises(ImportError, match=r"headsne-widget\[dask\]"):
        corpus_study(CORPUS[:2], tiny_bert, heads=[0], runs=1, n_iter=20, progress=False, client="threads")
    rows = corpus_study(CORPUS[:2], tiny_bert, heads=[0], runs=1, n_iter=20, progress=False, client="sync")
    assert sorted(rows["text"].unique()) == [0, 1]
