"""``HeadSNE``: the user-facing widget, a thin API that owns its synced model (as jupyter-scatter's ``Scatter``
owns its widget) and delegates the rest to its :class:`~headsne_widget.widget.owner.Owner`.

Which thread owns what is written down once, in :mod:`headsne_widget.widget.jobs`: the thread that made the
widget (a kernel's) alone sets traits; background jobs hand their results over. Every public method and
attribute first applies what is waiting, so what Python reads is never older than the last result a job
handed over, and no call (from a cell, an observer or a browser message) can deadlock with a job.
"""

from __future__ import annotations

import functools
import math
import numbers
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import traitlets

from ..capture.extraction import CaptureOptions, Extraction, check_text
from .atlas import ATLAS_N_ITER
from .loading import NOT_GIVEN, Asked, check_tokens, contexts_job, load_job
from .model import check_keywords
from .owner import Owner
from .params import HeadSNEAttributes, HeadSNEParams, Mode
from .protocol import keyword_signature

if TYPE_CHECKING:
    import pandas as pd
    from typing_extensions import Unpack  # typing's from Python 3.11

    from ..capture.decompose import Decomposition

__all__ = ["HeadSNE"]


class HeadSNE(HeadSNEAttributes):
    """Layer-wise maximum attention and a live attention-head t-SNE of a text, as a Jupyter widget.

    Parameters
    ----------
    text : str or Extraction
        A text (run through ``model`` in the background, see :func:`headsne_widget.extract`; the widget shows
        its progress at once) or a ready extraction.
    model, tokenizer, device, max_tokens : passed to :func:`~headsne_widget.extract`.
    layer, head, mode : the selection: ``"attention"`` = P of that head, ``"hidden"`` = perplexity t-SNE of
        that layer's output hidden states, ``"query-key"`` = the head's queries and keys together. Without
        ``head`` a mode with heads opens on the head (of ``layer``, when given) whose attention is most concentrated
        on tokens the text decides, not on the first or special tokens, the query itself or its neighbours
        (:func:`~headsne_widget.widget.loading.opening_head`), and the status says so; otherwise layer 0, head 0.
    autostart : start the first run as soon as the text is captured.
    **params : the other settings (perplexity, learning_rate, n_iter, ...): each keyword's type, bounds and
        default are in the signature above, in :class:`~headsne_widget.widget.params.HeadSNEParams` (which mypy
        and IDEs check calls against) and in ``js/PROTOCOL.md``, all generated from ``widget/protocol.py``.

    Every synced trait is an attribute (``w.layer``, ``w.kl``, ...); those a user may set are settable.
    Setting ``layer``, ``head`` or ``mode`` restarts the run; a run parameter restarts a run that is going or
    has finished; changes made together (``w.layer, w.head = 2, 5``) start one run. ``w.widget`` is the
    ipywidget itself (for ``ipywidgets.VBox([w.widget])``, ``traitlets.link`` or ``mo.ui.anywidget``).
    """

    def __init__(
        self,
        text: str | Extraction,
        model: Any = None,
        *,
        layer: int | None = None,
        head: int | None = None,
        mode: Mode = "attention",
        autostart: bool = True,
        tokenizer: Any = None,
        device: str | None = None,
        max_tokens: int | None = None,
        **params: Unpack[HeadSNEParams],
    ) -> None:
        check_keywords(params)
        given = (0 if head is not None else NOT_GIVEN) if layer is None else layer  # a head alone: of layer 0
        asked = Asked(given, NOT_GIVEN if head is None else head, mode, autostart, params.get("grid_norm", NOT_GIVEN))
        if isinstance(text, Extraction):
            if model is not None or tokenizer is not None or max_tokens is not None:
                raise TypeError("model, tokenizer and max_tokens do not apply when text is already an Extraction")
            check_tokens(text)  # the data go in the widget's opening message; a selection out of range raises here
            self._owner = Owner.from_extraction(text, asked, params)
        else:
            check_text(text)
            load = functools.partial(load_job, text=text, options=CaptureOptions(model, tokenizer, device, max_tokens))
            self._owner = Owner.start_loading(asked, load, params)
        self.widget = self._owner.widget

    @classmethod
    def contexts(
        cls,
        word: str,
        texts: Iterable[str],
        model: Any = None,
        *,
        labels: Any = None,
        layer: int | None = None,
        term: str = "hidden",
        autostart: bool = True,
        **params: Unpack[HeadSNEParams],
    ) -> HeadSNE:
        """A word across many texts: one point per occurrence of ``word`` in ``texts`` (whole words, any case; a word
        split into pieces is the mean of its pieces), t-SNE'd live from its hidden states at ``layer`` (None: the
        last; perplexity-calibrated Gaussians, as ``mode="hidden"``). The layer control moves the same points from
        layer to layer, each new map aligned to the last; ``labels`` (one per occurrence, e.g. senses) colour them
        (``w.color_by`` sets another colouring); the grid shows each head's largest attention to the word in its own
        text; the text panel the sentences; ``w.selected`` are occurrence indices into ``w.occurrences``.

        The texts run in the background (progress shown), one capture pass each (its hidden states are the points).
        ``term``: "hidden", or what one kind of component wrote ("input", "attention", "mlp"; see ``word_contexts``).
        Raises at once for a word or texts that cannot be searched; a word found nowhere, or ``labels`` of the
        wrong length, is the widget's error (``wait_ready`` raises it). See docs/word-contexts.md.
        """
        from .._checks import check_texts
        from ..capture.occurrences import check_term, check_word

        check_keywords(params)
        word, items, term = check_word(word), check_texts(texts), check_term(term)
        if labels is not None and (isinstance(labels, (str, bytes)) or not hasattr(labels, "__len__")):
            raise TypeError(f"labels must be one label per occurrence (a list or array), got {type(labels).__name__}")
        self = cls.__new__(cls)
        asked = Asked(NOT_GIVEN if layer is None else layer, 0, "hidden", autostart,
                      params.get("grid_norm", NOT_GIVEN), labels)  # fmt: skip
        load = functools.partial(contexts_job, word=word, texts=items, model=model, term=term)
        self._owner = Owner.start_loading(asked, load, {"word": word, **params})
        self.widget = self._owner.widget
        return self

    @property
    def occurrences(self) -> pd.DataFrame:
        """The occurrences of a widget made by :meth:`contexts` (waits for them), one row per point: ``text`` index,
        ``start``/``end`` character span in it, ``token_start``/``token_end`` token span, ``sentence`` around it
        starting at ``sentence_start``, ``full_text``. ``w.occurrences.iloc[w.selected]``: the selected ones."""
        ex = self._owner.ready()
        found = getattr(ex, "occurrences", None)
        if found is None:
            raise AttributeError("this widget shows one text: occurrences come with HeadSNE.contexts(word, texts)")
        return found.copy()

    @property
    def extraction(self) -> Extraction:
        """The backend's arrays for this text (waits for the capture): tokens, every head, hidden states."""
        return self._owner.ready()

    @property
    def embedding(self) -> np.ndarray | None:
        """The frame shown, raw (not aligned): float32 (m, 2), rows in the order of ``kept``."""
        self._owner.sync()
        return None if self._owner.embedding is None else self._owner.embedding.copy()

    @property
    def head_scores(self) -> pd.DataFrame:
        """Every head's scores and kind, one row per (layer, head) (waits for the capture); see
        :func:`headsne_widget.head_scores`. The browser gets them as ``scores``, ``score_names`` and ``head_kinds``."""
        from ..capture.scores import head_scores

        return head_scores(self._owner.ready())

    @property
    def decomposition(self) -> Decomposition:
        """The selected layer's output split by what wrote it, ``decompose(w.extraction, w.layer)`` (waits for the
        capture; see :func:`headsne_widget.capture.decompose.decompose`): computed on first use (one more forward
        pass, with hooks) and kept per extraction and layer; beyond the memory budget a ``MemoryBudgetError``. A
        widget made from an extraction needs one extracted with ``components=True``. The decomposition panel
        shows its shares summed per term kind and per head of the layer."""
        from .decomposition_view import widget_decomposition

        ex = self._owner.ready()
        return widget_decomposition(ex, self.widget.layer)

    @property
    def kl_history(self) -> np.ndarray:
        """Exact KL(P || Q) at every reported step of the current run, up to the frame shown."""
        return np.array(self._history("kl_history"), dtype=np.float64)

    @property
    def kl_iterations(self) -> np.ndarray:
        """The iteration of each entry of ``kl_history``."""
        return np.array(self._history("kl_iterations"), dtype=np.int64)

    @property
    def atlas(self) -> np.ndarray | None:
        """float32 (H, m, 2) per head of ``atlas_layer``: a small t-SNE each, NaN for heads not done."""
        return self._missing_as_nan("atlas")

    @property
    def atlas_kl(self) -> np.ndarray | None:
        """float32 (H,): each atlas head's KL, NaN for heads not done."""
        return self._missing_as_nan("atlas_kl")

    @property
    def color_by(self) -> Any:
        """The colouring: a mode name (``position``, ``kind``, ``sentence``, ``max_attention``, ``head_share``;
        ``pos`` / ``dep``, each token's word's part of speech / dependency relation, the text parsed with spaCy on
        demand, the ``[syntax]`` extra) or the user's per-token values (numbers, or labels shown as categories),
        set with ``w.color_by = values``."""
        self._owner.sync()
        return self._owner.user_colors if self.widget.color_mode == "user" else self.widget.color_mode

    @color_by.setter
    def color_by(self, value: Any) -> None:
        self._owner.colour_by(value)

    def wait_ready(self, timeout: float | None = None) -> Extraction:
        """Block until the text is captured; raise the capture's error, or TimeoutError after ``timeout`` s
        (``timeout`` as for :meth:`wait`)."""
        return self._owner.ready(_check_timeout(timeout))

    def run(self) -> None:
        """(Re)start the optimisation for the current selection and parameters."""
        self._owner.restart()

    def wait(self, timeout: float | None = None) -> float | None:
        """Block until the run for the current settings ends and its hover lines (``edges``) are in; return its final
        KL, the exact KL of the frame shown (of a stopped run's too; None if nothing ran, if the run was stopped
        before its first frame, or if the memory budget left a stopped frame's KL uncomputed: the status says why).

        From an observer too: it waits for the run of the settings in force when it is called. Raises the
        run's error (e.g. DegenerateAffinitiesError), TimeoutError after ``timeout`` seconds, and RuntimeError
        for a paused run (which would never end on its own). ``timeout``: None (no limit) or a finite number of
        seconds >= 0 (not a bool); anything else raises before waiting.
        """
        return self._owner.wait(_check_timeout(timeout))

    def pause(self) -> None:
        """Hold the running optimisation between two steps: no CPU work until ``resume``."""
        self._owner.pause()

    def resume(self) -> None:
        """Continue a paused run where it stopped."""
        self._owner.resume()

    def stop(self) -> None:
        """End the current run (returns at once). Its last frame stays shown, and the run's last word is that frame's
        exact KL: ``kl``, ``wait()``, ``kl_history`` and a saved page give it, once the job has computed it (any
        call waits for that). A run stopped before its first frame shows nothing, and ``wait`` returns None for it;
        ``run`` starts a new one."""
        self._owner.stop()

    def start_atlas(self, n_iter: int = ATLAS_N_ITER) -> None:
        """Compute the head atlas of the current layer in the background: ``atlas`` (H, m, 2) and ``atlas_kl``
        (H,) fill in head by head; a new start replaces a running atlas; ``stop_atlas`` cancels it."""
        self._owner.start_atlas(n_iter)

    def stop_atlas(self) -> None:
        """Cancel the head atlas (returns at once; the heads done so far stay, the others are missing)."""
        self._owner.stop_atlas()

    def save_html(self, path: str | os.PathLike, *, view: str = "widget") -> Any:
        """Write the current state as one standalone, offline HTML file: the widget itself with its linked
        views (``view="widget"``) or bokeh figures (``"bokeh"``); see :mod:`headsne_widget.export`."""
        from ..export import save_html  # the one call up the pipeline (tests/test_layout.py CALLS_UP)

        self._owner.sync()
        return save_html(self, path, view=view)

    def observe(self, handler: Any, names: Any = traitlets.All, **kwargs: Any) -> None:
        """``handler(change)`` on a change of the synced traits ``names`` (traitlets' ``observe``)."""
        self.widget.observe(handler, names=names, **kwargs)

    def unobserve(self, handler: Any, names: Any = traitlets.All, **kwargs: Any) -> None:
        self.widget.unobserve(handler, names=names, **kwargs)

    def close(self) -> None:
        """Stop every job (at once: they end at their next step), close the comm and drop the arrays."""
        self._owner.close()

    def _read_trait(self, name: str) -> Any:
        """A synced attribute (the properties of :class:`~.params.HeadSNEAttributes`): read after the owner's sync."""
        self._owner.sync()
        return getattr(self.widget, name)

    def _write_trait(self, name: str, value: Any, *, restarts: bool) -> None:
        """``w.name = value``: set on the owner thread; a selection or run parameter restarts the run."""
        self._owner.set_by_user(name, value, restarts=restarts)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def _history(self, name: str) -> list[Any]:
        self._owner.sync()
        run = self._owner.run
        return [] if run is None else getattr(run.record, name)[: run.kl_count]

    def _missing_as_nan(self, name: str) -> np.ndarray | None:
        self._owner.sync()
        values = getattr(self.widget, name)
        if values is None:
            return None
        out = np.array(values, dtype=np.float32)
        missing = np.ones(len(out), dtype=bool)
        missing[[h for h in self.widget.atlas_heads if h < len(out)]] = False
        out[missing] = np.nan
        return out


def _check_timeout(timeout: Any) -> float | None:
    """``timeout`` of ``wait`` and ``wait_ready``: None or a finite number of seconds >= 0 (not a bool)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout must be None or a number of seconds, got {type(timeout).__name__}: {timeout!r}")
    seconds = float(timeout)
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"timeout must be a finite number of seconds >= 0 (or None), got {timeout!r}")
    return seconds


# help(HeadSNE) and the IDEs that read signatures list every keyword of **params with its type and default
HeadSNE.__init__.__signature__ = keyword_signature(HeadSNE.__init__)  # type: ignore[attr-defined]
