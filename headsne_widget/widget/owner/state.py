"""The owner's state, declared once: every field of :class:`~headsne_widget.widget.owner.Owner` is annotated and set
here, in :meth:`OwnerState.__init__`, and no concern of the owner adds one. With them, what every concern uses: the
status line, a failure shown, the frame withdrawn, a row's selection key and the writing of traits.
:class:`RunState` is the owner's view of one run.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...affinity.sources import source
from ...capture.extraction import Extraction
from ..inbox import Inbox
from ..jobs import Job, Slot
from ..loading import OPENING_NOTE, Asked
from ..model import HeadSNEModel
from ..pacing import Pace, RunRecord
from ..prefetch import Prefetch
from ..run_messages import RunRequest, status_line
from ..selections import SelectionKey
from ..workspace import Workspace

__all__ = ["KEY_TRAITS", "SLOTS", "OwnerState", "RunState"]

#: the kinds of background work, one job at a time each
SLOTS = ("load", "run", "prefetch", "partners", "atlas", "heads", "attribution", "composition", "decomposition")
#: the traits a selection's P depends on besides its row (layer, head): a change forgets the row rested on
KEY_TRAITS = tuple(f.name for f in fields(SelectionKey) if f.name not in ("layer", "head"))


@dataclass(eq=False)
class RunState:
    """The owner's view of one run."""

    request: RunRequest
    record: RunRecord = field(default_factory=RunRecord)
    job: Job | None = None
    kept: np.ndarray | None = None
    kl_count: int = 0  # entries of record.kl_history up to the frame shown
    frames: int = 0  # frames of this run shown so far (none: what is shown is an earlier run's)
    note: str = ""  # why the perplexity was lowered, shown with every status line
    sparse: bool = False  # the builder made P sparse (not decided by length: a broad head's P may be dense)
    partners_job: Job | None = None  # ranking its partners on the partners slot: wait() waits for them too
    stopping: bool = False  # stop() asked its job to end at its next frame with that frame's exact KL
    ended: bool = False
    error: BaseException | None = None


class OwnerState:
    """Every field of the owner (owner thread only), and the calls every concern of it uses."""

    widget: HeadSNEModel  # the synced model: its traits are written by the owner alone
    inbox: Inbox  # the jobs' results, applied on the owner thread
    slots: dict[str, Slot]  # one per kind of background work (SLOTS)
    pace: Pace  # the playback speed a run paces its frames by
    asked: Asked  # the selection asked for at construction, applied once the text is captured
    ex: Extraction | None  # the captured text
    load_error: BaseException | None  # why the text or the selection asked for was refused
    workspace: Workspace | None  # the memory the jobs lease
    prefetch: Prefetch | None  # the P built ahead for the row the pointer rests on
    run: RunState | None  # the current run
    reference: tuple[np.ndarray, np.ndarray] | None  # the last display frame and its tokens (for alignment)
    embedding: np.ndarray | None  # the raw embedding of the frame shown
    user_colors: Any  # the user's per-token values, kept for "user" colour mode
    features: np.ndarray | None  # every head's feature vector (affinity/heads.py), once loaded
    pending: bool  # a run is scheduled: it starts once the current batch of changes is applied
    closed: bool
    decomposition_wanted: bool  # the decomposition panel was asked for: it follows the layer
    opened: tuple[int, int] | None  # the head the widget opened on when no head= was given, until another is chosen

    def __init__(self, widget: HeadSNEModel, asked: Asked, apply: Callable[[Job, Any], None]) -> None:
        self.widget = widget
        self.inbox = Inbox(apply)
        self.slots = {name: Slot(name, self.inbox.put) for name in SLOTS}
        self.pace = Pace(widget.speed)
        self.asked = asked
        self.ex, self.load_error, self.workspace, self.prefetch = None, None, None, None
        self.run = self.reference = self.embedding = None
        self.user_colors = self.features = None
        self.pending = self.closed = self.decomposition_wanted = False
        self.opened = None

    def write(self, traits: Mapping[str, Any]) -> None:
        """Set ``traits`` (name -> value) together: one message to the browser."""
        with self.widget.hold_sync():
            for name, value in traits.items():
                setattr(self.widget, name, value)

    def status(self, what: str, iteration: int = 0, kl: float | None = None) -> str:
        w = self.widget
        note = "" if self.run is None else self.run.note
        if self.opened == (w.layer, w.head) and source(w.mode).per_head:  # said while it shows the head it opened on
            note = f"{note}; {OPENING_NOTE}" if note else OPENING_NOTE
        return status_line(what, source(w.mode).label(w.layer, w.head), iteration, w.n_iter, kl, note)

    def fail(self, err: BaseException, message: str, *, warn: bool) -> None:
        """Show an error in the status line (state "error"); from Python's side also warn."""
        if self.run is not None:
            self.run.error, self.run.ended = err, True
        self.widget.state, self.widget.status = "error", message
        if warn:
            warnings.warn(message, UserWarning, stacklevel=3)

    def refuse(self, err: BaseException) -> bool:
        """The text or the selection asked for is refused: the widget's error (``wait_ready`` raises it)."""
        self.load_error = err
        self.widget.state, self.widget.status, self.widget.progress = "error", str(err), None
        return False

    def withdraw_frame(self) -> None:
        """Take the shown frame away (its rows no longer match, or it was an earlier run's)."""
        self.widget.frame, self.reference, self.embedding = None, None, None

    def loaded(self) -> tuple[Extraction, Workspace]:
        """The extraction and the workspace (the caller waited for the capture)."""
        if self.ex is None or self.workspace is None:
            raise RuntimeError("the text is not captured yet")
        return self.ex, self.workspace

    def selection_key(self, layer: int, head: int) -> SelectionKey:
        """The key of row (layer, head) under the widget's mode, ``exclude_special`` and perplexity."""
        w = self.widget
        return SelectionKey(w.mode, layer, head, w.exclude_special, w.perplexity)
