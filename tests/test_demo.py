"""demo.ipynb runs top to bottom, offline, with the bundled model, and is committed without outputs."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "demo.ipynb"


def outputs_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out:
            parts.append(str(out["data"].get("text/plain", "")))
    return "".join(parts)


def test_demo_is_committed_without_outputs():
    nb = nbformat.read(DEMO, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "the demo has no code cells"
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    source = "\n".join(c.source for c in code)
    for needed in (
        "HeadSNE(TSNE_ABSTRACT)",
        "plots.max_attention",
        "analyses.kl_by_layer",
        "analyses.robustness",
        "analyses.word_embeddings",
        "output_notebook",
        "ex.model_name",
        "HeadSNE.contexts",
        "centroid_accuracy",
        "relation_heads_map",
    ):
        assert needed in source, needed


def test_demo_executes_offline(monkeypatch, minilm_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("BOKEH_RESOURCES", "inline")
    nb = nbformat.read(DEMO, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=400,
        kernel_name="python3",
        resources={"metadata": {"path": str(REPO)}},
        allow_errors=False,
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    seconds = time.perf_counter() - start
    print(f"demo.ipynb executed in {seconds:.1f} s")
    text = "\n".join(outputs_text(c) for c in nb.cells if c.cell_type == "code")
    from headsne_widget.capture.extraction import BUNDLED_MODEL_NAME

    assert f"model used: {BUNDLED_MODEL_NAME}" in text  # offline: the bundled model, and the notebook says so
    assert "standalone page written to" in text
    assert "runs in" in text and "tokens replaced in each repeat" in text
    # every bokeh figure reached the notebook as a rendered document, with bokeh's JS inlined (no CDN)
    bokeh_outputs = [
        out
        for c in nb.cells
        if c.cell_type == "code"
        for out in c.outputs
        if "application/vnd.bokehjs_exec.v0+json" in out.get("data", {})
    ]
    assert len(bokeh_outputs) >= 5
    assert "cdn.bokeh.org" not in "".join(str(o) for c in nb.cells for o in c.get("outputs", []))
    # no stray progress bars: not transformers' "Loading weights" (its bar, as text, widget or stderr), and
    # none at all in the cells that load the model and show the widget, which take a second or two
    everything = "".join(str(o) for c in nb.cells for o in c.get("outputs", []))
    assert "Loading weights" not in everything, "a model-loading progress bar reached the demo's outputs"
    for cell in nb.cells:
        if cell.cell_type == "code" and ("HeadSNE(" in cell.source or "extract(" in cell.source):
            shown = "".join(str(o) for o in cell.outputs)
            assert not re.search(r"\d+%\|", shown), f"a progress bar in the cell {cell.source[:60]!r}: {shown[:300]}"
