"""The head a widget opens on (issue 52, item 4): without ``head=`` a mode with heads opens on the head whose attention
is most concentrated on tokens the text decides (``opening_head``), never on a head of a fixed pattern (the first or
special tokens, the query itself or its neighbours), and the status says so; ``layer=`` alone chooses within that
layer; ``head=`` (and ``layer=``) given, or a mode without heads, open where they always did."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from headsne_widget.capture.scores import SCORES
from headsne_widget.widget.loading import OPENING_NOTE, opening_head

NAMES = list(SCORES)


def _table(rows: list[dict[str, float]]) -> np.ndarray:
    """Scores (1, H, S) of one layer's heads, each a dict of the scores it sets (the rest 0)."""
    return np.array([[[row.get(name, 0.0) for name in NAMES] for row in rows]], dtype=np.float64)


def test_the_opening_head_is_the_most_focused_head_of_no_fixed_pattern():
    rows = [
        {"sink": 0.9, "special": 0.9, "entropy": 0.1},  # a sink: the lowest entropy of all
        {"local": 0.8, "previous": 0.6, "entropy": 0.2},  # a previous-token head
        {"sink": 0.1, "special": 0.1, "local": 0.1, "entropy": 0.5},  # focused: (1 - 0.2) x 0.5 = 0.40
        {"sink": 0.0, "special": 0.0, "local": 0.05, "entropy": 0.55},  # focused: 0.95 x 0.45 = 0.43
        {"entropy": 0.9},  # broad: 0.1
    ]
    kinds = ["sink", "previous", "focused", "focused", "broad"]
    assert opening_head(_table(rows), NAMES, kinds) == (0, 3)
    assert opening_head(_table(rows), NAMES, ["sink", "previous", "focused", "local", "broad"]) == (0, 2)
    # every head of a fixed kind: the most focused of them all (the sink's attention is on a fixed token: 0.09)
    assert opening_head(_table(rows), NAMES, ["sink", "previous", "local", "local", "self"]) == (0, 3)
    # a score missing (-1 in the trait, NaN in the table) never wins
    missing = _table(rows)
    missing[0, 3, NAMES.index("entropy")] = -1.0
    assert opening_head(missing, NAMES, kinds) == (0, 2)
    # within the layer asked for; none without scores or for a layer out of range
    two = np.concatenate([_table(rows[:2] + [{"entropy": 0.8}] * 3), _table(rows)])
    assert opening_head(two, NAMES, kinds + kinds) == (1, 3)
    assert opening_head(two, NAMES, kinds + kinds, layer=0) == (0, 2)
    assert opening_head(None, NAMES, []) is None and opening_head(two, NAMES, kinds + kinds, layer=2) is None


def _oracle(table: pd.DataFrame, layer: int | None = None) -> tuple[int, int]:
    """The rule, computed from ``w.head_scores`` (the table a user reads) with pandas."""
    fixed = (table[["sink", "special"]].max(axis=1) + table["local"]).clip(upper=1.0)
    table = table.assign(focus=(1 - fixed) * (1 - table["entropy"]))
    table = table[~table["kind"].isin(["sink", "previous", "next", "self", "special", "local"])]
    if layer is not None:
        table = table[table["layer"] == layer]
    best = table.sort_values(["focus", "layer", "head"], ascending=[False, True, True]).iloc[0]
    return int(best["layer"]), int(best["head"])


@pytest.fixture(scope="module")
def scores(abstract_ex) -> pd.DataFrame:
    from headsne_widget.capture.scores import head_scores

    return head_scores(abstract_ex)


def test_minilm_opens_on_its_most_focused_head_and_says_so(abstract_ex, scores, make):
    w, _ = make(abstract_ex, autostart=False)
    w.wait_ready()
    opened = (w.layer, w.head)
    assert opened == _oracle(scores) == (2, 4), scores.loc[scores["kind"] == "focused"].head()
    assert scores.set_index(["layer", "head"]).loc[opened, "kind"] == "focused"
    assert OPENING_NOTE in w.status
    w.run()
    w.n_iter = 60
    w.wait()
    assert w.status.startswith("done layer 2 head 4") and OPENING_NOTE in w.status, w.status
    w.head = 5  # another head chosen: the note goes, and does not come back with the head it opened on
    w.wait()
    assert OPENING_NOTE not in w.status
    w.head = 4
    w.wait()
    assert OPENING_NOTE not in w.status


@pytest.mark.parametrize(
    "given, expected",
    [
        (dict(layer=4, head=7), (4, 7)),
        (dict(head=3), (0, 3)),
        (dict(layer=5), None),  # the most focused head of layer 5
        (dict(mode="hidden"), (0, 0)),
    ],
)
def test_a_head_or_layer_given_opens_where_it_always_did(abstract_ex, scores, make, given, expected):
    w, _ = make(abstract_ex, autostart=False, **given)
    w.wait_ready()
    assert (w.layer, w.head) == (expected or _oracle(scores, given["layer"]))
    assert (OPENING_NOTE in w.status) == ("head" not in given and "mode" not in given)


def test_a_layer_out_of_range_is_still_refused_at_once(abstract_ex):
    from headsne_widget import HeadSNE

    with pytest.raises(Exception, match="layer"):
        HeadSNE(abstract_ex, layer=6)
