"""What the widget reports stays true to the run it names (issue 32, findings 2-4): a stopped run that never
showed a frame shows none of the previous run's, a stopped run's KL is the exact KL of the frame it leaves (issue
53), a selection too small for t-SNE is refused before its run starts, and a started atlas reads as running for its
own layer at once."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time

import numpy as np
import pytest
from recording_comm import wait_until

from headsne_widget import selection_affinities
from headsne_widget.capture.extraction import Extraction, extract
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.headsne import HeadSNE

SHORT_TEXT = TSNE_ABSTRACT[:260]


@pytest.fixture(scope="module")
def ex(tiny_bert) -> Extraction:
    return extract(SHORT_TEXT, tiny_bert)


def test_a_run_stopped_before_its_first_frame_shows_nothing_of_the_previous_run(ex, make):
    w, _ = make(ex, n_iter=300)
    assert w.wait() is not None
    w.layer = 1
    w.stop()  # the layer 1 run's job was started and cancelled before P was built: it never showed a frame
    assert w.state == "idle"
    assert w.status == "stopped layer 1 head 0 before its first frame"
    assert w.kl is None and w.iteration == 0
    assert w.frame is None and w.embedding is None
    assert w.wait() is None  # documented: a run stopped before its first frame has no KL


def test_a_run_stopped_after_frames_keeps_its_own(ex, make):
    w, _ = make(ex, n_iter=300)
    kl = w.wait()
    w.stop()  # nothing runs: nothing changes
    assert w.kl == kl and w.embedding is not None and w.status.startswith("done")


def numpy_kl(P: np.ndarray, Y: np.ndarray) -> float:
    """KL(P || Q(Y)) in float64, written out: q_ij = (1 + |y_i - y_j|^2)^-1 / Z over i != j, the sum over p_ij > 0."""
    Y = np.asarray(Y, dtype=np.float64)
    W = 1.0 / (1.0 + ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(W, 0.0)
    P = np.asarray(P, dtype=np.float64)
    mask = P > 0
    return float((P[mask] * np.log(P[mask] / (W[mask] / W.sum()))).sum())


@pytest.mark.parametrize("paused", [False, True], ids=["running", "paused"])
@pytest.mark.parametrize("selection", [("attention", 2, 5), ("hidden", 3, 0)], ids=["attention", "hidden"])
def test_wait_after_stop_returns_the_exact_kl_of_the_embedding_it_leaves(
    abstract_ex, make, tmp_path, selection, paused
):
    """Issue 53: ``wait()`` after ``stop()`` gave the last report's KL (hidden mode 0.74268 against 0.54175 for the
    embedding shown). Stopped between two KL reports after the early exaggeration (before it, the map is so small
    that the KL barely moves: 2.3195905818 at 100 against 2.3195905810 at 125 in hidden mode), running or paused
    first, the widget's KL, ``wait()``, the
    last entry of ``kl_history`` and both saved pages are the KL of ``w.embedding`` against P, computed in numpy."""
    mode, layer, head = selection
    w, _ = make(abstract_ex, mode=mode, layer=layer, head=head, n_iter=1000, speed=300.0)
    wait_until(lambda: w.iteration > 300 and w.iteration % 50 != 0, 60, "a frame between two KL reports")
    if paused:
        w.pause()
    w.stop()
    kl = w.wait(60)
    Y, kept = w.embedding, w.kept
    sel = selection_affinities(abstract_ex, mode, layer, head, perplexity=w.perplexity)
    assert list(sel.kept) == kept and w.state == "idle" and 300 < w.iteration < 1000
    assert kl == pytest.approx(numpy_kl(sel.P, Y), rel=1e-6, abs=0)
    assert w.kl == kl and w.kl_history[-1] == kl and w.kl_iterations[-1] == w.iteration
    assert w.status.endswith(f"KL {kl:.4f}")
    page = (w.save_html(tmp_path / "stopped.html")).read_text()
    state = json.loads(re.search(r'id="headsne-state">(.*?)</script>', page, re.S).group(1))["state"]
    assert (state["kl"], state["iteration"]) == (kl, w.iteration)
    assert f"KL(P || Q) = {kl:.4f}" in w.save_html(tmp_path / "bokeh.html", view="bokeh").read_text()


@pytest.fixture(scope="module")
def all_special(tiny_bert) -> Extraction:
    ex = extract("[SEP] [SEP]", tiny_bert)
    assert ex.special.all() and ex.n_tokens >= 4
    return ex


def test_an_all_special_selection_is_refused_before_its_run_starts(all_special, make):
    w, _ = make(all_special, exclude_special=True)
    assert w.widget.state == "error"  # at once: no job was started for it
    assert "only 0 tokens are kept" in w.widget.status
    assert w.state == "error" and w.kl is None
    with pytest.raises(ValueError, match="only 0 tokens are kept"):
        w.wait(3)


def test_excluding_every_token_after_a_run_fails_that_run_not_the_previous_one(all_special, make):
    w, _ = make(all_special, n_iter=100, perplexity=1.0)
    w.wait(60)
    w.exclude_special = True
    assert w.state == "error" and "only 0 tokens are kept" in w.status
    with pytest.raises(ValueError, match="only 0 tokens are kept"):
        w.wait(3)
    w.exclude_special = False  # the text's own tokens again: runs as before
    assert w.wait(60) is not None


def test_start_atlas_marks_the_atlas_running_for_its_layer_at_once(ex, make):
    w, _ = make(ex, autostart=False)
    w.start_atlas(n_iter=50)
    assert (w.widget.atlas_state, w.widget.atlas_layer) == ("running", 0)  # before any result is applied
    wait_until(lambda: w.atlas_state != "running", 60, "the layer 0 atlas")
    assert (w.atlas_state, w.atlas_layer) == ("done", 0)
    w.layer = 1
    w.start_atlas(n_iter=50)
    assert (w.widget.atlas_state, w.widget.atlas_layer) == ("running", 1)
    assert w.widget.atlas is None and w.widget.atlas_heads == []  # layer 0's thumbnails are not layer 1's
    deadline = time.monotonic() + 60
    while w.atlas_state == "running" and time.monotonic() < deadline:  # a user's polling loop
        time.sleep(0.02)
    assert (w.atlas_state, w.atlas_layer) == ("done", 1)
    assert sorted(w.atlas_heads) == list(range(ex.n_heads))


def test_a_button_pressed_on_another_thread_acts_on_the_owner_thread(ex, comms):
    """ipykernel 7 may deliver a comm's messages on a subshell's thread (after the echo of a browser write, e.g.
    a search's selection): the "compute atlas" button then did nothing (OwnerThreadError in the kernel's log)."""

    async def press() -> tuple[str, int | None]:
        w = HeadSNE(ex, autostart=False)  # its owner thread runs this event loop, as a kernel's does
        try:
            pressing = threading.Thread(target=w.widget.comm.control, args=("atlas",))
            pressing.start()
            pressing.join()
            await asyncio.sleep(0.05)  # the loop applies what was handed to it
            return w.widget.atlas_state, w.widget.atlas_layer
        finally:
            w.close()

    assert asyncio.run(press()) in {("running", 0), ("done", 0)}


def test_a_browser_update_on_another_thread_is_applied_on_the_owner_thread(ex, comms):
    """The same for a browser write (ipykernel's subshell thread): its traits change, and the run it starts is
    scheduled, on the owner thread, never beside the owner's own trait updates."""
    seen: list[int] = []

    async def write() -> tuple[int, list[int], int]:
        w = HeadSNE(ex, autostart=False)
        try:
            w.observe(lambda change: seen.append(threading.get_ident()), "layer")
            writing = threading.Thread(target=w.widget.comm.from_browser, kwargs={"layer": 1})
            writing.start()
            writing.join()
            await asyncio.sleep(0.05)
            return w.widget.layer, seen, threading.get_ident()
        finally:
            w.close()

    layer, threads, owner = asyncio.run(write())
    assert layer == 1 and threads == [owner]


def test_a_runs_frames_never_wait_for_its_partners(ex, make, monkeypatch):
    """Issue 56: partners ranked after the first frame (hidden mode here; a long text's head) go to the partners
    slot, beside the frames: with the ranking held until the run has ended, the run still reaches its end, and
    the partners come once released. On the run's own thread (before) the run stalled at its first frame."""
    from headsne_widget.affinity.sources.base import PointSource

    release, entered = threading.Event(), threading.Event()
    ranked = PointSource.partners

    def held(self, *args, **kwargs):
        entered.set()
        assert release.wait(60), "the test never released the partners"
        return ranked(self, *args, **kwargs)

    monkeypatch.setattr(PointSource, "partners", held)
    w, _ = make(ex, mode="hidden", n_iter=300)
    try:
        wait_until(lambda: w.state == "done", 50, "the run's end while its partners are held")  # (each read syncs)
        assert entered.is_set(), "the partners were never asked for"
        assert w.kl is not None and w.iteration == 300
        assert w.edges is None  # still held
    finally:
        release.set()
    assert w.wait(timeout=30) is not None  # wait() returns once the hover lines are in too
    assert np.asarray(w.edges["indices"]).shape[0] == ex.n_tokens
