"""RunController alone, no widget: cancel latency, a paused run uses no CPU, exactly one live run, pacing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from recording_comm import run_threads, wait_until

from headsne_widget.affinity.affinities import gaussian_affinities
from headsne_widget.embedding.tsne import kl_divergence, tsne
from headsne_widget.widget.runs import (
    FRAME_MARGIN,
    KL_EVERY,
    MAX_FPS,
    FrameReport,
    RunController,
    frame_due,
    report_every,
    run_options,
    start_warmup,
)


@pytest.fixture(scope="module", autouse=True)
def warm_kernels():
    start_warmup().join()


@pytest.fixture(scope="module")
def P() -> np.ndarray:
    X = np.random.default_rng(0).normal(size=(120, 5))
    return gaussian_affinities(X, perplexity=10.0)


class Recorder:
    """Collects what a controller reports; ``accept`` says whether the owner takes frames."""

    def __init__(self) -> None:
        self.frames: list[FrameReport] = []
        self.ends: list[tuple] = []
        self.live_runs: list[int] = []
        self.accept = True

    def on_frame(self, report: FrameReport) -> bool:
        self.live_runs.append(len(run_threads()))  # runs computing while this one reports
        if self.accept:
            self.frames.append(report)
        return self.accept

    def on_end(self, *args) -> None:
        self.ends.append(args)


@pytest.fixture
def controller():
    rec = Recorder()
    c = RunController(rec.on_frame, rec.on_end)
    c.recorder = rec
    yield c
    c.cancel()
    assert run_threads() == [], "a run thread outlived the test"


def options(n_iter: int, every: int = 1, seed: int = 0) -> dict:
    return dict(n_iter=n_iter, seed=seed, every=every)


def test_a_run_reports_frames_and_ends_with_the_optimisers_result(controller, P):
    kept = np.arange(P.shape[0])
    run = controller.start(P, kept, options(300, every=5))
    controller.wait(30)
    frames = controller.recorder.frames
    assert frames[-1].done and frames[-1].iteration == 300 and run.state == "done"
    assert all(not f.done for f in frames[:-1])
    expected = tsne(P, n_iter=300, seed=0)
    np.testing.assert_allclose(frames[-1].embedding, expected.embedding, rtol=1e-5, atol=1e-5)
    assert frames[-1].kl == pytest.approx(kl_divergence(P, frames[-1].embedding), rel=1e-4)
    assert run.kl_iterations[-1] == 300 and len(run.kl_history) == 60  # every report, sent or not


def test_reported_frames_are_capped_per_second_and_the_last_is_always_reported(controller, P):
    start = time.perf_counter()
    controller.start(P, np.arange(P.shape[0]), options(2000, every=1))
    controller.wait(60)
    elapsed = time.perf_counter() - start
    frames = controller.recorder.frames
    assert len(frames) <= elapsed / (1.0 / MAX_FPS - FRAME_MARGIN) + 2
    assert frames[-1].iteration == 2000 and frames[-1].done


def test_the_kl_history_holds_only_exact_kls_and_frames_between_carry_the_last(controller, P):
    from types import SimpleNamespace

    params = SimpleNamespace(
        n_iter=230, learning_rate=None, early_exaggeration=12.0, exaggeration_iters=100, seed=0, restarts=1
    )
    options = run_options(params, "cpu", every=2)
    assert options["kl_every"] == KL_EVERY and options["every"] == 2 and options["first_kl"] is False
    run = controller.start(P.astype(np.float32), np.arange(P.shape[0]), options)  # as selection_affinities gives it
    controller.wait(30)
    # KL_EVERY iterations after the start (the first frame goes out without one), then as far apart, and the last
    assert run.kl_iterations == [50, 100, 150, 200, 230]
    expected = tsne(P, n_iter=230, seed=0, exaggeration_iters=100)
    assert run.kl_history[-1] == pytest.approx(expected.kl, rel=1e-5)
    frames = controller.recorder.frames
    assert frames[-1].kl_fresh and frames[-1].done
    before_first_kl = [f for f in frames if f.iteration < KL_EVERY]
    assert before_first_kl and all(f.kl is None and f.kl_iteration is None for f in before_first_kl)
    for f in frames[len(before_first_kl) :]:
        assert f.kl_iteration in run.kl_iterations and f.kl_iteration <= f.iteration
        assert f.kl == run.kl_history[run.kl_iterations.index(f.kl_iteration)]
        assert f.kl_fresh == (f.kl_iteration == f.iteration)


def test_a_frame_is_due_a_margin_before_the_display_period():
    """Reports land on a grid of iterations: waiting a full 1/60 s plus the next report gave 53 frames a second."""
    period = 1.0 / MAX_FPS
    assert 0.001 <= FRAME_MARGIN <= 0.005
    assert frame_due(period) and frame_due(period - FRAME_MARGIN)
    assert not frame_due(period - FRAME_MARGIN - 1e-4) and not frame_due(0.0)


def test_pacing_plays_back_at_the_set_speed(controller, P):
    controller.speed = 400.0
    start = time.perf_counter()
    controller.start(P, np.arange(P.shape[0]), options(200, every=report_every(120, 1, 400.0)))
    controller.wait(30)
    assert time.perf_counter() - start >= 0.45  # 200 iterations at 400 per second


def test_cancel_answers_fast_and_no_end_is_reported(controller, P):
    controller.start(P, np.arange(P.shape[0]), options(10_000_000, every=5))
    wait_until(lambda: controller.recorder.frames, what="a first frame")
    start = time.perf_counter()
    controller.cancel()
    latency = time.perf_counter() - start
    assert latency < 0.2, f"cancel took {latency:.3f} s"
    assert run_threads() == [] and controller.recorder.ends == []
    count = len(controller.recorder.frames)
    time.sleep(0.1)
    assert len(controller.recorder.frames) == count


def test_a_paused_run_uses_no_cpu_and_resumes(controller, P):
    run = controller.start(P, np.arange(P.shape[0]), options(10_000_000, every=5))
    wait_until(lambda: controller.recorder.frames, what="a first frame")
    assert controller.pause() and run.state == "paused"
    time.sleep(0.05)
    count = len(run.kl_history)
    cpu = time.process_time()
    time.sleep(0.4)
    assert time.process_time() - cpu < 0.05, "a paused run must not compute"
    assert len(run.kl_history) == count
    with pytest.raises(RuntimeError, match="paused"):
        controller.wait()
    assert controller.resume()
    wait_until(lambda: len(run.kl_history) > count, what="progress after resume")


def test_exactly_one_run_computes_whatever_the_starts(controller):
    X = np.random.default_rng(1).normal(size=(2000, 5))
    P = gaussian_affinities(X, perplexity=30.0)  # 200 iterations take ~0.2 s: overlapping runs would show
    kept = np.arange(P.shape[0])
    for seed in range(0, 6, 2):  # a run busy in a long step, then a run that reports after one iteration
        slow = controller.start(P, kept, options(10_000_000, every=200, seed=seed))
        wait_until(lambda run=slow: len(run.kl_history) > 0, what="the slow run's first report")
        fast = controller.start(P, kept, options(10_000_000, every=1, seed=seed + 1))
        wait_until(lambda run=fast: len(run.kl_history) > 0, what="the fast run's first report")
    for seed in range(5):
        controller.start(P, kept, options(10_000_000, every=20, seed=seed))
        time.sleep(0.01)
    wait_until(lambda: len(run_threads()) == 1, what="the old runs to end")
    (thread,) = run_threads()
    assert thread.name.endswith(f"-{controller.run.run_id}")
    current = controller.run.run_id
    frames = controller.recorder.frames
    wait_until(lambda: frames and frames[-1].run_id == current, what="the last run's frames")
    count = len(frames)
    time.sleep(0.1)
    assert {f.run_id for f in frames[count:]} <= {current}, "a cancelled run reported after the new one"
    assert max(controller.recorder.live_runs) == 1, "a run reported while another one was still computing"


def test_an_owner_that_drops_a_frame_ends_the_run(controller, P):
    controller.recorder.accept = False
    run = controller.start(P, np.arange(P.shape[0]), options(10_000_000, every=5))
    wait_until(lambda: not run.alive, what="the run to stop itself")


def test_a_failing_run_reports_its_error_once(controller):
    bad = np.full((10, 10), 1.0)  # a diagonal: refused by t-SNE
    controller.start(bad, np.arange(10), options(100))
    controller.wait(10)
    ((run_id, state, message, error),) = controller.recorder.ends
    assert state == "error" and "diagonal" in message and error is not None


def test_display_frames_are_aligned_but_embeddings_are_raw(controller, P):
    kept = np.arange(P.shape[0])
    for seed in (1, 2):
        controller.start(P, kept, dict(options(400, every=10, seed=seed), exaggeration_iters=100))
        controller.wait(30)
    last = controller.recorder.frames[-1]
    expected = tsne(P, n_iter=400, seed=2, exaggeration_iters=100).embedding
    np.testing.assert_allclose(last.embedding, expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(last.display, last.embedding)  # rotated onto the previous run's view
    d = lambda Y: np.linalg.norm(Y[:, None] - Y[None], axis=-1)  # noqa: E731
    np.testing.assert_allclose(d(last.display), d(last.embedding), atol=1e-3)


def test_threads_are_daemons_named_for_their_run(controller, P):
    run = controller.start(P, np.arange(P.shape[0]), options(10_000_000, every=5))
    assert run.thread.daemon and run.thread.name == f"headsne-run-{run.run_id}"
    assert isinstance(run.thread, threading.Thread)
