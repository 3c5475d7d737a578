"""What the widget reports stays true to the run it names (issue 32, findings 2-4): a stopped run that never
showed a frame shows none of the previous run's, a selection too small for t-SNE is refused before its run
starts, and a started atlas reads as running for its own layer at once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from recording_comm import wait_until

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
