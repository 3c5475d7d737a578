"""Issue 23: the widget's threads, bounds and arrays under attack.

Each defect the adversarial review found has its reproducer here (the stale ``wait()`` and the read-only caches
are in tests/test_widget.py and tests/test_capture.py), then a seeded random driver throws a minute of user
calls at a live widget, from Python, from observers and as browser messages, and checks after each that nothing
hung, no answer was stale and, at the end, that no thread and no array is left behind."""

from __future__ import annotations

import gc
import random
import threading
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
import traitlets
from recording_comm import wait_until

from headsne_widget.affinity.selection import selection_affinities
from headsne_widget.capture.extraction import Extraction, extract
from headsne_widget.embedding.background import start_warmup
from headsne_widget.embedding.tsne import kl_divergence
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget import atlas as atlas_module

SLOT_THREADS = {f"headsne-{name}" for name in ("load", "run", "prefetch", "partners", "atlas")}


@pytest.fixture(scope="module", autouse=True)
def warm_kernels():
    start_warmup().join()


@pytest.fixture(scope="module")
def ex(tiny_bert) -> Extraction:
    return extract(TSNE_ABSTRACT[:200], tiny_bert)


def job_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name in SLOT_THREADS]


class Gate:
    """Holds every atlas head's run at its first step until opened: a job that cannot move on its own."""

    def __init__(self, monkeypatch) -> None:
        self.opened, self.entered = threading.Event(), threading.Event()
        real = atlas_module.closing_frames

        def gated(P, **options):
            self.entered.set()
            self.opened.wait(30)
            return real(P, **options)

        monkeypatch.setattr(atlas_module, "closing_frames", gated)


# ------------------------------------------------------------------------------------------ reproducers


@pytest.mark.parametrize("call", ["stop_atlas", "close"])
def test_stopping_the_atlas_from_an_observer_returns_while_it_is_inside_a_step(make, ex, monkeypatch, call):
    """Issue 23.1 and 23.3: ``stop_atlas()`` or ``close()`` from an observer while the atlas runs hung the kernel
    for good (the atlas thread waited for the lock the notification held while it joined the atlas thread). Now
    the call returns while the atlas job is still stuck inside its step (it joins nothing), and the job ends at
    its next check once it can move."""
    w, c = make(ex, n_iter=30, speed=0.0)
    w.wait(10)
    gate = Gate(monkeypatch)
    returned = []

    def observer(change):
        getattr(w, call)()
        returned.append(gate.opened.is_set())

    w.observe(observer, "selected")
    w.start_atlas()
    assert gate.entered.wait(10), "the atlas job is inside its step"
    c.from_browser(selected=[1, 2])  # as the browser's lasso would
    assert returned == [False], "the call returned while the atlas job could not move"
    gate.opened.set()
    wait_until(lambda: job_threads() == [], 10, "the jobs to end after the stop")
    if call == "stop_atlas":
        assert w.atlas_state == "idle" and w.atlas_heads == []


def test_rapid_atlas_starts_leave_one_atlas_job(make, ex, monkeypatch):
    """Issue 23.3: ten rapid ``start_atlas()`` calls left ten jobs running (four at 8k: +3.1 GiB). A start
    replaces the job before: one atlas computes, the others never begin."""
    w, c = make(ex, n_iter=30, speed=0.0)
    w.wait(10)
    built: list[int] = []
    real = atlas_module.build_selection
    monkeypatch.setattr(
        atlas_module, "build_selection", lambda job, e, key, ws: built.append(key.head) or real(job, e, key, ws)
    )
    for _ in range(10):
        w.start_atlas()
    wait_until(lambda: w.atlas_state == "done", 60, "the atlas")
    assert len([t for t in threading.enumerate() if t.name == "headsne-atlas"]) <= 1
    assert built[-ex.n_heads :] == list(range(ex.n_heads)), "the last start computed every head"
    assert len(built) < 2 * ex.n_heads, "replaced starts computed (almost) nothing"


def test_an_atlas_reports_only_what_it_computed_and_belongs_to_its_layer(make, ex, monkeypatch):
    """Issue 23.5: after a stop, unfinished heads got KL 0 and all-zero maps (sorted first by KL), and after a
    layer change the old layer's atlas stayed under the new layer's name."""
    w, c = make(ex, n_iter=30, speed=0.0, layer=1)
    w.wait(10)
    w.start_atlas(n_iter=30)
    wait_until(lambda: len(w.atlas_heads) >= 1, 30, "a first thumbnail")
    w.stop_atlas()
    done = list(w.atlas_heads)
    assert 1 <= len(done) and w.atlas_layer == 1
    kls = w.atlas_kl
    assert np.isfinite(kls[done]).all() and (kls[done] > 0).all()
    missing = [h for h in range(ex.n_heads) if h not in done]
    assert np.isnan(kls[missing]).all() and np.isnan(w.atlas[missing]).all()
    w.layer = 0
    w.wait(10)
    assert w.atlas_layer == 1, "the atlas still says which layer it shows"


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("quantile_k", 10**9, "quantile_k"),
        ("n_iter", 10**308, "n_iter"),
        ("speed", 1e-10, "speed"),
        ("perplexity", 1e30, "perplexity"),
        ("selected", [-1], r"\[-1\] out of range"),
    ],
)
def test_every_numeric_setting_has_a_bound(make, ex, name, value, match):
    """Issue 23.7 and 23.11: quantile_k = 10**9 was taken and the process tried to allocate ~90 GB; n_iter =
    1e308 was taken; speed <= 1e-9 killed the run; a negative selected index gave a garbled message."""
    w, c = make(ex, n_iter=30, speed=0.0)
    before = getattr(w, name)
    with pytest.raises(traitlets.TraitError, match=match):
        setattr(w, name, value)
    assert getattr(w, name) == before
    c.from_browser(**{name: value})
    assert getattr(w, name) == before and "invalid value from the browser" in w.status


def test_a_refused_colouring_leaves_the_colouring_as_it_was(make, ex):
    """Issue 23.11: a refused ``color_by`` (1e39, beyond float32) still became ``w.color_by``; integers above 2**24
    collapsed into one colour; ``color_by="user"`` was taken with no values."""
    w, c = make(ex, n_iter=30, speed=0.0)
    w.color_by = "sentence"
    n = ex.n_tokens
    for bad, match in [(np.full(n, 1e39), "beyond float32"), (2**25 + np.arange(n), "float32"), ("user", "values")]:
        with pytest.raises(ValueError, match=match):
            w.color_by = bad
        assert w.color_by == "sentence" and w.color_mode == "sentence"
    w.selected = np.array([3, 1, 3])  # a numpy array of indices is taken
    assert w.selected == [1, 3]


# ------------------------------------------------------------------------------------------ random driver


def numpy_bytes() -> int:
    """Bytes of numpy array data alive now (tracemalloc's numpy domain: the recording comm's messages are not
    arrays)."""
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)])
    return sum(stat.size for stat in snapshot.statistics("filename"))


def expected_kl(w, ex: Extraction) -> float:
    """The exact KL of the embedding shown under the P of the settings in force."""
    sel = selection_affinities(
        ex, w.mode, w.layer, w.head, perplexity=w.perplexity, exclude_special=w.exclude_special
    )  # fmt: skip
    return kl_divergence(sel.P, w.embedding)


def test_a_minute_of_random_user_calls_never_hangs_goes_stale_or_leaves_anything(make, ex):
    """A seeded random sequence of user calls for 60 s: from Python, from observers (which wait for the run or
    stop the atlas) and as browser messages (valid and invalid). After every ``wait()`` (observers' included)
    the KL returned is the exact KL of the map shown under the P of the settings in force: never a stale
    answer; every call returns (a hang fails the test through its timeout); at the end the widget closes with
    no thread left and the numpy memory back where it started."""
    rng = random.Random(23)
    tracemalloc.start()
    baseline = numpy_bytes()
    w, c = make(ex, n_iter=40, speed=0.0)
    L, H, n = ex.n_layers, ex.n_heads, ex.n_tokens
    checks = {"fresh": 0, "error": 0}

    def check_wait() -> None:
        try:
            kl = w.wait(60)
        except (RuntimeError, ValueError, traitlets.TraitError):  # paused, or an invalid value stopped the run
            checks["error"] += 1
            return
        state = w.widget.state  # as wait() left it (reading w.state would start a run still pending)
        if kl is not None and state not in ("error", "idle"):  # (idle: stopped; its KL is of an earlier step)
            assert state == "done", f"wait() returned while the run of the settings in force was {state}"
            assert kl == pytest.approx(expected_kl(w, ex), rel=1e-3), "wait() returned a stale KL"
            checks["fresh"] += 1

    def on_head(change) -> None:
        choice = rng.random()
        if choice < 0.3:
            check_wait()
        elif choice < 0.5:
            w.stop_atlas()

    w.observe(on_head, "head")
    # a run's end, seen while a wait() applies results, changes the settings: that wait must go on to the new run
    w.observe(lambda change: change.new == "done" and rng.random() < 0.2 and setattr(w, "head", rng.randrange(H)),
              "state")  # fmt: skip
    w.observe(lambda change: rng.random() < 0.5 and w.stop_atlas(), "selected")
    actions: list[Callable[[], object]] = [
        lambda: setattr(w, "head", rng.randrange(H)),
        lambda: setattr(w, "layer", rng.randrange(L)),
        lambda: c.from_browser(layer=rng.randrange(L), head=rng.randrange(H)),
        lambda: c.from_browser(hovered=rng.randrange(n)),
        lambda: c.from_browser(hovered_head=[rng.randrange(L), rng.randrange(H)]),
        lambda: c.from_browser(selected=rng.sample(range(n), 3)),
        lambda: c.from_browser(n_iter=rng.choice([30, 50, -1, 10**9])),
        lambda: c.from_browser(edge_k=rng.choice([1, 3, 7, 0])),
        lambda: setattr(w, "mode", rng.choice(["attention", "attention", "hidden"])),
        lambda: setattr(w, "exclude_special", rng.random() < 0.3),
        lambda: setattr(w, "seed", rng.randrange(5)),
        lambda: setattr(w, "speed", rng.choice([0.0, 500.0])),
        lambda: c.control(rng.choice(["pause", "resume", "stop", "restart", "atlas", "atlas_stop"])),
        lambda: w.start_atlas(n_iter=rng.choice([20, 60])),
        lambda: w.stop_atlas(),
        check_wait,
        check_wait,
        lambda: time.sleep(rng.random() * 0.05),
    ]
    deadline = time.monotonic() + 60
    steps = 0
    while time.monotonic() < deadline:
        start = time.monotonic()
        rng.choice(actions)()
        assert time.monotonic() - start < 120, "a call took minutes"
        steps += 1
    w.resume()
    check_wait()
    w.close()
    wait_until(lambda: job_threads() == [], 10, "every job to end after close")
    gc.collect()
    left = numpy_bytes() - baseline
    tracemalloc.stop()
    assert steps > 200 and checks["fresh"] > 10, (steps, checks)
    assert left < 8 * 2**20, f"{left / 2**20:.1f} MiB of numpy memory left behind"
