"""What the owner and a run job say to each other: the request that starts a run, the results it hands back,
and the one human status line made from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .selections import SelectionKey

__all__ = ["BestKL", "Partners", "PartnersDue", "RunFrame", "RunRequest", "RunStarted", "status_line"]


@dataclass(frozen=True)
class RunRequest:
    """One run as the owner asks for it."""

    run_id: int
    key: SelectionKey
    options: dict[str, Any]  # tsne_frames keywords
    edge_k: int


@dataclass(frozen=True)
class RunStarted:
    """P is built: the tokens it covers, and the note of a lowered perplexity."""

    run_id: int
    kept: np.ndarray
    note: str
    partners_later: bool  # the partners come after the first frame (the old ones go now): runs.run_job's rule
    sparse: bool = False  # P was built sparse (the partners of a new edge_k come from the rows again)


@dataclass(frozen=True)
class RunFrame:
    """A reported step: the raw embedding, its KL (the latest exact one) and the KL history's length."""

    run_id: int
    iteration: int
    kl: float | None
    embedding: np.ndarray
    kl_count: int
    done: bool
    replaces: str = "frame"  # only the newest frame waits for the owner


@dataclass(frozen=True)
class Partners:
    """The partner traits (edges, attends_to, attended_by) of a run."""

    run_id: int
    traits: dict[str, Any]


@dataclass(frozen=True)
class PartnersDue:
    """A run's first frame is out: its partners may be ranked now, on their own slot, from what its P left at hand
    (an :class:`~headsne_widget.affinity.partners.AtHand`)."""

    run_id: int
    at_hand: Any


@dataclass(frozen=True)
class BestKL:
    """The best KL so far of the run and its best-of restarts."""

    run_id: int
    kl: float
    replaces: str = "best"


def status_line(what: str, label: str, iteration: int, n_iter: int, kl: float | None = None, note: str = "") -> str:
    """The widget's one human line for a run: "running layer 2 head 5 - iteration 300/1000", ..."""
    text = {
        "building": f"running {label} - building P",
        "starting": f"running {label} - starting",
        "running": f"running {label} - iteration {iteration}/{n_iter}",
        "paused": f"paused {label} at iteration {iteration}/{n_iter}",
        "stopped": f"stopped {label} at iteration {iteration}/{n_iter}",
        "done": f"done {label} - KL {kl if kl is not None else float('nan'):.4f} after {iteration} iterations",
    }[what]
    return f"{text} ({note})" if note and what != "stopped" else text
