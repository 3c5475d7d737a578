"""What a widget's jobs did, seen through the package's public functions (patched to count), for tests that must
say "no P was built" or "no n x n array was made" without reading the widget's private state."""

from __future__ import annotations

import threading

import pytest

from headsne_widget.widget import selections
from headsne_widget.widget.workspace import Workspace


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """(mode, layer, head) of every P built from here on."""
    built: list[tuple] = []
    real = selections.build_p

    def counted(ex, spec, **kwargs):
        built.append((spec.source.name, spec.layer, spec.head))
        return real(ex, spec, **kwargs)

    monkeypatch.setattr(selections, "build_p", counted)
    return built


def count_leases(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """n of every n x n float32 array leased from a workspace from here on (a workspace makes its arrays on
    lease, so none leased is none made)."""
    leased: list[int] = []
    real = Workspace.lease

    def counted(self: Workspace):
        leased.append(self.n)
        return real(self)

    monkeypatch.setattr(Workspace, "lease", counted)
    return leased


def slot_idle(name: str) -> bool:
    """No job of the widget's slot ``name`` runs (its thread, ``headsne-<name>``, is gone)."""
    return not [t for t in threading.enumerate() if t.name == f"headsne-{name}"]


def prefetch_idle() -> bool:
    """No P is being built ahead (the prefetch's thread is gone)."""
    return slot_idle("prefetch")
