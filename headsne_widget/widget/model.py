"""The synced state of the widget: the Python half of the model that ``js/widget.js`` renders.

``HeadSNEModel`` holds only the traits of ``js/PROTOCOL.md`` (one name per trait, same defaults) and
the rule of which ones the browser may write; run control lives in
:mod:`headsne_widget.run_control` and the user API in :class:`headsne_widget.headsne.HeadSNE`.
Array traits hold numpy arrays and serialise themselves to the binary wire format
(:func:`headsne_widget.serialization.array_serializers`, mirrored by ``js/codecs.js``).
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from pathlib import Path
from typing import Any, ClassVar

import anywidget
import numpy as np
import traitlets as t

from ..affinity.selection import check_index
from .serialization import array_serializers, arrays_serializers

__all__ = [
    "BROWSER_WRITABLE",
    "COLOR_MODES",
    "PARAMETERS",
    "RUN_PARAMETERS",
    "Array",
    "HeadSNEModel",
    "StrictFloat",
    "StrictInt",
]

_STATIC = Path(__file__).parent / "static"
_ESM_PATH = _STATIC / "widget.js"
_CSS_PATH = _STATIC / "widget.css"

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

COLOR_MODES = ("position", "kind", "sentence", "max_attention", "user")

# What the browser may set: the selection, the parameters and the display choices. Every other trait
# is set by Python only; a browser write of one is refused and reverted (see HeadSNE.set_state).
BROWSER_WRITABLE = frozenset(
    {
        "layer", "head", "mode", "perplexity", "learning_rate", "n_iter", "early_exaggeration",
        "exaggeration_iters", "seed", "restarts", "exclude_special", "quantile", "quantile_k", "speed",
        "edge_k", "selected", "hovered", "hovered_head", "color_mode", "label_density", "edge_direction",
    }
)  # fmt: skip
# Display-only traits: an invalid value is refused and reverted without touching the run.
DISPLAY_ONLY = frozenset(
    {
        "quantile",
        "quantile_k",
        "speed",
        "edge_k",
        "selected",
        "hovered",
        "hovered_head",
        "color_mode",
        "label_density",
        "edge_direction",
    }
)


class StrictInt(t.Int):
    """An int that is not a bool: ``True`` is not layer 1 (JSON ``true`` from the browser neither)."""

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, bool):
            self.error(obj, value)
        if isinstance(value, np.integer):
            value = int(value)
        return super().validate(obj, value)


class StrictFloat(t.Float):
    """A finite float that is not a bool; with ``positive``, also > 0."""

    def __init__(self, *args: Any, positive: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.positive = positive

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, bool):
            self.error(obj, value)
        value = super().validate(obj, value)
        if value is not None and not (math.isfinite(value) and (value > 0 or not self.positive)):
            raise t.TraitError(f"{self.name} must be a finite number{' > 0' if self.positive else ''}, got {value!r}")
        return value


class Array(t.TraitType):
    """A numpy array (or None) of a fixed dtype and number of dimensions; finite when floating."""

    info_text = "a numpy array or None"

    def __init__(self, dtype: str, ndim: int, **kwargs: Any) -> None:
        super().__init__(default_value=None, allow_none=True, **kwargs)
        self.dtype, self.ndim = np.dtype(dtype), ndim

    def validate(self, obj: Any, value: Any) -> np.ndarray | None:
        if value is None:
            return None
        a = np.asarray(value)
        if a.ndim != self.ndim or a.dtype.kind not in "fiub":
            raise t.TraitError(f"{self.name} must be a real {self.ndim}-D array, got {a.dtype} of shape {a.shape}")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise t.TraitError(f"{self.name} holds NaN or inf")
        return np.ascontiguousarray(a, dtype=self.dtype)


def check_parameters(params: dict[str, Any]) -> None:
    """Refuse keywords that are not settable traits (a typo must not pass silently)."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise TypeError(f"HeadSNE() got unknown parameter(s) {', '.join(unknown)}; known: {', '.join(PARAMETERS)}")


def data_traits(ex: Any) -> dict[str, Any]:
    """The traits set once per text, from an :class:`~headsne_widget.extraction.Extraction`."""
    return dict(
        text=ex.text, tokens=list(ex.tokens), special=[bool(s) for s in ex.special],
        offsets=[None if o is None else [int(o[0]), int(o[1])] for o in ex.offsets],
        model_name=ex.model_name, n_layers=ex.n_layers, n_heads=ex.n_heads, kv_groups=int(ex.kv_groups),
        max_attention=ex.max_attention,
    )  # fmt: skip


def _array(dtype: str, ndim: int) -> Array:
    return Array(dtype, ndim).tag(sync=True, **array_serializers(dtype))


def _partners() -> t.Dict:
    return t.Dict(default_value=None, allow_none=True).tag(
        sync=True, **arrays_serializers({"indices": "int32", "weights": "float32"})
    )


class HeadSNEModel(anywidget.AnyWidget):
    """The widget's synced traits (see ``js/PROTOCOL.md``), their checks, and what the browser may write.

    Trait notifications are serialised by one lock across the kernel's thread and the run's thread;
    ``_local.depth`` counts the notifications the current thread is handling (so nobody joins a run's
    thread while that thread may be waiting for the lock).
    """

    #: custom messages ``{"type": "control", "action": name}`` from the browser -> the method they call
    CONTROL_ACTIONS: ClassVar[dict[str, str]] = {"pause": "pause", "resume": "resume", "restart": "run", "stop": "stop",
                       "atlas": "start_atlas", "atlas_stop": "stop_atlas"}  # fmt: skip

    def __init__(self, **kwargs: Any) -> None:
        self._sync_lock = threading.RLock()
        self._local = threading.local()
        super().__init__(**kwargs)
        self.on_msg(self._on_custom_msg)

    def _on_custom_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        is_control = isinstance(content, dict) and content.get("type") == "control"
        name = content.get("action") if is_control else content
        method = self.CONTROL_ACTIONS.get(name) if isinstance(name, str) else None
        if method is None:
            known = ", ".join(self.CONTROL_ACTIONS)
            warnings.warn(
                f"HeadSNE ignored unknown control action {name!r}; known: {known}", RuntimeWarning, stacklevel=2
            )
            return
        getattr(self, method)()

    _esm = _front_end(_ESM_PATH, _MISSING_BUNDLE_ESM)
    _css = _front_end(_CSS_PATH, "")

    # data, set once per text (Python -> JS)
    text = t.Unicode("").tag(sync=True)
    tokens = t.List(t.Unicode()).tag(sync=True)
    offsets = t.List(t.Any()).tag(sync=True)  # [start, end] or None per token
    special = t.List(t.Bool()).tag(sync=True)
    model_name = t.Unicode("").tag(sync=True)
    n_layers = StrictInt(0).tag(sync=True)
    n_heads = StrictInt(0).tag(sync=True)
    kv_groups = StrictInt(1, min=1).tag(sync=True)  # query heads per key/value head
    max_attention = _array("float32", 3)  # (L, H, n)

    # selection and parameters (both ways)
    layer = StrictInt(0, min=0).tag(sync=True)
    head = StrictInt(0, min=0).tag(sync=True)
    mode = t.Enum(("attention", "hidden"), default_value="attention").tag(sync=True)
    perplexity = StrictFloat(20.0, positive=True).tag(sync=True)
    # None = "auto"; HeadSNE stores "auto" as None, so the browser sees a number or null
    learning_rate = t.Union([StrictFloat(), t.Enum(("auto",))], default_value=None, allow_none=True).tag(sync=True)
    n_iter = StrictInt(1000, min=1).tag(sync=True)
    early_exaggeration = StrictFloat(12.0, min=1.0, max=1000.0).tag(sync=True)
    exaggeration_iters = StrictInt(250, min=0).tag(sync=True)
    seed = StrictInt(0, min=0, max=2**32 - 1).tag(sync=True)
    restarts = StrictInt(1, min=1, max=1000).tag(sync=True)
    exclude_special = t.Bool(False).tag(sync=True)
    quantile = t.Bool(False).tag(sync=True)
    quantile_k = StrictInt(100, min=2).tag(sync=True)
    speed = StrictFloat(250.0, min=0.0).tag(sync=True)
    edge_k = StrictInt(5, min=1, max=100).tag(sync=True)

    # selection and display (both ways)
    selected = t.List(StrictInt(min=0)).tag(sync=True)  # token indices
    hovered = StrictInt(None, allow_none=True, min=0).tag(sync=True)
    # [layer, head] of the grid row the pointer rests on (long texts; see headsne_widget.prefetch)
    hovered_head = t.List(StrictInt(min=0), default_value=None, allow_none=True, minlen=2, maxlen=2).tag(sync=True)
    color_mode = t.Enum(COLOR_MODES, default_value="position").tag(sync=True)
    label_density = StrictFloat(0.5, min=0.0, max=1.0).tag(sync=True)
    edge_direction = t.Enum(("both", "to", "from", "off"), default_value="both").tag(sync=True)

    # run state and derived data (Python -> JS)
    frame = _array("float32", 2)  # (m, 2), aligned to the previous frame for display
    kept = t.List(t.Int()).tag(sync=True)
    iteration = t.Int(0).tag(sync=True)
    kl = t.Float(None, allow_none=True).tag(sync=True)
    best_kl = t.Float(None, allow_none=True).tag(sync=True)
    run_id = t.Int(0).tag(sync=True)
    status = t.Unicode("").tag(sync=True)
    state = t.Enum(("idle", "running", "paused", "done", "error"), default_value="idle").tag(sync=True)
    edges = _partners()  # per token: top-k partners (max(A_ij, A_ji); hidden mode: nearest neighbours)
    attends_to = _partners()  # per token i: top-k keys of row i of A (None in hidden mode)
    attended_by = _partners()  # per token i: top-k queries of column i of A (None in hidden mode)
    color_values = _array("float32", 1)  # (n,) for color_mode "max_attention" and "user"
    color_categories = t.List(t.Unicode()).tag(sync=True)  # non-empty: color_values are codes into it
    atlas = _array("float32", 3)  # (H, m, 2): a small embedding per head of the layer
    atlas_kl = _array("float32", 1)  # (H,)
    atlas_state = t.Enum(("idle", "running", "done", "error"), default_value="idle").tag(sync=True)
    atlas_progress = t.Int(0).tag(sync=True)

    # ------------------------------------------------------------------------------------ checks

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
            raise t.TraitError(f"learning_rate must be a finite number > 0, got {value!r}")
        return value

    @t.validate("selected", "hovered")
    def _valid_tokens(self, proposal: Any) -> Any:
        value, n = proposal.value, len(self.tokens)
        indices = [value] if isinstance(value, int) else list(value or [])
        bad = [i for i in indices if i >= n]
        if bad:
            name = proposal.trait.name
            raise t.TraitError(f"{name} token(s) {bad[:5]} out of range: the text has {n} tokens (0 to {n - 1})")
        return value if proposal.trait.name == "hovered" else sorted(set(indices))

    # ------------------------------------------------------------------------------- the browser

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """Apply an update from the browser: only what a user may set (``BROWSER_WRITABLE``). A refused
        or invalid value is put back in the browser and shown in ``status``; never raised."""
        refused = sorted(set(sync_data) - BROWSER_WRITABLE)
        allowed = {k: v for k, v in sync_data.items() if k in BROWSER_WRITABLE}
        error: Exception | None = None
        self._local.browser = True  # the whole message is one batch of changes
        try:
            super().set_state(allowed)
        except (t.TraitError, TypeError, ValueError) as err:
            error = err
        finally:
            self._local.browser = False
        run_error = None
        if refused:
            self.send_state(refused)
            self._set(status=f"the browser may not set {', '.join(refused)}: refused")
        if error is not None:
            self.send_state(sorted(allowed))  # put the browser's controls back to the values in force
            message = f"invalid value from the browser ({', '.join(sorted(allowed))}): {error}"
            if set(allowed) <= DISPLAY_ONLY:
                self._set(status=message)  # a display choice: refused, the run goes on
            else:
                run_error = (error, message)
        self._browser_update(run_error)

    def _browser_update(self, run_error: tuple[Exception, str] | None) -> None:
        """What the owner does after a browser update; ``run_error``: an invalid run parameter and its message."""

    def _set(self, **values: Any) -> None:
        """Set several traits as one update to the browser, serialised with the run's thread."""
        with self._sync_lock, self.hold_sync():
            for name, value in values.items():
                setattr(self, name, value)

    def _depth(self) -> int:
        """How many trait notifications this thread is handling now (0 outside any)."""
        return getattr(getattr(self, "_local", None), "depth", 0)

    def _in_browser_update(self) -> bool:
        return getattr(getattr(self, "_local", None), "browser", False)

    def notify_change(self, change: Any) -> None:
        # Serialise trait changes and their messages across the kernel thread and the run thread.
        lock = getattr(self, "_sync_lock", None)
        if lock is None:
            super().notify_change(change)
            return
        with lock:
            self._local.depth = self._depth() + 1
            try:
                super().notify_change(change)
            finally:
                self._local.depth -= 1


def _traited(check: Any, *args: Any) -> Any:
    """Run a plain check and turn its error into a TraitError (what traitlets reports for a bad value)."""
    try:
        return check(*args)
    except (TypeError, ValueError) as err:
        raise t.TraitError(str(err)) from None
