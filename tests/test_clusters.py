"""The map's clusters and their names (issue 52, item 7): :func:`headsne_widget.widget.clusters.cluster_labels` finds
planted blobs and names each by its own tokens, and the widget fills ``cluster_names`` / ``cluster_of`` when a run
ends with ``cluster_labels`` on (nothing when it is off), and clears them when a new run starts."""

from __future__ import annotations

import numpy as np
import pytest
from recording_comm import wait_until

from headsne_widget.capture.extraction import Extraction, extract
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.clusters import cluster_labels


def _blobs(seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Two Gaussian blobs 10 standard deviations apart, each of its own words, and one word common to both."""
    rng = np.random.default_rng(seed)
    Y = np.vstack([rng.normal(0.0, 1.0, (120, 2)), rng.normal((10.0, 3.0), 1.0, (80, 2))])
    west = ["river", "water", "shore", "the"] * 30
    east = ["##money", "loan", "the", "money"] * 20
    return Y, west + east


def test_two_planted_blobs_are_two_clusters_each_named_by_its_own_tokens():
    Y, tokens = _blobs()
    names, of = cluster_labels(Y, tokens)
    assert len(names) == 2 and of.dtype == np.int32 and of.shape == (200,)
    assert (of[:120] == 0).mean() > 0.75 and (of[120:] == 1).mean() > 0.75, "each blob its cluster, largest first"
    assert set(of[:120]) <= {0, -1} and set(of[120:]) <= {1, -1}, "no point in the other blob's cluster"
    assert set(names[0].split(", ")) == {"river", "water", "shore"}
    assert names[1].split(", ")[0] == "money", "the word filling the cluster (as a word piece too) first"
    assert "the" not in ", ".join(names), "a word spread over both names neither"


def test_the_clusters_follow_the_map_not_its_scale_and_skipped_points_only_leave_the_names():
    Y, tokens = _blobs(1)
    names, of = cluster_labels(Y, tokens)
    names_moved, of_moved = cluster_labels(1e-4 * Y + 5.0, tokens)  # a t-SNE map's scale changes through a run
    assert names_moved == names and np.array_equal(of_moved, of)
    turn = np.array([[0.6, -0.8], [0.8, 0.6]])  # the grid is axis-aligned: a turn moves only border points
    names_turned, of_turned = cluster_labels(Y @ turn, tokens)
    assert names_turned == names and (of_turned == of).mean() > 0.95
    skip = [t in ("river", "money", "##money") for t in tokens]
    names_skipped, of_skipped = cluster_labels(Y, tokens, skip=skip)
    assert np.array_equal(of_skipped, of) and "river" not in names_skipped[0] and "money" not in names_skipped[1]


def test_one_blob_is_one_cluster_or_none_and_tiny_inputs_are_no_error():
    rng = np.random.default_rng(2)
    names, of = cluster_labels(rng.normal(0.0, 1.0, (300, 2)), ["a", "b", "c"] * 100)
    assert len(names) <= 1 and set(of) <= {0, -1}
    for m in (0, 1, 3):
        names, of = cluster_labels(rng.normal(0.0, 1.0, (m, 2)), ["x"] * m)
        assert names == [] and of.shape == (m,) and (of == -1).all()
    names, of = cluster_labels(np.zeros((50, 2)), ["x"] * 50)  # every point at one place
    assert len(names) == 1 and (of == 0).all()
    Y, tokens = _blobs()
    Y[:5] = np.nan
    names, of = cluster_labels(Y, tokens)
    assert len(names) == 2 and (of[:5] == -1).all()
    with pytest.raises(ValueError, match=r"\(m, 2\) embedding and m tokens"):
        cluster_labels(np.zeros((4, 3)), ["x"] * 4)


def test_point_labels_name_the_points_they_label():
    Y, tokens = _blobs()
    labels = ["river bank"] * 120 + ["central bank"] * 80
    names, _ = cluster_labels(Y, ["bank"] * 200, labels=labels)
    assert names == ["river", "central"]


@pytest.fixture(scope="module")
def ex(tiny_bert) -> Extraction:
    return extract(TSNE_ABSTRACT[:400], tiny_bert)


def test_a_finished_run_names_its_maps_clusters(ex, make):
    w, _ = make(ex, n_iter=300)
    assert w.wait() is not None and w.state == "done"
    names, of = w.cluster_names, w.cluster_of
    assert names and all(isinstance(n, str) for n in names)
    assert of is not None and of.dtype == np.int32 and of.shape == (len(w.kept),)
    assert of.min() >= -1 and of.max() < len(names)
    assert set(range(len(names))) <= set(of.tolist()), "every cluster named has members"
    expected, expected_of = cluster_labels(
        w.embedding, [w.tokens[i] for i in w.kept], skip=[w.special[i] for i in w.kept]
    )
    assert names == expected and np.array_equal(of, expected_of)
    w.n_iter = 5000  # a new run: the last one's clusters go at its start, and a stop names its map's
    wait_until(lambda: w.state == "running" and 0 < w.iteration < 300, 60, "the new run's first frames")
    assert w.cluster_names == [] and w.cluster_of is None
    w.stop()
    w.wait()
    assert w.state == "idle" and w.cluster_names and len(w.cluster_of) == len(w.kept)


def test_no_clusters_when_cluster_labels_is_off(ex, make):
    w, _ = make(ex, n_iter=300, cluster_labels=False)
    assert w.wait() is not None and w.state == "done"
    assert w.cluster_names == [] and w.cluster_of is None


def test_turning_cluster_labels_on_after_a_run_names_the_map_shown_at_once(ex, make):
    w, _ = make(ex, n_iter=300, cluster_labels=False)
    assert w.wait() is not None and w.state == "done" and w.cluster_names == []
    w.cluster_labels = True  # as the settings tab's box writes it: no new run
    assert w.state == "done" and w.cluster_names, "named at once, not at the next run's end"
    expected, expected_of = cluster_labels(
        w.embedding, [w.tokens[i] for i in w.kept], skip=[w.special[i] for i in w.kept]
    )
    assert w.cluster_names == expected and np.array_equal(w.cluster_of, expected_of)
    w.cluster_labels = False  # off: the names go with it
    assert w.cluster_names == [] and w.cluster_of is None
