"""The synced model: the Python half of what ``js/widget.js`` renders, built from :mod:`.protocol`.

``HeadSNEModel`` holds the traits of :data:`~headsne_widget.widget.protocol.TRAITS` (one declaration each)
and enforces what the browser may write; it computes nothing and starts no thread. Its owner
(:class:`~headsne_widget.widget.headsne.HeadSNE`) reacts to changes through ``observe`` and two callbacks:
``on_browser`` after each update from the browser, ``on_control`` for each control message.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

from .._checks import check_index
from .params import SyncedTraits
from .protocol import BROWSER_WRITABLE, CONTROL_ACTIONS, DISPLAY_ONLY, KEYWORDS, MIN_SPEED, TRAITS

__all__ = ["CONTROL_ACTIONS", "HeadSNEModel", "check_keywords"]

_STATIC = Path(__file__).resolve().parents[1] / "static"

# Shown instead of the widget when the esbuild bundle is missing (a source checkout that skipped the
# build hook): a clear message in the output cell beats an import error or an empty output.
_MISSING_BUNDLE_ESM = """
export default {
  render({ el }) {
    const p = document.createElement("pre");
    p.textContent = "headsne-widget: the front end is not built (headsne_widget/static/widget.js is " +
      "missing). Run `npm install && npm run build` in the repository, or reinstall the package.";
    el.appendChild(p);
  },
};
"""


def _front_end(path: Path, missing: str) -> str | Path:
    """The bundle's text. A Path would make anywidget connect a closure over every widget to a class-level
    file watcher that is never disconnected, so closed widgets could never be freed; only live reloading
    during front-end development (``ANYWIDGET_HMR=1``) gets the Path."""
    if not path.is_file():
        return missing
    return path if os.environ.get("ANYWIDGET_HMR") == "1" else path.read_text(encoding="utf-8")


def check_keywords(params: Mapping[str, Any]) -> None:
    """Refuse keywords that are not settable traits (a typo must not pass silently)."""
    unknown = sorted(set(params) - set(KEYWORDS))
    if unknown:
        raise TypeError(f"HeadSNE() got unknown parameter(s) {', '.join(unknown)}; known: {', '.join(KEYWORDS)}")


def _traited(check: Callable[..., Any], *args: Any) -> Any:
    """Run a plain check and turn its error into a TraitError (what traitlets reports for a bad value)."""
    try:
        return check(*args)
    except (TypeError, ValueError) as err:
        raise t.TraitError(str(err)) from None


def _traits() -> dict[str, Any]:
    return {spec.name: spec.trait.tag(sync=True) for spec in TRAITS}


class HeadSNEModel(anywidget.AnyWidget, SyncedTraits):
    """The widget's synced traits (see :mod:`.protocol`), their checks, and what the browser may write.

    The traits are protocol.TRAITS' own objects, put in the class body below; their names and value types are
    declared for tools (mypy, IDEs, ``help``) by :class:`~headsne_widget.widget.params.SyncedTraits`, generated
    from the same declarations (tests/test_protocol.py fails when the two drift)."""

    _esm = _front_end(_STATIC / "widget.js", _MISSING_BUNDLE_ESM)
    _css = _front_end(_STATIC / "widget.css", "")
    locals().update(_traits())

    def __init__(self, **kwargs: Any) -> None:
        #: called after each browser update: ``on_browser(names, error)``, error an exception or None
        self.on_browser: Callable[[set[str], Exception | None], None] = lambda names, error: None
        #: called for each control message with its action (one of CONTROL_ACTIONS)
        self.on_control: Callable[[str], None] = lambda action: None
        #: ``hand_over(method, *args)``: True when it posted the call to the owner thread's loop (see set_state)
        self.hand_over: Callable[..., bool] = lambda method, *args: False
        #: ``check_sort(value)``: ``sort_heads`` checked against the text (a relation found in it), or raises
        self.check_sort: Callable[[str], str] = lambda value: value
        super().__init__(**kwargs)
        self.on_msg(self._on_custom_msg)

    # ------------------------------------------------------------------------------------------ checks

    @t.validate("layer")
    def _valid_layer(self, proposal: Any) -> int:
        return _traited(check_index, proposal.value, self.n_layers or 1, "layer", "layers")

    @t.validate("head")
    def _valid_head(self, proposal: Any) -> int:
        return _traited(check_index, proposal.value, self.n_heads or 1, "head", "heads")

    @t.validate("hovered_head")
    def _valid_hovered_head(self, proposal: Any) -> list[int] | None:
        value = proposal.value
        if value is not None:
            _traited(check_index, value[0], self.n_layers or 1, "hovered_head layer", "layers")
            _traited(check_index, value[1], self.n_heads or 1, "hovered_head head", "heads")
        return value

    @t.validate("learning_rate")
    def _valid_learning_rate(self, proposal: Any) -> float | None:
        value = proposal.value
        if value is None or value == "auto":
            return None
        if not value > 0:
            raise t.TraitError(f"learning_rate must be a finite number > 0 (or 'auto'), got {value!r}")
        return value

    @t.validate("speed")
    def _valid_speed(self, proposal: Any) -> float:
        if 0 < proposal.value < MIN_SPEED:
            raise t.TraitError(f"speed must be 0 (as fast as computed) or at least {MIN_SPEED}, got {proposal.value!r}")
        return proposal.value

    @t.validate("sort_heads")
    def _valid_sort_heads(self, proposal: Any) -> str:
        try:
            return self.check_sort(proposal.value)
        except (TypeError, ValueError, ImportError) as err:  # ImportError: no parser (ParserUnavailableError)
            raise t.TraitError(str(err)) from None

    @t.validate("hovered")
    def _valid_hovered(self, proposal: Any) -> int | None:
        value = proposal.value
        if value is not None and value >= len(self.tokens):
            raise t.TraitError(f"hovered token {value} out of range: the text has {len(self.tokens)} tokens")
        return value

    # ------------------------------------------------------------------------------------- the browser

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """Apply an update from the browser: only what a user may set (``BROWSER_WRITABLE``). A refused or
        invalid value is put back in the browser and reported to ``on_browser``; never raised. Arrived on another
        thread than the owner's (ipykernel's subshells), it is applied on the owner's event loop (``hand_over``)."""
        if self.hand_over(self.set_state, sync_data):  # a message on another thread: applied on the owner's
            return
        refused = sorted(set(sync_data) - BROWSER_WRITABLE)
        allowed = {k: v for k, v in sync_data.items() if k in BROWSER_WRITABLE}
        error: Exception | None = None
        try:
            super().set_state(allowed)
        except (t.TraitError, TypeError, ValueError) as err:
            error = err
        if refused:
            self.send_state(refused)
            error = error or PermissionError(f"the browser may not set {', '.join(refused)}: refused")
        if error is not None and allowed:
            self.send_state(sorted(allowed))  # put the browser's controls back to the values in force
        self.on_browser(set(allowed), error)

    def _on_custom_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        is_control = isinstance(content, dict) and content.get("type") == "control"
        action = content.get("action") if is_control else content
        if action not in CONTROL_ACTIONS:
            warnings.warn(
                f"HeadSNE ignored unknown control action {action!r}; known: {', '.join(CONTROL_ACTIONS)}",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        self.on_control(action)


def display_only(names: set[str]) -> bool:
    """Whether a browser update touched display traits only (an error there leaves the run alone)."""
    return names <= DISPLAY_ONLY
