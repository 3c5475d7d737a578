"""The owner's colours: the user's colouring (a mode, or values per token kept for "user" mode), the values of
the modes that follow the selection ("max_attention", "head_share") and those of the parse ("pos", "dep",
:mod:`..syntax_view`)."""

from __future__ import annotations

from typing import Any

from ...affinity.sources import source
from ...capture.extraction import Extraction
from ..colors import color_traits
from ..syntax_view import SYNTAX_COLOURS, head_relations, syntax_colours, syntax_tree
from .panels import Panels

__all__ = ["Colours"]


class Colours(Panels):
    """Colour modes and the user's values (see the module doc)."""

    def colour_by(self, value: Any) -> None:
        """The user's colouring: a mode name, or values per token kept for "user" mode (checked first; "pos" and
        "dep" parse the text first: no parser raises ``ParserUnavailableError`` and nothing changes)."""
        traits = color_traits(value, self.ready().n_tokens)  # raises before anything changes
        if traits.get("color_mode") in SYNTAX_COLOURS:
            syntax_colours(self.ready(), traits["color_mode"])  # parsed (and kept) now, or raises
        if traits.get("color_mode") == "user":  # kept for "your values" after another mode
            self.user_colors = value
        self.write(traits)

    def take_colors(self, ex: Extraction) -> bool:
        """The colouring asked for at construction (``HeadSNE.contexts``'s labels); False (the widget's error)
        when it does not fit the points."""
        colors = self.asked.colors
        if colors is None:
            return True
        if hasattr(colors, "__len__") and not isinstance(colors, str) and len(colors) != ex.n_tokens:
            word = getattr(ex, "word", "")
            return self.refuse(ValueError(f"labels has {len(colors)} entries but {word!r} has {ex.n_tokens} "
                                          f"occurrences in the texts: give one label each"))  # fmt: skip
        try:
            self.colour_by(colors)
        except (TypeError, ValueError) as err:
            return self.refuse(err)
        return True

    def recolour(self, previous: str = "position") -> None:
        """Colour values for "max_attention" mode (the selected head's, none for a source without heads) and for
        "user" mode (the user's values again, after another mode replaced them). "user" without values (the
        browser chose it before ``w.color_by = values``) goes back to ``previous`` and the status says how to give
        them: never another mode's values shown as the user's."""
        w = self.widget
        if self.ex is None:
            return
        if w.color_mode not in SYNTAX_COLOURS and (w.syntax_tree is not None or w.head_relations):
            self.write({"syntax_tree": None, "head_relations": []})
        if w.color_mode == "max_attention":
            w.color_values = self.ex.max_attention[w.layer, w.head] if source(w.mode).per_head else None
            w.color_categories = []
        elif w.color_mode == "head_share":  # the selected head's share of each token's state (the decomposition)
            self.colour_by_share()
        elif w.color_mode == "user" and self.user_colors is None:
            status = "no values of yours to colour by: give one per token with w.color_by = values"
            self.write({"color_mode": previous if previous != "user" else "position", "status": status})
        elif w.color_mode == "user":
            traits = color_traits(self.user_colors, self.ex.n_tokens)
            self.write({"color_values": traits["color_values"], "color_categories": traits["color_categories"]})
        elif w.color_mode in SYNTAX_COLOURS:
            self.colour_by_syntax(previous)

    def colour_by_syntax(self, previous: str) -> None:
        """Colour modes "pos" / "dep": each token's word's label from the text's parse; no parser (or a parse that
        fails) goes back to ``previous`` with the reason in the status line, never a half-coloured map."""
        w, ex = self.widget, self.ex
        assert ex is not None
        try:
            values, categories = syntax_colours(ex, w.color_mode)
        except (ImportError, ValueError) as err:  # ImportError: ParserUnavailableError, which names the extra
            back = "position" if previous in SYNTAX_COLOURS else previous
            self.write({"color_mode": back, "status": f"cannot colour by {w.color_mode}: {err}"})
            return
        tree, heads = syntax_tree(ex), head_relations(ex) if ex.has_attention else []
        self.write(
            {"color_values": values, "color_categories": categories, "syntax_tree": tree, "head_relations": heads}
        )
