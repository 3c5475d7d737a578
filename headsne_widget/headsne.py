"""``HeadSNE``: the user-facing widget. It runs attention-head t-SNE in a background thread and streams frames.

The optimisation runs off the kernel's main thread, so the notebook stays usable and clicks are
handled while it runs. Each (re)start cancels the running optimisation first (the worker closes its
``tsne_frames`` generator and is joined), so there is never more than one run per widget. Frames are
paced to ``speed`` iterations per second, sent at most 60 times a second (always the last one), and
each sent frame is Procrustes-aligned to the previously sent one, so head switches keep the view steady.
"""

from __future__ import annotations

import math
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import traitlets as t

from .affinities import attention_affinities, gaussian_affinities
from .alignment import align, procrustes
from .errors import HeadSNEError
from .extraction import Extraction, extract
from .serialization import array_to_wire
from .t_sne import tsne_frames, warmup
from .widget import HeadSNEModel

__all__ = ["HeadSNE", "top_edges", "align_rows"]

#: frames sent to the browser per second, at most
MAX_FPS = 60.0
#: the least number of tokens t-SNE can place
MIN_TOKENS = 4
#: most iterations between two reported frames (bounds the KL history's resolution and cancel latency)
MAX_EVERY = 10
#: cost of one t-SNE iteration per pair of tokens, a cautious bound: 1.2e-9 s measured on an idle
#: 2-core machine at n = 512 (0.3 ms per iteration), rounded up for loaded or slower machines
SECONDS_PER_PAIR = 4e-9

# Traits settable as ``HeadSNE(..., name=value)``; the selection (layer, head, mode) has its own keywords.
PARAMETERS = (
    "perplexity", "learning_rate", "n_iter", "early_exaggeration", "exaggeration_iters", "seed",
    "restarts", "exclude_special", "quantile", "quantile_k", "speed", "edge_k",
)
# Traits that change the optimisation: a change restarts a run that is going or has finished.
_RUN_PARAMETERS = (
    "perplexity", "learning_rate", "n_iter", "early_exaggeration", "exaggeration_iters", "seed",
    "restarts", "exclude_special",
)
_RUN_THREAD_PREFIX = "headsne-run"


# ------------------------------------------------------------------------------------------- pure helpers


def top_edges(A: np.ndarray, k: int, kept: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each token's ``k`` strongest partners in head A by ``max(A_ij, A_ji)``, strongest first.

    Partners are restricted to ``kept`` (token indices drawn in the scatter), so every edge can be
    drawn. Returns (indices int32 (n, k'), weights float32 (n, k')) with ``k' = min(k, len(kept) - 1)``.
    """
    A = np.asarray(A, dtype=np.float32)
    n = A.shape[0]
    partner = np.zeros(n, dtype=bool)
    partner[np.arange(n) if kept is None else kept] = True
    k = max(0, min(int(k), int(partner.sum()) - 1))
    W = np.maximum(A, A.T)
    np.fill_diagonal(W, -np.inf)
    W[:, ~partner] = -np.inf
    if k == 0:
        return np.zeros((n, 0), dtype=np.int32), np.zeros((n, 0), dtype=np.float32)
    indices = np.argpartition(-W, k - 1, axis=1)[:, :k]
    weights = np.take_along_axis(W, indices, axis=1)
    order = np.argsort(-weights, axis=1, kind="stable")
    indices = np.take_along_axis(indices, order, axis=1)
    return indices.astype(np.int32), np.take_along_axis(weights, order, axis=1).astype(np.float32)


def align_rows(Y: np.ndarray, kept: np.ndarray, reference: np.ndarray, reference_kept: np.ndarray) -> np.ndarray:
    """Rotate, reflect and shift Y (rows = tokens ``kept``) onto ``reference`` over the tokens both hold.

    With the same tokens this is :func:`headsne_widget.alignment.align`; otherwise the Procrustes map
    is fitted on the shared tokens and applied to every row. Fewer than 3 shared tokens: Y unchanged.
    """
    if len(kept) == len(reference_kept) and np.array_equal(kept, reference_kept):
        return np.ascontiguousarray(align(Y, reference), dtype=np.float32)
    _, rows, ref_rows = np.intersect1d(kept, reference_kept, assume_unique=True, return_indices=True)
    if len(rows) < 3:
        return Y
    rotation, y_mean, r_mean = procrustes(Y[rows], reference[ref_rows])
    return np.ascontiguousarray((Y - y_mean) @ rotation + r_mean, dtype=np.float32)


# ---------------------------------------------------------------------------------------------- warm-up

_warmup_lock = threading.Lock()
_warmup_thread: threading.Thread | None = None


def _warm() -> None:
    try:
        warmup()
    except Exception as err:  # only an optimisation: the run itself reports real failures
        warnings.warn(f"t-SNE warm-up failed ({err}); the first run compiles instead", RuntimeWarning)


def start_warmup() -> threading.Thread:
    """Compile the t-SNE kernels once per process in the background, so the first click is fast."""
    global _warmup_thread
    with _warmup_lock:
        if _warmup_thread is None:
            _warmup_thread = threading.Thread(target=_warm, name="headsne-warmup", daemon=True)
            _warmup_thread.start()
        return _warmup_thread


# ------------------------------------------------------------------------------------------------- runs


@dataclass(eq=False)
class _Run:
    """One optimisation: its inputs, its thread and the events that steer it."""

    run_id: int
    config: tuple
    P: np.ndarray
    kept: np.ndarray
    options: dict[str, Any]
    label: str
    note: str
    cancel: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)  # cleared = paused
    thread: threading.Thread | None = None
    kl_history: list[float] = field(default_factory=list)
    kl_iterations: list[int] = field(default_factory=list)

    @property
    def n_iter(self) -> int:
        return self.options["n_iter"]


class HeadSNE(HeadSNEModel):
    """Layer-wise maximum attention and a live attention-head t-SNE of a text, as a Jupyter widget.

    ``text`` is a str (run through ``model``, see :func:`headsne_widget.extract`) or an
    :class:`~headsne_widget.extraction.Extraction`. ``layer``, ``head`` and ``mode`` pick the
    affinities: ``"attention"`` = P of that head, ``"hidden"`` = perplexity t-SNE of that layer's
    output hidden states. ``**params`` are the other traits of ``js/PROTOCOL.md`` (perplexity,
    learning_rate, n_iter, ...). With ``autostart`` the first run starts at once.

    Setting ``layer``, ``head`` or ``mode`` (from Python or by a click) restarts the run; changing a
    run parameter restarts a run that is going or has finished. ``run``, ``pause``, ``resume``,
    ``stop`` and ``wait`` control it; ``close`` stops all work.
    """

    def __init__(
        self,
        text: str | Extraction,
        model: Any = None,
        *,
        layer: int = 0,
        head: int = 0,
        mode: str = "attention",
        autostart: bool = True,
        tokenizer: Any = None,
        device: str | None = None,
        max_tokens: int | None = None,
        **params: Any,
    ) -> None:
        # before any trait is set: notify_change takes this lock
        self._sync_lock = threading.RLock()
        self._ready = False
        self._run: _Run | None = None
        self._error: BaseException | None = None
        self._embedding: np.ndarray | None = None
        self._reference: tuple[np.ndarray, np.ndarray] | None = None  # last sent frame and its tokens
        self._device = device
        self._closed = False
        unknown = sorted(set(params) - set(PARAMETERS))
        if unknown:
            raise TypeError(f"HeadSNE() got unknown parameter(s) {', '.join(unknown)}; known: {', '.join(PARAMETERS)}")
        if isinstance(text, Extraction):
            if model is not None or tokenizer is not None or max_tokens is not None:
                raise TypeError("model, tokenizer and max_tokens do not apply when text is already an Extraction")
            ex = text
        else:
            ex = extract(text, model, tokenizer=tokenizer, device=device, max_tokens=max_tokens)
        if ex.n_tokens < MIN_TOKENS:
            raise ValueError(
                f"the text has {ex.n_tokens} tokens (special ones included); t-SNE needs at least {MIN_TOKENS}"
            )
        self._extraction = ex
        super().__init__(
            text=ex.text,
            tokens=list(ex.tokens),
            offsets=[None if o is None else [int(o[0]), int(o[1])] for o in ex.offsets],
            special=[bool(s) for s in ex.special],
            model_name=ex.model_name,
            n_layers=ex.n_layers,
            n_heads=ex.n_heads,
            max_attention=array_to_wire(ex.max_attention),
            layer=layer,
            head=head,
            mode=mode,
            **params,
        )
        self.on_msg(self._on_custom_msg)
        self._ready = True
        start_warmup()
        if autostart:
            self.run()
        else:
            self.status = f"idle - {ex.model_name}, {ex.n_tokens} tokens: click a head or press play"

    # --------------------------------------------------------------------------------- public API

    @property
    def extraction(self) -> Extraction:
        """The backend's arrays for this text: tokens, attentions, hidden states, max attention."""
        return self._extraction

    @property
    def embedding(self) -> np.ndarray | None:
        """The latest frame as float32 (m, 2), rows in the order of ``kept``; None before the first."""
        return None if self._embedding is None else self._embedding.copy()

    @property
    def kl_history(self) -> np.ndarray:
        """Exact KL(P || Q) at every reported step of the current run."""
        run = self._run
        return np.array([] if run is None else run.kl_history, dtype=np.float64)

    @property
    def kl_iterations(self) -> np.ndarray:
        """The iteration of each entry of ``kl_history``."""
        run = self._run
        return np.array([] if run is None else run.kl_iterations, dtype=np.int64)

    def run(self) -> None:
        """(Re)start the optimisation for the current selection and parameters."""
        self._start()

    def pause(self) -> None:
        """Hold the running optimisation between two steps: no CPU work until ``resume``."""
        run = self._run
        with self._sync_lock:
            if run is None or self.state != "running":
                return
            run.go.clear()
            with self.hold_sync():
                self.state = "paused"
                self.status = f"paused {run.label} at iteration {self.iteration}/{run.n_iter}"

    def resume(self) -> None:
        """Continue a paused run where it stopped."""
        run = self._run
        with self._sync_lock:
            if run is None or self.state != "paused":
                return
            with self.hold_sync():
                self.state = "running"
                self.status = self._running_status(run, self.iteration)
            run.go.set()

    def stop(self) -> None:
        """End the current run (its last frame stays shown); ``run`` starts a new one."""
        run = self._run
        if run is None or self.state not in ("running", "paused"):
            return
        self._cancel()
        with self._sync_lock, self.hold_sync():
            self.state = "idle"
            self.status = f"stopped {run.label} at iteration {self.iteration}/{run.n_iter}"

    def wait(self, timeout: float | None = None) -> float | None:
        """Block until the current run ends and return its final KL (None if nothing ran).

        Raises the run's error (e.g. DegenerateAffinitiesError), TimeoutError after ``timeout``
        seconds, and RuntimeError for a paused run (which would never end on its own).
        """
        run = self._run
        deadline = None if timeout is None else time.monotonic() + timeout
        while run is not None and run.thread is not None and run.thread.is_alive():
            if self.state == "paused":
                raise RuntimeError("the run is paused and would never end: resume() it first")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"the run is still going after {timeout} s (iteration {self.iteration}/{run.n_iter})")
            run.thread.join(0.05 if left is None else min(0.05, left))
        if self._error is not None:
            raise self._error
        return self.kl

    def save_html(self, path: str | os.PathLike) -> Any:
        """Write the current state as one standalone, offline HTML file (see :mod:`headsne_widget.export`)."""
        from .export import save_html

        return save_html(self, path)

    def close(self) -> None:
        """Stop all work, join the run's thread and close the comm."""
        if getattr(self, "_sync_lock", None) is not None:
            self._closed = True
            self._cancel()
        super().close()

    # ------------------------------------------------------------------------------ validation

    @t.validate("layer")
    def _valid_layer(self, proposal: Any) -> int:
        return _in_range("layer", proposal.value, self.n_layers, "layers")

    @t.validate("head")
    def _valid_head(self, proposal: Any) -> int:
        return _in_range("head", proposal.value, self.n_heads, "heads")

    @t.validate("perplexity")
    def _valid_perplexity(self, proposal: Any) -> float:
        return _positive("perplexity", proposal.value)

    @t.validate("learning_rate")
    def _valid_learning_rate(self, proposal: Any) -> float | None:
        value = proposal.value
        return None if value is None or value == "auto" else _positive("learning_rate", value)

    @t.validate("early_exaggeration", "speed")
    def _valid_finite(self, proposal: Any) -> float:
        if not math.isfinite(proposal.value):
            raise t.TraitError(f"{proposal.trait.name} must be a finite number, got {proposal.value!r}")
        return proposal.value

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """Apply an update from the browser; an invalid value is reported in the status, never raised."""
        try:
            super().set_state(sync_data)
        except t.TraitError as err:
            names = [name for name in sync_data if name in self.keys]
            self._cancel()
            self._fail(err, f"invalid value from the browser ({', '.join(names)}): {err}", warn=False)
            self.send_state(names)  # put the browser's controls back to the values in force

    def notify_change(self, change: Any) -> None:
        # Serialise trait changes and their messages across the kernel thread and the run thread.
        lock = getattr(self, "_sync_lock", None)
        if lock is None:
            super().notify_change(change)
            return
        with lock:
            super().notify_change(change)

    # ------------------------------------------------------------------------------- observers

    @t.observe("layer", "head", "mode")
    def _on_selection(self, change: Any) -> None:
        if self._ready:
            self._start(only_if_changed=True)

    @t.observe(*_RUN_PARAMETERS)
    def _on_parameter(self, change: Any) -> None:
        if not self._ready or self.state == "idle":
            return
        if change.name == "perplexity" and self.mode != "hidden":
            return
        self._start(only_if_changed=True)

    @t.observe("edge_k")
    def _on_edge_k(self, change: Any) -> None:
        if self._ready and self._run is not None:
            self.edges = self._edges(self._run.kept)

    def _on_custom_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        actions = {"pause": self.pause, "resume": self.resume, "restart": self.run, "stop": self.stop}
        if not isinstance(content, dict) or content.get("type") != "control":
            warnings.warn(f"HeadSNE ignored a message it does not know: {content!r}", RuntimeWarning, stacklevel=2)
            return
        action = actions.get(content.get("action"))
        if action is None:
            warnings.warn(
                f"HeadSNE ignored unknown control action {content.get('action')!r}; known: {', '.join(actions)}",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        action()

    # ------------------------------------------------------------------------------ run control

    def _config(self) -> tuple:
        """What a run depends on: equal configs give equal runs."""
        return (
            self.layer, self.head, self.mode, self.perplexity if self.mode == "hidden" else None,
            self.learning_rate, self.n_iter, self.early_exaggeration, self.exaggeration_iters,
            self.seed, self.restarts, self.exclude_special,
        )

    def _start(self, only_if_changed: bool = False) -> None:
        if self._closed:
            raise RuntimeError("this HeadSNE widget is closed; make a new one")
        config = self._config()
        current = self._run
        if (
            only_if_changed
            and current is not None
            and current.config == config
            and self.state in ("running", "paused", "done")
        ):
            return  # e.g. the second observer call of one (layer, head) message
        self._cancel()
        try:
            P, kept, label, note = self._affinities()
        except (HeadSNEError, ValueError) as err:
            self._fail(err, f"{self._label()}: {err}")
            return
        every = self._every(len(kept))
        options = dict(
            n_iter=self.n_iter,
            learning_rate="auto" if self.learning_rate is None else self.learning_rate,
            early_exaggeration=self.early_exaggeration,
            exaggeration_iters=self.exaggeration_iters,
            seed=self.seed,
            restarts=self.restarts,
            device=self._device,
            every=every,
        )
        with self._sync_lock:
            run = _Run(self.run_id + 1, config, P, kept, options, label, note)
            run.go.set()
            self._run = run
            self._error = None
            new_tokens = self._reference is not None and not np.array_equal(self._reference[1], kept)
            with self.hold_sync():
                self.run_id = run.run_id
                if new_tokens:  # the old frame's rows no longer match `kept`
                    self.frame = None
                self.kept = kept.tolist()
                self.iteration = 0
                self.kl = None
                self.state = "running"
                self.status = f"running {label} - starting" + (f" ({note})" if note else "")
            run.thread = threading.Thread(
                target=self._work, args=(run,), name=f"{_RUN_THREAD_PREFIX}-{run.run_id}", daemon=True
            )
            run.thread.start()
        self.edges = self._edges(kept)

    def _cancel(self) -> None:
        """Stop the current run's thread and wait for it: it closes its generator and exits."""
        run = self._run
        if run is None:
            return
        run.cancel.set()
        run.go.set()  # wake it if paused
        if run.thread is not None and run.thread is not threading.current_thread():
            run.thread.join()

    def _label(self) -> str:
        if self.mode == "hidden":
            return f"hidden states of layer {self.layer}"
        return f"layer {self.layer} head {self.head}"

    def _every(self, n: int) -> int:
        """Iterations between reported frames: about one frame period of work, at most MAX_EVERY.

        A frame is where the run can be cancelled or paused, so this also bounds how long a click waits.
        """
        per_iteration = SECONDS_PER_PAIR * n * n * self.restarts
        by_time = int(1.0 / MAX_FPS // per_iteration)
        by_speed = int(self.speed // MAX_FPS) if self.speed > 0 else by_time
        return max(1, min(by_time, by_speed, MAX_EVERY))

    def _affinities(self) -> tuple[np.ndarray, np.ndarray, str, str]:
        """P for the current selection, the tokens it covers, a label and a note for the status."""
        ex = self._extraction
        exclude = ex.special if self.exclude_special else None
        label = self._label()
        note = ""
        if self.mode == "attention":
            A = ex.attentions[self.layer, self.head]
            if exclude is None:
                P, kept = attention_affinities(A), np.arange(ex.n_tokens)
            else:
                P, kept = attention_affinities(A, exclude=exclude)
        else:
            kept = np.arange(ex.n_tokens) if exclude is None else np.flatnonzero(~np.asarray(exclude, dtype=bool))
            if len(kept) < MIN_TOKENS:
                raise ValueError(f"only {len(kept)} tokens are kept; t-SNE needs at least {MIN_TOKENS}")
            perplexity = self.perplexity
            limit = (len(kept) - 1) / 3
            if perplexity > limit:
                note = f"perplexity {perplexity:g} is too large for {len(kept)} tokens: using {limit:.3g}"
                perplexity = limit
            P = gaussian_affinities(ex.hidden_states[self.layer + 1][kept], perplexity)
        if len(kept) < MIN_TOKENS:
            raise ValueError(f"only {len(kept)} tokens are kept; t-SNE needs at least {MIN_TOKENS}")
        return P, np.asarray(kept, dtype=np.int64), label, note

    def _edges(self, kept: np.ndarray) -> dict[str, Any]:
        indices, weights = top_edges(self._extraction.attentions[self.layer, self.head], self.edge_k, kept)
        return {"indices": array_to_wire(indices), "weights": array_to_wire(weights)}

    def _fail(self, err: BaseException | str, message: str, *, warn: bool = True) -> None:
        """Show an error in the status line (state "error") and, from Python's side, warn."""
        self._error = err if isinstance(err, BaseException) else RuntimeError(err)
        with self._sync_lock, self.hold_sync():
            self.state = "error"
            self.status = message
        if warn:
            warnings.warn(message, UserWarning, stacklevel=3)

    # ------------------------------------------------------------------------------- the worker

    def _work(self, run: _Run) -> None:
        """The run's thread: consume frames, pace them, send some, stop when cancelled."""
        frames = tsne_frames(run.P, **run.options)
        last, last_sent, sent_at, clock = None, None, -math.inf, None
        try:
            while True:
                if not run.go.is_set():
                    run.go.wait()
                    clock = None  # re-anchor the playback clock after a pause
                if run.cancel.is_set():
                    return
                frame = next(frames, None)
                if frame is None:
                    break
                if not (math.isfinite(frame.kl) and np.isfinite(frame.embedding).all()):
                    self._publish_failure(
                        run, f"{run.label}: the optimisation produced non-finite values at iteration "
                        f"{frame.iteration}; stopped (try a smaller learning_rate)"
                    )
                    return
                last = frame
                run.kl_history.append(float(frame.kl))
                run.kl_iterations.append(int(frame.iteration))
                speed = self.speed
                if speed > 0:  # playback: iteration i is due at anchor + i / speed
                    now = time.perf_counter()
                    if clock is None or clock[2] != speed:
                        clock = (now, frame.iteration, speed)
                    delay = clock[0] + (frame.iteration - clock[1]) / speed - now
                    if delay > 0 and run.cancel.wait(delay):
                        return
                now = time.perf_counter()
                if now - sent_at >= 1.0 / MAX_FPS:
                    if not self._publish_frame(run, frame):
                        return
                    last_sent, sent_at = frame, now
            if last is None:
                self._publish_failure(run, f"{run.label}: the optimisation reported no frame")
            else:
                self._publish_frame(run, last, done=True, send_frame=last is not last_sent)
        except Exception as err:  # shown in the status line; wait() re-raises it
            self._publish_failure(run, f"{run.label}: t-SNE failed: {err}", err)
        finally:
            frames.close()

    def _acquire(self, run: _Run) -> bool:
        """Take the sync lock unless the run is cancelled meanwhile (the canceller may hold the lock)."""
        while not self._sync_lock.acquire(timeout=0.005):
            if run.cancel.is_set():
                return False
        if run.cancel.is_set():
            self._sync_lock.release()
            return False
        return True

    def _publish_frame(self, run: _Run, frame: Any, *, done: bool = False, send_frame: bool = True) -> bool:
        if send_frame:
            Y = frame.embedding
            if self._reference is not None:
                Y = align_rows(Y, run.kept, *self._reference)
            wire = array_to_wire(Y)
        if not self._acquire(run):
            return False
        try:
            with self.hold_sync():
                if send_frame:
                    self._embedding = Y
                    self._reference = (Y, run.kept)
                    self.frame = wire
                self.iteration = int(frame.iteration)
                self.kl = float(frame.kl)
                if done:
                    self.state = "done"
                    self.status = f"done {run.label} - KL {frame.kl:.4f} after {frame.iteration} iterations" + (
                        f" ({run.note})" if run.note else ""
                    )
                elif self.state == "paused":
                    self.status = f"paused {run.label} at iteration {frame.iteration}/{run.n_iter}"
                else:
                    self.status = self._running_status(run, frame.iteration)
            return True
        finally:
            self._sync_lock.release()

    def _publish_failure(self, run: _Run, message: str, err: BaseException | None = None) -> None:
        if not self._acquire(run):
            return
        try:
            self._error = err if err is not None else FloatingPointError(message)
            with self.hold_sync():
                self.state = "error"
                self.status = message
        finally:
            self._sync_lock.release()

    @staticmethod
    def _running_status(run: _Run, iteration: int) -> str:
        return f"running {run.label} - iteration {iteration}/{run.n_iter}" + (f" ({run.note})" if run.note else "")


def _in_range(name: str, value: int, size: int, what: str) -> int:
    if size and not 0 <= value < size:
        raise t.TraitError(f"{name} {value} is out of range: the model has {size} {what} (0 to {size - 1})")
    return value


def _positive(name: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise t.TraitError(f"{name} must be a finite number > 0, got {value!r}")
    return value
