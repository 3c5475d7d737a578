"""The widget's n x n memory at long texts stays under the ceiling it states (issue 23).

Below ``SPARSE_MIN_TOKENS`` (4096) kept tokens every n x n array a widget makes is leased from its workspace
(headsne_widget/widget/workspace.py: ``MAX_ARRAYS`` arrays of 4 n^2 bytes at most: 427 MiB at 4000 tokens), beside
the extraction's cache of whole heads (capture/sources.py: ``DENSE_BUDGET_BYTES``, 512 MiB, evicted beyond); from
there on the runs take a sparse P and lease none (widget/selections.py), so the same bound holds with room to
spare. A scripted session of hovers (the P of the row the pointer rests on, built ahead), clicks that take it
or build their own, the atlas started and stopped, and close, must never hold more; measured with tracemalloc
(numpy's allocations are traced), and after close nothing is left. (16384 tokens, sparse on this causal
model's broad rows, took over 10 minutes with another process on both cores: the sparse path's own memory
is held by tests/test_widget_long.py.)"""

from __future__ import annotations

import gc
import tracemalloc
import warnings

import numpy as np
import pytest
from recording_comm import wait_until
from widget_probes import slot_idle

from headsne_widget.capture.extraction import extract
from headsne_widget.capture.sources import DENSE_BUDGET_BYTES
from headsne_widget.embedding.background import start_warmup
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.workspace import MAX_ARRAYS

MIB = 2**20


def numpy_bytes() -> int:
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)])
    return sum(stat.size for stat in snapshot.statistics("filename"))


@pytest.mark.parametrize("n", [4000, 8192])
def test_hovers_clicks_atlas_and_close_stay_under_the_ceiling(make, long_llama_dir, n):
    start_warmup().join()
    words = TSNE_ABSTRACT.split()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = extract(" ".join(words[i % len(words)] for i in range(n + 400)), long_llama_dir, max_tokens=n)
    assert ex.n_tokens == n
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        w, c = make(ex, autostart=False, n_iter=10, speed=0.0)
        c.from_browser(hovered_head=[1, 2])  # the P of that row, built ahead
        wait_until(lambda: slot_idle("prefetch"), 120, "the hovered row's P")
        c.from_browser(layer=1, head=2)  # the click takes it
        c.from_browser(hovered_head=[0, 3])  # another row, built while the run goes on
        w.wait(300)
        c.from_browser(layer=0, head=1)  # a click on a row not hovered: builds its own P
        c.control("atlas")  # the atlas's A and P too
        wait_until(lambda: w.atlas_state == "running", 60, "the atlas")
        c.from_browser(hovered_head=[1, 0])
        w.wait(300)
        c.control("atlas_stop")
        w.close()
        wait_until(lambda: all(slot_idle(s) for s in ("run", "prefetch", "atlas", "partners", "load")), 60, "the jobs")
        peak = tracemalloc.get_traced_memory()[1] - before
        max_attention = ex.max_attention.nbytes
        del ex  # the extraction's cache of whole heads goes with it (and the widget's references to it)
        w = c = None
        gc.collect()
        left = numpy_bytes()
    finally:
        tracemalloc.stop()
    ceiling = MAX_ARRAYS * 4 * n * n + DENSE_BUDGET_BYTES
    assert peak <= ceiling + 64 * MIB, f"peak {peak / MIB:.0f} MiB above the {ceiling / MIB:.0f} MiB ceiling"
    assert left < 16 * MIB + max_attention, f"{left / MIB:.0f} MiB of arrays left after close"
    print(f"n = {n}: peak {peak / MIB:.0f} MiB (ceiling {ceiling / MIB:.0f} MiB)")
