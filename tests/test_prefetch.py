"""Work done before a click asks for it (headsne_widget/widget/prefetch.py): the P of the grid row the pointer
rests on, built in its own job and taken, lease and all, by the click."""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np
import pytest
from recording_comm import wait_until
from widget_probes import count_builds, prefetch_idle

from headsne_widget.affinity.selection import selection_affinities
from headsne_widget.affinity.sources.base import HEAD_PREFETCH, POINT_PREFETCH
from headsne_widget.capture.extraction import extract
from headsne_widget.embedding.background import start_warmup
from headsne_widget.embedding.tsne import kl_divergence
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.jobs import Slot
from headsne_widget.widget.prefetch import Prefetch
from headsne_widget.widget.workspace import Workspace


class Gate:
    """build(job, key) that records its calls, leases a P from a workspace and blocks per key until released."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.calls: list[str] = []
        self.release: dict[str, threading.Event] = {}
        self.stubborn: set[str] = set()  # keys whose build meets no cancel point (a long compiled pass)

    def __call__(self, job, key: str) -> tuple[str, object]:
        self.calls.append(key)
        lease = self.workspace.lease()
        try:
            while not self.release.setdefault(key, threading.Event()).wait(0.01):
                if key not in self.stubborn:
                    job.check()
            if key == "bad":
                raise RuntimeError("cannot")
        except BaseException:
            lease.release()
            raise
        return f"P of {key}", lease

    def open(self, key: str) -> None:
        self.release.setdefault(key, threading.Event()).set()


class NeverCancelled:
    cancelled = False


def test_the_latest_aim_wins_a_take_waits_for_the_build_and_one_P_is_kept():
    workspace = Workspace(8, slots=6)
    gate = Gate(workspace)
    slot = Slot("prefetch", lambda job, result: None)
    pre = Prefetch(slot, gate)
    try:
        pre.aim("a")
        wait_until(lambda: gate.calls == ["a"], what="a started")
        got: list[object] = []
        taker = threading.Thread(target=lambda: got.append(pre.take("a", NeverCancelled())))
        taker.start()
        taker.join(0.2)
        assert taker.is_alive(), "take() of the key being built waits for it"
        gate.open("a")
        taker.join(5)
        assert got[0][0] == "P of a" and workspace.leased == 1, "the P is handed over with its lease"
        got[0][1].release()
        gate.stubborn.add("b")
        pre.aim("b")
        wait_until(lambda: gate.calls[-1] == "b", what="b started")  # the slot is busy until b is released
        pre.aim("c")  # waits behind b
        pre.aim("d")  # replaces c, not yet started
        gate.open("b")
        gate.open("d")
        wait_until(lambda: gate.calls[-1] == "d" and not slot.busy, what="d built")
        assert "c" not in gate.calls, "a key replaced before it started is not built"
        assert workspace.leased == 1, "one P kept at most"
        pre.aim("e")  # d, built and not taken, is given back as e starts
        wait_until(lambda: gate.calls[-1] == "e", what="e started")
        wait_until(lambda: workspace.leased == 1, what="d's P given back")
        assert pre.take("d", NeverCancelled()) is None
        gate.open("e")
        wait_until(lambda: not slot.busy, what="e built")
        selection, lease = pre.take("e", NeverCancelled())
        assert selection == "P of e" and pre.take("e", NeverCancelled()) is None, "handed over once"
        lease.release()
        gate.open("bad")
        pre.aim("bad")
        wait_until(lambda: not slot.busy and "bad" in gate.calls, what="bad tried")
        assert pre.take("bad", NeverCancelled()) is None, "an error is the caller's to meet again and report"
        assert workspace.leased == 0
    finally:
        pre.close()
        for key in ("a", "b", "c", "d", "e"):
            gate.open(key)
    assert slot.join(5), "close() ends the job"
    assert workspace.leased == 0, "nothing is kept after close"


@pytest.fixture(scope="module")
def long_ex(long_llama_dir):
    """2048 tokens: the shortest text whose head matrices' P is built ahead (``HEAD_PREFETCH``)."""
    start_warmup().join()
    words = TSNE_ABSTRACT.split()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        text = " ".join(words[i % len(words)] for i in range(2400))
        return extract(text, long_llama_dir, max_tokens=HEAD_PREFETCH[0])


def test_the_click_takes_the_P_built_while_the_pointer_rested_on_its_row(make, long_ex, monkeypatch):
    built = count_builds(monkeypatch)
    w, c = make(long_ex, layer=0, head=0, autostart=False, n_iter=20, speed=0.0)
    assert long_ex.n_tokens == HEAD_PREFETCH[0]
    c.from_browser(hovered_head=[1, 2])
    wait_until(lambda: built == [("attention", 1, 2)] and prefetch_idle(), 30, "the hovered head's P")
    c.from_browser(layer=1, head=2)  # the click
    kl = w.wait(60)
    assert built == [("attention", 1, 2)], "the click ran on the P built before it, not on a new one"
    fresh = selection_affinities(long_ex, "attention", 1, 2, dtype=np.float32)
    assert kl == pytest.approx(kl_divergence(fresh.P.astype(np.float64), w.embedding), rel=1e-4)


def test_a_row_is_not_built_when_it_is_the_selected_head_or_in_query_key_mode(make, long_ex, monkeypatch):
    built = count_builds(monkeypatch)
    w, c = make(long_ex, layer=0, head=0, autostart=False, n_iter=20, speed=0.0)
    c.from_browser(hovered_head=[0, 0])  # the selected head
    w.mode = "query-key"  # (a mode change runs the selected head: its P is the run's)
    w.wait(60)
    c.from_browser(hovered_head=[1, 1])
    w.mode = "hidden"
    w.wait(60)
    c.from_browser(hovered_head=[0, 3])  # another head of the selected layer: the same P (a layer's states)
    time.sleep(0.2)
    assert built == [("query-key", 0, 0), ("hidden", 0, 0)] and prefetch_idle(), "no row was built"
    built.clear()
    c.from_browser(hovered_head=[1, 3])
    wait_until(lambda: built == [("hidden", 1, 0)] and prefetch_idle(), 30, "another layer's P")


@pytest.mark.parametrize("value", [[2, 0], [0, 4], [0], [0, 1, 2], [True, 0], "0,1"])
def test_a_bad_hovered_head_from_the_browser_is_refused(make, long_ex, value):
    w, c = make(long_ex, layer=0, head=0, autostart=False)
    c.from_browser(hovered_head=value)
    assert w.hovered_head is None
    assert "invalid value from the browser (hovered_head)" in w.status
    assert w.state == "idle", "a display value: the run is not touched"


def test_short_texts_build_nothing_ahead(make, tiny_bert, monkeypatch):
    built = count_builds(monkeypatch)
    ex = extract(TSNE_ABSTRACT[:260], tiny_bert)
    assert ex.n_tokens < POINT_PREFETCH[0]
    for mode in ("attention", "hidden"):
        w, c = make(ex, layer=0, head=0, autostart=False, mode=mode)
        c.from_browser(hovered_head=[1, 1])
        time.sleep(0.2)
        assert w.hovered_head == [1, 1] and w.state == "idle" and built == [], mode


@pytest.fixture(scope="module")
def minilm_512(minilm):
    """MiniLM on 512 tokens with its components: a source of points' P is built ahead there, a head's is not."""
    start_warmup().join()
    text = " ".join([TSNE_ABSTRACT] * 3)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        ex = extract(text, minilm, max_tokens=512, components=True)
    assert ex.n_tokens == 512
    return ex


def test_at_512_tokens_a_head_output_click_takes_the_P_built_while_the_pointer_rested(make, minilm_512, monkeypatch):
    """A source of points' exact Gaussians are most of a click at 512 tokens: the rested row's P is built ahead
    and the click runs on it; attention's is not (it takes a few milliseconds)."""
    built = count_builds(monkeypatch)
    w, c = make(minilm_512, layer=0, head=0, autostart=False, n_iter=20, speed=0.0, perplexity=10.0)
    c.from_browser(hovered_head=[1, 2])  # attention mode
    time.sleep(0.2)
    assert built == [] and prefetch_idle()
    w.mode = "head-output"  # (runs the selected head)
    w.wait(60)
    built.clear()
    c.from_browser(hovered_head=[3, 4])
    wait_until(lambda: built == [("head-output", 3, 4)] and prefetch_idle(), 30, "the hovered head's P")
    c.from_browser(layer=3, head=4)  # the click
    kl = w.wait(60)
    assert built == [("head-output", 3, 4)], "the click ran on the P built before it, not on a new one"
    fresh = selection_affinities(minilm_512, "head-output", 3, 4, perplexity=10.0, dtype=np.float32)
    assert kl == pytest.approx(kl_divergence(fresh.P.astype(np.float64), w.embedding), rel=1e-4)
    c.from_browser(hovered_head=[1, 2])
    wait_until(lambda: built[-1] == ("head-output", 1, 2) and prefetch_idle(), 30, "another head's P")
    w.mode = "hidden"  # the row rested on is forgotten: resting on it again is a new P, a layer's
    assert w.hovered_head is None
    w.wait(60)
    built.clear()
    c.from_browser(hovered_head=[1, 2])
    wait_until(lambda: built == [("hidden", 1, 0)] and prefetch_idle(), 30, "the same row's P in the new mode")


def test_the_page_uses_the_same_dwell_and_forgets_the_row_on_the_same_traits():
    """js/store/prefetch.js mirrors DWELL_MS, and js/store/intents.js scopes its dwell by the traits whose change
    makes Python forget the row (the page decides when to report a row; the ranges of tokens come with the
    protocol's SOURCES)."""
    import re
    from pathlib import Path

    from headsne_widget.widget import prefetch
    from headsne_widget.widget.owner import KEY_TRAITS

    js = Path(__file__).parents[1] / "js" / "store"
    match = re.search(r"export const DWELL_MS = (\d+);", (js / "prefetch.js").read_text())
    assert match and int(match.group(1)) == prefetch.DWELL_MS
    scope = re.search(r"scope: \(\) => \[([^\]]*)\]", (js / "intents.js").read_text())
    assert scope and set(re.findall(r"T\.(\w+)", scope.group(1))) == set(KEY_TRAITS)


def test_clicks_with_hovers_between_them_run_on_the_right_P(make, long_ex):
    """Leased arrays go from run to run and from the prefetch to a run: whatever the order of hovers and
    clicks, each run's KL is that of the P computed afresh for its head."""
    w, c = make(long_ex, layer=0, head=0, autostart=False, n_iter=5, speed=0.0)
    for i, (layer, head) in enumerate([(0, 1), (1, 2), (1, 3), (0, 2)]):
        c.from_browser(hovered_head=[layer, (head + 1) % 4])  # a row passed on the way
        c.from_browser(hovered_head=[layer, head])
        c.from_browser(layer=layer, head=head)
        kl = w.wait(60)
        fresh = selection_affinities(long_ex, "attention", layer, head, dtype=np.float32)
        assert kl == pytest.approx(kl_divergence(fresh.P.astype(np.float64), w.embedding), rel=1e-4), i
