"""``HeadSNE``: the user-facing widget, a thin API over the parts.

Selection -> P is :func:`~headsne_widget.selection.selection_affinities`; the background run is a
:class:`~headsne_widget.run_control.RunController`; the synced traits are
:class:`~headsne_widget.widget.HeadSNEModel`; partners for the hover lines come from
:mod:`~headsne_widget.partners`; work done before a click asks for it, from :mod:`~headsne_widget.prefetch`.
This module wires them: trait changes restart the run (changes made
together start one run), run reports become trait updates, and browser writes are checked.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from typing import Any

import numpy as np
import traitlets as t

from ..affinity.selection import MIN_TOKENS, Selection, selection_affinities, selection_label
from ..capture.extraction import Extraction, as_extraction
from ..errors import HeadSNEError
from ._buffers import SPARE_BYTES, SparePool
from .atlas import ATLAS_N_ITER, SideJobs
from .colors import color_traits, max_attention_colors
from .model import RUN_PARAMETERS, HeadSNEModel, check_parameters, data_traits
from .partners import selection_partners
from .prefetch import PREFETCH_MIN_N, HoverPrefetch, prefetch_attention
from .runs import Coalescer, FrameReport, RunController, report_every, run_options, start_warmup, status_line

__all__ = ["HeadSNE"]

#: up to this many kept tokens the hover partners are computed with the run's start; above, in a thread
#: after its first frame (at 8192 tokens they take 0.3 s, numpy's argpartition took 4 s, under load)
PARTNERS_AT_ONCE_MAX = 2048


class HeadSNE(HeadSNEModel):
    """Layer-wise maximum attention and a live attention-head t-SNE of a text, as a Jupyter widget.

    Parameters
    ----------
    text : str or Extraction
        A text (run through ``model``, see :func:`headsne_widget.extract`) or a ready extraction.
    model, tokenizer, device, max_tokens : passed to :func:`~headsne_widget.extract`.
    layer, head, mode : the selection: ``"attention"`` = P of that head, ``"hidden"`` = perplexity
        t-SNE of that layer's output hidden states.
    autostart : start the first run at once.
    **params : the other traits of ``js/PROTOCOL.md`` (perplexity, learning_rate, n_iter, ...).

    Setting ``layer``, ``head`` or ``mode`` (from Python or by a click) restarts the run; changing a run
    parameter restarts a run that is going or has finished. Changes made together (``w.layer, w.head =
    2, 5``) start one run. ``embedding`` is the raw optimiser output (the same for the same seed and
    settings); the ``frame`` sent to the browser is aligned to the previous one for display.
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
        self._ready = self._closed = self._pending = False
        self._coalescer, self._flush_lock = Coalescer(self._flush), threading.RLock()
        self._error: BaseException | None = None
        self._device, self._note, self._user_colors = device, "", None
        self._embedding: np.ndarray | None = None
        self._partners_for: tuple[int, np.ndarray] | None = None  # run whose first frame starts its partners
        self._controller = RunController(self._on_frame, self._on_end)
        self._jobs = SideJobs(self._set, lambda: self.run_id)
        self._hover_prefetch: HoverPrefetch | None = None  # P of the grid row the pointer rests on (long texts)
        self._spare_P = SparePool(SPARE_BYTES)  # the P of a replaced run, reused once it is idle
        check_parameters(params)
        start_warmup()  # loads (or compiles) the t-SNE kernels while the model loads and runs
        ex = as_extraction(text, model, tokenizer=tokenizer, device=device, max_tokens=max_tokens)
        if ex.n_tokens < MIN_TOKENS:
            raise ValueError(f"the text has {ex.n_tokens} tokens (special ones included); t-SNE needs at least 4")
        self._extraction: Extraction | None = ex
        if ex.n_tokens >= PREFETCH_MIN_N:
            self._hover_prefetch = HoverPrefetch(functools.partial(_attention_selection, ex, self._spare_P))
        super().__init__(**data_traits(ex), layer=layer, head=head, mode=mode, **params)
        self._controller.speed = self.speed
        self._ready = True
        self.status = f"idle - {ex.model_name}, {ex.n_tokens} tokens: click a head or press play"
        if autostart:
            self.run()
        threading.Thread(
            target=prefetch_attention, args=(ex, self._spare_P), name="headsne-prefetch", daemon=True
        ).start()

    # ------------------------------------------------------------------------------------- public API

    @property
    def extraction(self) -> Extraction:
        """The backend's arrays for this text: tokens, per-head attention, hidden states, max attention."""
        if self._extraction is None:
            raise RuntimeError("this HeadSNE widget is closed; make a new one")
        return self._extraction

    @property
    def embedding(self) -> np.ndarray | None:
        """The latest frame, raw (not aligned), float32 (m, 2), rows in the order of ``kept``."""
        self._flush()
        return None if self._embedding is None else self._embedding.copy()

    @property
    def kl_history(self) -> np.ndarray:
        """Exact KL(P || Q) at every reported step of the current run."""
        run = self._controller.run
        return np.array([] if run is None else run.kl_history, dtype=np.float64)

    @property
    def kl_iterations(self) -> np.ndarray:
        """The iteration of each entry of ``kl_history``."""
        run = self._controller.run
        return np.array([] if run is None else run.kl_iterations, dtype=np.int64)

    @property
    def color_by(self) -> Any:
        """The colouring: a mode name (``position``, ``kind``, ``sentence``, ``max_attention``) or the user's
        per-token values (numbers, or labels shown as categories), set with ``w.color_by = values``."""
        return self._user_colors if self.color_mode == "user" else self.color_mode

    @color_by.setter
    def color_by(self, value: Any) -> None:
        traits = color_traits(value, len(self.tokens))
        self._user_colors = value if traits.get("color_mode") == "user" else None
        self._set(**traits)

    def run(self) -> None:
        """(Re)start the optimisation for the current selection and parameters."""
        self._schedule(force=True)
        self._flush()

    def pause(self) -> None:
        """Hold the running optimisation between two steps: no CPU work until ``resume``."""
        if self._controller.pause():
            self._set(state="paused", status=self._status("paused", self.iteration))

    def resume(self) -> None:
        """Continue a paused run where it stopped."""
        if self._controller.resume():
            self._set(state="running", status=self._status("running", self.iteration))

    def stop(self) -> None:
        """End the current run (its last frame stays shown); ``run`` starts a new one."""
        if self.state in ("running", "paused"):
            self._cancel()
            self._set(state="idle", status=self._status("stopped", self.iteration))

    def start_atlas(self, n_iter: int = ATLAS_N_ITER) -> None:
        """Compute the head atlas of the current layer in the background: ``atlas`` (H, m, 2) and
        ``atlas_kl`` (H,) fill in head by head (``atlas_progress``); ``stop_atlas`` cancels it."""
        self._jobs.atlas(
            self.extraction, self.layer, n_iter=n_iter, seed=self.seed, exclude_special=self.exclude_special
        )

    def stop_atlas(self) -> None:
        """Cancel the head atlas (the heads done so far stay)."""
        self._jobs.stop_atlas()

    def wait(self, timeout: float | None = None) -> float | None:
        """Block until the current run ends and return its final KL (None if nothing ran).

        Raises the run's error (e.g. DegenerateAffinitiesError), TimeoutError after ``timeout`` seconds,
        and RuntimeError for a paused run (which would never end on its own).
        """
        self._flush()
        self._controller.wait(timeout)
        if self._error is not None:
            raise self._error
        return self.kl

    def save_html(self, path: str | os.PathLike, *, view: str = "widget") -> Any:
        """Write the current state as one standalone, offline HTML file: the widget itself with its linked
        views (``view="widget"``) or bokeh figures (``"bokeh"``); see :mod:`headsne_widget.export`."""
        from .export import save_html

        return save_html(self, path, view=view)

    def close(self) -> None:
        """Stop all work, close the comm and drop the arrays, so that nothing keeps the widget's memory."""
        if getattr(self, "_sync_lock", None) is not None and not self._closed:  # else nothing was started
            self._closed, self._pending = True, False
            self._coalescer.cancel()
            self._cancel()
            self._jobs.close()
            if self._hover_prefetch is not None:
                self._hover_prefetch.close()
            self._spare_P.clear()
        super().close()
        self._extraction, self._embedding, self._user_colors = None, None, None

    def _browser_update(self, run_error: tuple[Exception, str] | None) -> None:
        if run_error is not None:  # an invalid run parameter stops the run and shows why
            self._cancel()
            self._fail(*run_error, warn=False)
        self._flush()  # one message = one run

    @t.observe("layer", "head", "mode", *RUN_PARAMETERS)
    def _on_run_trait(self, change: Any) -> None:
        unchanged_run = (
            not self._ready
            or change.old == change.new
            or (change.name in RUN_PARAMETERS and self.state == "idle" and not self._pending)
            or (change.name == "perplexity" and self.mode != "hidden")
            or (change.name == "head" and self.mode == "hidden")  # hidden mode depends on the layer only
        )
        if not unchanged_run:
            self._schedule()

    @t.observe("hovered_head")
    def _on_hovered_head(self, change: Any) -> None:
        """The pointer rests on a grid row: build that head's P now, for the click that may follow."""
        if self._hover_prefetch is None or change.new is None or self.mode != "attention":
            return
        layer, head = change.new
        if (layer, head) != (self.layer, self.head):
            self._hover_prefetch.aim(self._prefetch_key(layer, head))

    def _prefetch_key(self, layer: int | None = None, head: int | None = None) -> tuple:
        """What a prefetched P depends on (attention mode: the head and the special tokens' exclusion)."""
        layer, head = self.layer if layer is None else layer, self.head if head is None else head
        return (self.mode, layer, head, self.exclude_special)

    @t.observe("speed")
    def _on_speed(self, change: Any) -> None:
        self._controller.speed = change.new

    @t.observe("edge_k", "color_mode")
    def _on_display(self, change: Any) -> None:
        if self._ready and self._controller.run is not None:
            self._publish_partners(self._controller.run.kept)

    # ------------------------------------------------------------------------------------ run wiring

    def _schedule(self, force: bool = False) -> None:
        """Cancel the current run and start the new one once the current batch of changes is applied."""
        if self._closed:
            raise RuntimeError("this HeadSNE widget is closed; make a new one")
        if self._pending:
            return
        self._pending = True
        self._cancel()
        self._set(run_id=self.run_id + 1, state="running", status=self._status("starting"))
        if not ((self._depth() == 0 and force) or self._in_browser_update()):  # those flush at once
            self._coalescer.arm()

    def _flush(self) -> None:
        """Start the scheduled run, unless still inside a batch of trait notifications."""
        if self._depth() > 0:  # (thread-local) never wait for the lock while holding the trait lock
            return
        # The event loop, the coalescer's timer and a reader (wait, embedding) may all flush: the lock is
        # held until the run has started, so that a reader that finds nothing pending knows the run it
        # waits for exists (wait() once returned the previous run's KL while the timer was starting it).
        with self._flush_lock:
            if not self._pending or self._closed:
                return
            self._pending = False
            self._start_run()

    def _start_run(self) -> None:
        self._cancel()
        try:
            # the P built while the pointer rested on this head (or being built: taken when done), else built now
            sel = self._hover_prefetch.take(self._prefetch_key()) if self._hover_prefetch is not None else None
            if sel is None:
                sel = selection_affinities(
                    self.extraction, self.mode, self.layer, self.head, perplexity=self.perplexity,
                    exclude_special=self.exclude_special, dtype=np.float32, out=self._spare_for(self.exclude_special),
                )  # fmt: skip
        except (HeadSNEError, ValueError, TypeError) as err:
            self._fail(err, f"{selection_label(self.mode, self.layer, self.head)}: {err}")
            return
        every = report_every(len(sel.kept), self.restarts, self.speed)
        options = run_options(self, self._device, every)
        self._error, self._note = None, sel.note  # the note (a lowered perplexity) joins every status line
        with self._sync_lock, self.hold_sync():
            if self.kept != sel.kept.tolist():  # the old frame's rows no longer match: withdraw it
                self.frame = None
                self._controller.forget_reference()
            self.kept = sel.kept.tolist()
            self.iteration, self.kl = 0, None
            self.status = self._status("starting")
            at_once = len(sel.kept) <= PARTNERS_AT_ONCE_MAX
            # long texts: the old head's partners go now, the new ones once the first frame is out (_on_frame)
            self._partners_for = None if at_once else (self.run_id, sel.kept)
            if self._controller.run is not None:  # its P is written over by a later click once nothing holds it
                self._spare_P.keep(self._controller.run.P)
            self._controller.start(sel.P, sel.kept, options, run_id=self.run_id)
        self._publish_partners(sel.kept, with_partners=at_once)

    def _spare_for(self, exclude_special: bool) -> np.ndarray | None:
        """A replaced run's P to write this selection's P into (attention mode), when one is idle."""
        return _spare_P_for(self.extraction, self._spare_P, exclude_special) if self.mode == "attention" else None

    def _cancel(self) -> None:
        # never join while this thread handles a trait notification: the run may be waiting for the lock
        self._controller.cancel(wait=self._depth() == 0)
        self._jobs.cancel_best()

    def _on_frame(self, report: FrameReport) -> bool:
        with self._sync_lock:
            if not self._controller.is_current(report.run_id) or self._closed:
                return False
            self._embedding = report.embedding
            done = report.done
            status = self._status("running", report.iteration) if self.state != "paused" else self.status
            status = self._status("done", report.iteration, report.kl) if done else status
            update: dict[str, Any] = dict(iteration=report.iteration, kl=report.kl, status=status)
            if not (done and report.iteration == self.iteration and self.frame is not None):
                update["frame"] = report.display  # the final report repeats the last sent frame: not resent
            self._set(**update, **({"state": "done"} if done else {}))
            if self._partners_for is not None and self._partners_for[0] == report.run_id:
                threading.Thread(
                    target=self._partners_after_first_frame, args=self._partners_for, name="headsne-partners",
                    daemon=True,
                ).start()  # fmt: skip
                self._partners_for = None
            if done and self._controller.run is not None and report.kl is not None:  # (a last frame has a KL)
                self._jobs.best(self._controller.run.P, self._controller.run.options, report.kl, report.run_id)
            return True

    def _on_end(self, run_id: int, state: str, message: str, error: BaseException | None) -> None:
        with self._sync_lock:
            if self._controller.is_current(run_id):
                label = selection_label(self.mode, self.layer, self.head)
                self._fail(error or RuntimeError(message), f"{label}: {message}", warn=False)

    def _partners_after_first_frame(self, run_id: int, kept: np.ndarray) -> None:
        """Publish the partners of run ``run_id`` (started by its first frame) unless a newer run replaced it:
        at 8192 tokens they take 0.3 s (two passes over n x n), which would delay the first frame of a click."""
        update = selection_partners(self.extraction, self.mode, self.layer, self.head, self.edge_k, kept)
        with self._sync_lock:
            if not self._closed and self._controller.is_current(run_id):
                self._set(**update)

    def _publish_partners(self, kept: np.ndarray, *, with_partners: bool = True) -> None:
        """Hover partners (or none, until :meth:`_partners_after_first_frame`) and per-token colours for the
        current selection."""
        if with_partners:
            update = selection_partners(self.extraction, self.mode, self.layer, self.head, self.edge_k, kept)
        else:
            update = dict(edges=None, attends_to=None, attended_by=None)
        if self.color_mode == "max_attention":
            update.update(max_attention_colors(self.extraction, self.mode, self.layer, self.head))
        self._set(**update)

    def _fail(self, err: BaseException, message: str, *, warn: bool = True) -> None:
        """Show an error in the status line (state "error") and, from Python's side, warn."""
        self._error = err
        self._set(state="error", status=message)
        if warn:
            warnings.warn(message, UserWarning, stacklevel=4)

    def _status(self, what: str, iteration: int = 0, kl: float | None = None) -> str:
        return status_line(
            what, selection_label(self.mode, self.layer, self.head), iteration, self.n_iter, kl, self._note
        )


def _attention_selection(ex: Extraction, spares: SparePool, key: tuple) -> Selection:
    """The widget's P (float32) for a :meth:`HeadSNE._prefetch_key` in attention mode, in a spare P if one is idle."""
    mode, layer, head, exclude_special = key
    out = _spare_P_for(ex, spares, exclude_special)
    return selection_affinities(ex, mode, layer, head, exclude_special=exclude_special, dtype=np.float32, out=out)


def _spare_P_for(ex: Extraction, spares: SparePool, exclude_special: bool) -> np.ndarray | None:
    """An array for a head's float32 P over the kept tokens: an idle spare, a new one, or None (beyond the pool)."""
    m = ex.n_tokens - (int(np.count_nonzero(ex.special)) if exclude_special else 0)
    return spares.empty((m, m), np.float32) if 4 * m * m <= spares.max_bytes else None
