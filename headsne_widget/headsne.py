"""``HeadSNE``: the user-facing widget, a thin API over the parts.

Selection -> P is :func:`~headsne_widget.selection.selection_affinities`; the background run is a
:class:`~headsne_widget.run_control.RunController`; the synced traits are
:class:`~headsne_widget.widget.HeadSNEModel`; partners for the hover lines come from
:mod:`~headsne_widget.partners`. This module wires them: trait changes restart the run (changes made
together start one run), run reports become trait updates, and browser writes are checked.
"""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from typing import Any

import numpy as np
import traitlets as t

from .errors import HeadSNEError
from .extraction import Extraction, extract
from .partners import selection_partners
from .run_control import FrameReport, RunController, report_every, start_warmup
from .selection import MIN_TOKENS, selection_affinities, selection_label
from .widget import DISPLAY_ONLY, HeadSNEModel

__all__ = ["HeadSNE"]

# Traits settable as ``HeadSNE(..., name=value)``; the selection (layer, head, mode) has its own keywords.
PARAMETERS = (
    "perplexity", "learning_rate", "n_iter", "early_exaggeration", "exaggeration_iters", "seed",
    "restarts", "exclude_special", "quantile", "quantile_k", "speed", "edge_k", "color_mode",
    "label_density", "edge_direction",
)  # fmt: skip
# Traits that change the optimisation: a change restarts a run that is going or has finished.
RUN_PARAMETERS = (
    "perplexity", "learning_rate", "n_iter", "early_exaggeration", "exaggeration_iters", "seed",
    "restarts", "exclude_special",
)  # fmt: skip


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
        self._timer: threading.Timer | None = None
        self._error: BaseException | None = None
        self._device, self._note, self._user_colors = device, "", None
        self._embedding: np.ndarray | None = None
        self._controller = RunController(self._on_frame, self._on_end)
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
            raise ValueError(f"the text has {ex.n_tokens} tokens (special ones included); t-SNE needs at least 4")
        self._extraction: Extraction | None = ex
        super().__init__(
            text=ex.text, tokens=list(ex.tokens), special=[bool(s) for s in ex.special],
            offsets=[None if o is None else [int(o[0]), int(o[1])] for o in ex.offsets],
            model_name=ex.model_name, n_layers=ex.n_layers, n_heads=ex.n_heads, kv_groups=int(ex.kv_groups),
            max_attention=ex.max_attention, layer=layer, head=head, mode=mode, **params,
        )  # fmt: skip
        self._controller.speed = self.speed
        self.on_msg(self._on_custom_msg)
        self._ready = True
        start_warmup()
        if autostart:
            self.run()
        else:
            self.status = f"idle - {ex.model_name}, {ex.n_tokens} tokens: click a head or press play"

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
        from .colors import color_values

        if isinstance(value, str):
            self.color_mode = value
            return
        values, categories = color_values(value, len(self.tokens))
        with self.hold_sync():
            self._user_colors = value
            self.color_values, self.color_categories = values, categories
            self.color_mode = "user"

    def run(self) -> None:
        """(Re)start the optimisation for the current selection and parameters."""
        self._schedule(force=True)
        self._flush()

    def pause(self) -> None:
        """Hold the running optimisation between two steps: no CPU work until ``resume``."""
        if self._controller.pause():
            self._set(state="paused", status=f"paused {self._label()} at iteration {self.iteration}/{self.n_iter}")

    def resume(self) -> None:
        """Continue a paused run where it stopped."""
        if self._controller.resume():
            self._set(state="running", status=self._running(self.iteration))

    def stop(self) -> None:
        """End the current run (its last frame stays shown); ``run`` starts a new one."""
        if self.state in ("running", "paused"):
            self._cancel()
            self._set(state="idle", status=f"stopped {self._label()} at iteration {self.iteration}/{self.n_iter}")

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

    def save_html(self, path: str | os.PathLike) -> Any:
        """Write the current state as one standalone, offline HTML file (see :mod:`headsne_widget.export`)."""
        from .export import save_html

        return save_html(self, path)

    def close(self) -> None:
        """Stop all work, close the comm and drop the arrays, so that nothing keeps the widget's memory."""
        if getattr(self, "_controller", None) is not None and not self._closed:
            self._closed, self._pending = True, False
            if self._timer is not None:
                self._timer.cancel()
            self._cancel()
        super().close()
        self._extraction, self._embedding, self._user_colors = None, None, None

    # ------------------------------------------------------------------------- browser writes

    def _browser_update(self, names: list[str], refused: list[str], error: Exception | None) -> None:
        if refused:
            self._set(status=f"the browser may not set {', '.join(refused)}: refused")
        if error is not None:
            message = f"invalid value from the browser ({', '.join(names)}): {error}"
            if set(names) <= DISPLAY_ONLY:
                self._set(status=message)
            else:
                self._cancel()
                self._fail(error, message, warn=False)
        self._flush()  # one message = one run

    @t.observe("layer", "head", "mode", *RUN_PARAMETERS)
    def _on_run_trait(self, change: Any) -> None:
        if not self._ready or change.old == change.new:
            return
        if change.name in RUN_PARAMETERS and (self.state == "idle" and not self._pending):
            return
        if change.name == "perplexity" and self.mode != "hidden":
            return
        if change.name == "head" and self.mode == "hidden":
            return  # hidden mode depends on the layer only
        self._schedule()

    @t.observe("speed")
    def _on_speed(self, change: Any) -> None:
        self._controller.speed = change.new

    @t.observe("edge_k", "color_mode")
    def _on_display(self, change: Any) -> None:
        if self._ready and self._controller.run is not None:
            self._publish_partners(self._controller.run.kept)

    def _on_custom_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        actions = {"pause": self.pause, "resume": self.resume, "restart": self.run, "stop": self.stop}
        name = content.get("action") if isinstance(content, dict) and content.get("type") == "control" else content
        action = actions.get(name) if isinstance(name, str) else None
        if action is None:
            warnings.warn(
                f"HeadSNE ignored unknown control action {name!r}; known: {', '.join(actions)}",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        action()

    # ------------------------------------------------------------------------------------ run wiring

    def _schedule(self, force: bool = False) -> None:
        """Cancel the current run and start the new one once the current batch of changes is applied."""
        if self._closed:
            raise RuntimeError("this HeadSNE widget is closed; make a new one")
        if self._pending:
            return
        self._pending = True
        self._cancel()
        self._set(run_id=self.run_id + 1, state="running", status=f"running {self._label()} - starting")
        if (self._depth() == 0 and force) or self._in_browser_update():
            return  # run() and set_state() flush at once
        try:
            asyncio.get_running_loop().call_soon(self._flush)
        except RuntimeError:  # no event loop (a script): a moment later, or at the next read
            self._timer = threading.Timer(0.02, self._flush)
            self._timer.daemon = True
            self._timer.start()

    def _flush(self) -> None:
        """Start the scheduled run, unless still inside a batch of trait notifications."""
        if not self._pending or self._closed or self._depth() > 0:
            return
        self._pending = False
        self._cancel()
        try:
            sel = selection_affinities(
                self.extraction, self.mode, self.layer, self.head,
                perplexity=self.perplexity, exclude_special=self.exclude_special,
            )  # fmt: skip
        except (HeadSNEError, ValueError, TypeError) as err:
            self._fail(err, f"{self._label()}: {err}")
            return
        options = dict(
            n_iter=self.n_iter, learning_rate="auto" if self.learning_rate is None else self.learning_rate,
            early_exaggeration=self.early_exaggeration, exaggeration_iters=self.exaggeration_iters,
            seed=self.seed, restarts=self.restarts, device=self._device,
            every=report_every(len(sel.kept), self.restarts, self.speed),
        )  # fmt: skip
        self._error, self._note = None, sel.note
        with self._sync_lock, self.hold_sync():
            if self.kept != sel.kept.tolist():  # the old frame's rows no longer match: withdraw it
                self.frame = None
                self._controller.forget_reference()
            self.kept = sel.kept.tolist()
            self.iteration, self.kl = 0, None
            self.status = f"running {sel.label} - starting" + (f" ({sel.note})" if sel.note else "")
            self._controller.start(sel.P, sel.kept, options, run_id=self.run_id)
        self._publish_partners(sel.kept)

    def _cancel(self) -> None:
        # never join while this thread handles a trait notification: the run may be waiting for the lock
        self._controller.cancel(wait=self._depth() == 0)

    def _on_frame(self, report: FrameReport) -> bool:
        with self._sync_lock:
            if not self._controller.is_current(report.run_id) or self._closed:
                return False
            self._embedding = report.embedding
            done = report.done
            status = self._running(report.iteration) if self.state != "paused" else self.status
            if done:
                status = f"done {self._label()} - KL {report.kl:.4f} after {report.iteration} iterations"
                status += f" ({self._note})" if self._note else ""
            update: dict[str, Any] = dict(iteration=report.iteration, kl=report.kl, status=status)
            if not (done and report.iteration == self.iteration and self.frame is not None):
                update["frame"] = report.display  # the final report repeats the last sent frame: not resent
            self._set(**update, **({"state": "done"} if done else {}))
            return True

    def _on_end(self, run_id: int, state: str, message: str, error: BaseException | None) -> None:
        with self._sync_lock:
            if self._controller.is_current(run_id):
                self._fail(error or RuntimeError(message), f"{self._label()}: {message}", warn=False)

    def _publish_partners(self, kept: np.ndarray) -> None:
        """Hover partners and per-token colours for the current selection."""
        ex = self.extraction
        update = selection_partners(ex, self.mode, self.layer, self.head, self.edge_k, kept)
        if self.color_mode == "max_attention":
            update["color_values"] = ex.max_attention[self.layer, self.head] if self.mode == "attention" else None
            update["color_categories"] = []
        self._set(**update)

    def _fail(self, err: BaseException, message: str, *, warn: bool = True) -> None:
        """Show an error in the status line (state "error") and, from Python's side, warn."""
        self._error = err
        self._set(state="error", status=message)
        if warn:
            warnings.warn(message, UserWarning, stacklevel=4)

    def _set(self, **values: Any) -> None:
        with self._sync_lock, self.hold_sync():
            for name, value in values.items():
                setattr(self, name, value)

    def _label(self) -> str:
        return selection_label(self.mode, self.layer, self.head)

    def _running(self, iteration: int) -> str:
        note = f" ({self._note})" if self._note else ""
        return f"running {self._label()} - iteration {iteration}/{self.n_iter}{note}"
