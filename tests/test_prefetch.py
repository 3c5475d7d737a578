"""Work done before a click asks for it (headsne_widget/prefetch.py): the P of the grid row the pointer
rests on, built in a background thread and taken by the click."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from recording_comm import wait_until

from headsne_widget.affinity.selection import selection_affinities
from headsne_widget.capture.extraction import extract
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.prefetch import PREFETCH_MIN_N, HoverPrefetch
from headsne_widget.widget.runs import start_warmup


class Gate:
    """compute(key) that records its calls and blocks on an event per key until released."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release: dict[str, threading.Event] = {}

    def __call__(self, key: str) -> object:
        self.calls.append(key)
        self.release.setdefault(key, threading.Event()).wait(10)
        if key == "bad":
            raise RuntimeError("cannot")
        return f"P of {key}"

    def open(self, key: str) -> None:
        self.release.setdefault(key, threading.Event()).set()


def test_the_latest_aim_wins_and_a_take_waits_for_the_build_in_progress():
    gate = Gate()
    pre = HoverPrefetch(gate)
    try:
        pre.aim("a")
        wait_until(lambda: gate.calls == ["a"], what="a started")
        pre.aim("b")
        pre.aim("c")  # replaces b, not yet started
        pre.aim("a")  # being built: not started twice
        got: list[object] = []
        taker = threading.Thread(target=lambda: got.append(pre.take("a")))
        taker.start()
        taker.join(0.2)
        assert taker.is_alive(), "take() of the key being built waits for it"
        gate.open("a")
        taker.join(5)
        assert got == ["P of a"]
        gate.open("c")
        wait_until(lambda: pre.ready_key == "c", what="c built")
        assert gate.calls == ["a", "c"]
        assert pre.take("b") is None, "a key replaced before it started is not built"
        assert pre.take("c") == "P of c" and pre.take("c") is None, "a result is handed over once"
        pre.aim("d")
        assert pre.take("d") is None, "a key not started is dropped: the caller builds it"
        gate.open("bad")
        pre.aim("bad")
        wait_until(lambda: "bad" in gate.calls, what="bad started")
        assert pre.take("bad") is None, "an error is the caller's to meet again and report"
    finally:
        pre.close()
        for key in ("a", "b", "c", "d"):
            gate.open(key)
    thread = pre._thread
    assert thread is not None
    thread.join(5)
    assert not thread.is_alive(), "close() ends the thread"
    assert pre._compute is None and pre.ready_key is None


@pytest.fixture(scope="module")
def long_ex(long_llama_dir):
    start_warmup().join()
    words = TSNE_ABSTRACT.split()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        return extract(" ".join(words[i % len(words)] for i in range(2400)), long_llama_dir, max_tokens=PREFETCH_MIN_N)


def test_the_click_takes_the_P_built_while_the_pointer_rested_on_its_row(make, long_ex):
    w, c = make(long_ex, autostart=False, n_iter=20, speed=0.0)
    assert long_ex.n_tokens == PREFETCH_MIN_N
    c.from_browser(hovered_head=[1, 2])
    wait_until(lambda: w._hover_prefetch.ready_key == ("attention", 1, 2, False), 30, "the hovered head's P")
    built = w._hover_prefetch._ready[1]
    c.from_browser(layer=1, head=2)  # the click
    wait_until(lambda: w._controller.run is not None and w.state == "done", 60, "the clicked run")
    assert w._controller.run.P is built.P, "the click ran on the P built before it, not on a new one"
    fresh = selection_affinities(long_ex, "attention", 1, 2, dtype=np.float32)
    np.testing.assert_array_equal(built.P, fresh.P)
    np.testing.assert_array_equal(built.kept, fresh.kept)
    assert w._hover_prefetch.ready_key is None, "handed over: no second P kept"


def test_a_row_is_not_built_when_it_is_the_selected_head_or_in_hidden_mode(make, long_ex):
    w, c = make(long_ex, autostart=False, n_iter=20, speed=0.0)
    c.from_browser(hovered_head=[0, 0])  # the selected head
    w.mode = "hidden"
    c.from_browser(hovered_head=[1, 1])
    assert w._hover_prefetch._wanted is None and w._hover_prefetch._busy is None
    assert w._hover_prefetch._thread is None, "nothing was started"


@pytest.mark.parametrize("value", [[2, 0], [0, 4], [0], [0, 1, 2], [True, 0], "0,1"])
def test_a_bad_hovered_head_from_the_browser_is_refused(make, long_ex, value):
    w, c = make(long_ex, autostart=False)
    c.from_browser(hovered_head=value)
    assert w.hovered_head is None
    assert "invalid value from the browser (hovered_head)" in w.status
    assert w.state == "idle", "a display value: the run is not touched"


def test_short_texts_build_nothing_ahead(make, tiny_bert):
    w, c = make(extract(TSNE_ABSTRACT[:260], tiny_bert), autostart=False)
    assert w._hover_prefetch is None
    c.from_browser(hovered_head=[1, 1])
    assert w.hovered_head == [1, 1] and w.state == "idle"


def test_the_page_uses_the_same_threshold_and_dwell():
    """js/prefetch.js mirrors PREFETCH_MIN_N and DWELL_MS (the page decides when to report a row)."""
    import re
    from pathlib import Path

    from headsne_widget.widget import prefetch

    source = (Path(__file__).parents[1] / "js" / "prefetch.js").read_text()
    for name in ("PREFETCH_MIN_N", "DWELL_MS"):
        match = re.search(rf"export const {name} = (\d+);", source)
        assert match and int(match.group(1)) == getattr(prefetch, name), name


def test_a_replaced_runs_P_is_written_over_once_idle_and_the_P_is_right(make, long_ex):
    """At long lengths the widget writes a click's P into the P of a run it replaced (no fresh 256 MiB array
    at 8192 tokens), once nothing holds it; the P is the one computed afresh."""
    w, c = make(long_ex, autostart=False, n_iter=5, speed=0.0)
    for thread in [t for t in threading.enumerate() if t.name == "headsne-prefetch"]:
        thread.join(30)
    n = long_ex.n_tokens
    assert w._spare_P.nbytes == 4 * n * n, "the first click's P array is written once at start, in the background"
    for i, (layer, head) in enumerate([(0, 1), (1, 2), (1, 3), (0, 2)]):
        c.from_browser(layer=layer, head=head)
        wait_until(lambda: w.state == "done", 60, f"run {i}")
        fresh = selection_affinities(long_ex, "attention", layer, head, dtype=np.float32)
        np.testing.assert_array_equal(w._controller.run.P, fresh.P)
    assert w._spare_P.reused >= 3
