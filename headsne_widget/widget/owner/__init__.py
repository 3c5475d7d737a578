"""The owner thread's side of a widget, one class: :class:`Owner`, what :class:`~headsne_widget.widget.headsne.HeadSNE`
delegates to. It alone writes the synced model's traits and its own fields (tests/test_layout.py holds both): it
observes the model, turns changes into jobs (a change of the selection or a run parameter schedules one run for the
whole batch of changes), and applies the jobs' results through one table, :data:`HANDLERS`. Everything here runs
on the owner thread; :meth:`Owner.sync` is called first by every public method and attribute (see :mod:`..jobs`).

Its state is declared once, in :mod:`.state`; its handlers are grouped by concern, each module one layer of the
class that builds on the ones before it:

- :mod:`.state`: every field, the status line, failures, writing traits (``OwnerState``);
- :mod:`.control`: sync, ready, wait and the run's controls, a stop's exact KL included (``RunControl``);
- :mod:`.panels`: the decomposition, attribution and composition panels (``Panels``);
- :mod:`.colours`: colour modes and the user's values (``Colours``);
- :mod:`.heads`: the atlas, the head map, related heads, the heads' order, the hovered row (``Heads``);
- :mod:`.results`: a run's start, frames, stop, partners, best-of check, progress and failure (``RunResults``);
- :mod:`.text`: the captured text received, its failure, ``close`` (``Text``);
- :mod:`.events`: construction, the model's events, the browser's messages, the user's writes and
  :data:`HANDLERS` (``Owner``).
"""

from __future__ import annotations

from .events import HANDLERS, Owner
from .heads import RELATED_K, head_order
from .state import KEY_TRAITS, SLOTS, RunState

__all__ = ["HANDLERS", "KEY_TRAITS", "RELATED_K", "SLOTS", "Owner", "RunState", "head_order"]
