"""The widget's protocol, declared once: every synced trait with its type, default, role and meaning.

Everything else derives from :data:`TRAITS`: the trait model (:mod:`.model`), what the browser may write,
which changes restart a run, which keywords ``HeadSNE(...)`` takes, which attributes ``HeadSNE`` exposes, and
the trait tables of ``js/PROTOCOL.md`` (:func:`markdown_table`), the browser's trait names, types, writable set
and bounds, and HeadSNE's typed keywords (the files :mod:`.codegen` generates; a test compares them with these
declarations). Roles:

- ``data``: set by Python once per text;
- ``selection``: layer, head and mode; both ways; a change restarts the run;
- ``parameter``: both ways; a change restarts a run that is going or has finished;
- ``display``: both ways; display only, an invalid value from the browser is refused and the run goes on;
- ``state``: set by Python only (the run, derived data, the background jobs).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import traitlets as t

from ..affinity.sources import MODES as SOURCE_MODES
from ..affinity.sources import SOURCES
from ..affinity.spec import MAX_PERPLEXITY
from ..capture.maximum_attention import GRID_NORMS
from ..capture.scores import KINDS, SCORES
from ..embedding.rescaling import MAX_QUANTILE_K
from .serialization import array_serializers, arrays_serializers
from .trait_types import Array, StrictFloat, StrictInt, TokenIndices

__all__ = [
    "BROWSER_WRITABLE",
    "DISPLAY_ONLY",
    "KEYWORDS",
    "RESTARTS_RUN",
    "RUN_PARAMETERS",
    "TRAITS",
    "Array",
    "StrictFloat",
    "StrictInt",
    "TokenIndices",
    "TraitSpec",
    "describe",
    "markdown_table",
    "markdown_tables",
]

ROLES = ("data", "selection", "parameter", "display", "state")
COLOR_MODES = ("position", "kind", "sentence", "max_attention", "user", "head_share", "pos", "dep")
#: the sources of P (affinity/sources: one head, a layer's hidden states, a head's queries and keys, ...)
MODES = SOURCE_MODES
#: most iterations of one run: 100 000 at 512 tokens take about 30 s, at 8192 tokens 20 minutes
MAX_N_ITER = 100_000
#: the slowest playback but 0 (as fast as computed): a speed in (0, MIN_SPEED) is refused
MIN_SPEED = 0.1


def _modes_where(flag: str) -> str:  # the modes whose source has ``flag`` set: a description, never hand-kept
    return ", ".join(f'"{name}"' for name, src in SOURCES.items() if getattr(src, flag))


#: the browser's control messages ``{"type": "control", "action": name}`` (generated JS; the owner's ``CONTROLS``)
CONTROL_ACTIONS = ("pause", "resume", "restart", "stop", "atlas", "atlas_stop", "composition", "decomposition")


def _array(dtype: str, ndim: int) -> Array:
    return Array(dtype, ndim).tag(**array_serializers(dtype))


def _partners() -> t.Dict:
    return t.Dict(default_value=None, allow_none=True).tag(
        **arrays_serializers({"indices": "int32", "weights": "float32"})
    )


@dataclass(frozen=True)
class TraitSpec:
    """One synced trait: its name, traitlets type (with default and bounds), role, meaning, and whether
    ``HeadSNE(...)`` takes it as a keyword."""

    name: str
    trait: t.TraitType
    role: str
    doc: str
    keyword: bool = False
    #: the page keeps it in its state under its own name, as received (js/store/state.js); the others it decodes
    #: (arrays, edges, the text) or reads where it needs them
    mirrored: bool = True

    @property
    def browser_writable(self) -> bool:
        return self.role in ("selection", "parameter", "display")

    @property
    def restarts_run(self) -> bool:
        return self.role in ("selection", "parameter")


def _spec(
    name: str, trait: t.TraitType, role: str, doc: str, keyword: bool | None = None, mirrored: bool | None = None
) -> TraitSpec:
    """A trait's declaration. ``keyword``: by default the parameters and display traits; ``mirrored``: by
    default every trait but the arrays and edges (which the page decodes)."""
    assert role in ROLES, role
    keyword = role in ("parameter", "display") if keyword is None else keyword
    mirrored = not isinstance(trait, Array | t.Dict) if mirrored is None else mirrored
    return TraitSpec(name, trait, role, doc, keyword, mirrored)


_U = t.Unicode
TRAITS: tuple[TraitSpec, ...] = (
    # data, set once per text
    _spec("text", _U(""), "data", "the input text", mirrored=False),
    _spec("word", _U(""), "data", "the word whose occurrences across texts are the points (`HeadSNE.contexts`): "
          "`text` then holds their sentences, one a line, `tokens` the word as written in each, and the grid each "
          "head's largest attention to it in its own text; \"\" for a widget of one text", mirrored=False),
    _spec("tokens", t.List(_U()), "data", "word pieces, special tokens included (render as TEXT, never HTML)",
          mirrored=False),
    _spec("offsets", t.List(t.Any()), "data", "character span [start, end] of each token in `text`, or null",
          mirrored=False),
    _spec("special", t.List(t.Bool()), "data", "special tokens ([CLS], [SEP], <s>, ...), one bool per token",
          mirrored=False),
    _spec("point_labels", t.List(_U()), "data", "what the map labels each token's point with instead of its text, one "
          "a token (`HeadSNE.contexts`: each occurrence's sense or a snippet; render as TEXT); [] for the tokens' own "
          "(the page labels a word's occurrences by the words round each)", mirrored=False),
    _spec("model_name", _U(""), "data", "shown in the header"),
    _spec("n_layers", StrictInt(0), "data", "L"),
    _spec("n_heads", StrictInt(0), "data", "H, query heads per layer"),
    _spec("kv_groups", StrictInt(1, min=1), "data", "query heads per key/value head (GQA): the grid's separators"),
    _spec("max_attention", _array("float32", 3), "data", "float32 (L, H, n): the layer-wise maximum-attention grid"),
    _spec("max_attention_above_uniform", _array("float32", 3), "data", "float32 (L, H, n): the grid compared with "
          "uniform attention over the keys each query may see, max(0, max_i (A_ij m_i - 1) / (m_i - 1)) over rows "
          "with m_i >= 2 visible keys; drawn when `grid_norm` is \"above_uniform\""),
    _spec("score_names", t.List(_U()), "data", f"the scores of `scores`: {', '.join(SCORES)} (each in [0, 1]; "
          "docs/which-head.md gives the formulas)"),
    _spec("scores", _array("float32", 3), "data", "float32 (L, H, S): every head's scores in the order of "
          "`score_names` (Python: `w.head_scores`, a table); -1 where a score has no row to average (the "
          "browser never receives NaN)"),
    _spec("head_kinds", t.List(_U()), "data", f"per head, row-major (index layer * H + head): its kind, one of "
          f"{', '.join(KINDS)} (the rule: docs/which-head.md)"),
    _spec("head_map", _array("float32", 2), "data", "float32 (L * H, 2) in [-1, 1], rows as `head_kinds`: every "
          "head placed by how alike the heads are (a t-SNE of their scores, grid rows and received attention); "
          "null until computed (a background job, about a second); a click sets `layer` and `head`"),
    # the selection
    _spec("layer", StrictInt(0, min=0), "selection", "selected layer"),
    _spec("head", StrictInt(0, min=0), "selection", f"selected head (modes {_modes_where('per_head')})"),
    _spec("mode", t.Enum(MODES, default_value="attention"), "selection",
          "where P comes from: " + "; ".join(f"{name}, {src.describes}" for name, src in SOURCES.items())
          + " (a mode of several points a token: the first `query_rows` rows of `frame` are the first kind)"),
    # run parameters
    _spec("perplexity", StrictFloat(20.0, positive=True, max=MAX_PERPLEXITY), "parameter",
          f"modes {_modes_where('uses_perplexity')} only"),
    _spec("learning_rate", t.Union([StrictFloat(max=1e9), t.Enum(("auto",))], default_value=None,
                                   allow_none=True), "parameter",
          "null = auto: max(m / early_exaggeration, min(5, m / 2))"),
    _spec("n_iter", StrictInt(1000, min=1, max=MAX_N_ITER), "parameter", "iterations of a run"),
    _spec("early_exaggeration", StrictFloat(12.0, min=1.0, max=1000.0), "parameter", "P's factor at first",
          mirrored=False),
    _spec("exaggeration_iters", StrictInt(250, min=0, max=MAX_N_ITER), "parameter", "iterations exaggerated",
          mirrored=False),
    _spec("seed", StrictInt(0, min=0, max=2**32 - 1), "parameter", "the run's seed (restart r uses seed + r)"),
    _spec("restarts", StrictInt(1, min=1, max=1000), "parameter", "runs optimised together; the lowest KL shows"),
    _spec("exclude_special", t.Bool(False), "parameter", "leave special tokens out of P"),
    # display
    _spec("quantile", t.Bool(False), "display", "quantile-equidistant axes (thesis A.3)"),
    _spec("quantile_k", StrictInt(100, min=2, max=MAX_QUANTILE_K), "display", "quantile knots per axis"),
    _spec("speed", StrictFloat(250.0, min=0.0, max=1e6), "display",
          "iterations per second of playback (0 = as fast as computed, else at least 0.1)"),
    _spec("edge_k", StrictInt(5, min=1, max=100), "display", "top-k partners drawn for the hovered token"),
    _spec("selected", TokenIndices(), "display", "selected tokens: lasso (shift + drag) or box in the map, click / "
          "shift-click / ctrl-click in the text, Enter in the search box; Escape or the chip clears", keyword=False,
          mirrored=False),
    _spec("hovered", StrictInt(None, allow_none=True, min=0), "display", "the hovered token (written at most 20 "
          "times a second), null when the pointer leaves", keyword=False, mirrored=False),
    _spec("hovered_head", t.List(StrictInt(min=0), default_value=None, allow_none=True, minlen=2, maxlen=2),
          "display", "[layer, head] of the grid row the pointer has rested on for 120 ms where the mode's P is "
          "worth building ahead (its source's range of tokens): Python builds its P before the click; null again "
          "after a change of mode, perplexity or exclude_special", keyword=False, mirrored=False),
    _spec("color_mode", t.Enum(COLOR_MODES, default_value="position"), "display", "the token colouring; sentences "
          "and token kinds are computed in the browser from `text` and `offsets`; \"head_share\": the selected head's "
          "share of each token's state (`color_values`, from the decomposition, which it asks for); \"pos\" / \"dep\": "
          "each token's word's part of speech / dependency relation, the text parsed on demand with spaCy (the "
          "[syntax] extra; `color_values` codes into `color_categories`, \"(none)\" for a token of no word)"),
    _spec("label_density", StrictFloat(0.5, min=0.0, max=1.0), "display", "0 = no labels, 1 = all that fit"),
    _spec("edge_direction", t.Enum(("both", "to", "from", "off"), default_value="both"), "display",
          "which hover edges to draw"),
    _spec("grid_norm", t.Enum(GRID_NORMS, default_value="raw"), "display", "which grid to draw, for the legend "
          "to name: \"raw\" = `max_attention` (the thesis's), \"above_uniform\" = `max_attention_above_uniform`; "
          "set when a text is loaded to above_uniform for causal models (no head attends to a later token), raw "
          "for the others, unless given to HeadSNE(...)"),
    _spec("sort_heads", _U(""), "display", "what the grid sorts each layer's heads by, largest first (`head_order`): "
          f"a score ({', '.join(SCORES)}), or a dependency relation found in the text (\"det\", \"dobj\": each "
          "head's accuracy on it here, the text parsed with spaCy; docs/syntax.md); \"\" = model order; another "
          "name is refused with the relations found"),
    _spec("contours", t.Bool(False), "display", "the map's density contours, drawn by the browser (d3-contour, a "
          "kernel density of the points as drawn) while no run streams"),
    _spec("cluster_labels", t.Bool(True), "display", "draw the names of the map's clusters (`cluster_names`) on it, "
          "each at the member point nearest its members' centre on screen"),
    # run state and derived data
    _spec("frame", _array("float32", 2), "state", "float32 (m, 2), m = kept tokens: the latest frame, "
          "Procrustes-aligned to the previous one so head switches keep the view; 8 bytes a token, at most "
          "60 a second, the last one of a run always"),
    _spec("kept", t.List(t.Int()), "state", "token index of each frame row", mirrored=False),
    _spec("iteration", t.Int(0), "state", "iteration of `frame`", mirrored=False),
    _spec("kl", t.Float(None, allow_none=True), "state", "exact KL(P || Q) at the latest KL step (every 50 "
          "iterations and the last), never NaN: null when unknown"),
    _spec("best_kl", t.Float(None, allow_none=True), "state", "best KL of the background best-of-restarts check: a "
          "hint shows when `kl` > 1.2 x it"),
    _spec("run_id", t.Int(0), "state", "increments at each (re)start; the browser clears its recorded frames when it "
          "changes"),
    _spec("status", _U(""), "state", "one human line: \"running layer 2 head 5 - iteration 300/1000\", a capture's "
          "progress, or the error"),
    _spec("state", t.Enum(("loading", "idle", "running", "paused", "done", "error"), default_value="idle"), "state",
          "the widget's state"),
    _spec("progress", t.Float(None, allow_none=True, min=0.0, max=1.0), "state",
          "fraction done of what `status` names (loading, building P), or null"),
    _spec("edges", _partners(), "state", "per token: its top-k partners by max(A_ij, A_ji) (hidden: neighbours)"),
    _spec("attends_to", _partners(), "state", "per token i: top-k keys of row i of A (null in hidden mode)"),
    _spec("attended_by", _partners(), "state", "per token i: top-k queries of column i of A (null in hidden mode)"),
    _spec("color_values", _array("float32", 1), "state", "float32 (n,) for color modes max_attention and user"),
    _spec("color_categories", t.List(_U()), "state", "non-empty: color_values are integer codes into it"),
    _spec("head_relations", t.List(_U()), "state", "per head, row-major like `head_kinds`, while `color_mode` is "
          "\"pos\" or \"dep\": the dependency relation it tracks best in this text (its accuracy at least 0.5 on a "
          "relation with 3 pairs or more; \"(none)\" else): the head map colours by it; [] in other modes"),
    _spec("syntax_tree", _array("int32", 2), "state", "int32 (2, n) while `color_mode` is \"pos\" or \"dep\": "
          "each token's word's first token (row 0) and its word's syntactic head's first token (row 1), -1 for none "
          "(special tokens, roots): the hovered token's head and dependents drawn as arcs; null in other modes"),
    _spec("atlas", _array("float32", 3), "state", "float32 (H, m, 2): a small t-SNE per head of `atlas_layer`",
          mirrored=True),
    _spec("atlas_kl", _array("float32", 1), "state", "float32 (H,): each head's KL (0 where not done)",
          mirrored=True),
    _spec("atlas_heads", t.List(t.Int()), "state", "the heads of the atlas done so far"),
    _spec("atlas_layer", t.Int(None, allow_none=True), "state", "the layer the atlas shows, or null"),
    _spec("atlas_state", t.Enum(("idle", "running", "done", "error"), default_value="idle"), "state",
          "the atlas job's state"),
    _spec("atlas_n_iter", t.Int(None, allow_none=True), "state", "iterations of each atlas thumbnail's run (the "
          "map's are `n_iter`: KLs compare only between runs of the same length and seed)"),
    _spec("atlas_seed", t.Int(None, allow_none=True), "state", "the seed of the atlas thumbnails' runs"),
    _spec("head_order", _array("int32", 2), "state", "int32 (L, H): row k of layer l's grid shows head "
          "head_order[l][k] (`sort_heads` largest first, ties and NaN in model order; the identity when unsorted)"),
    _spec("related", t.List(t.Dict()), "state", "the heads most like the selected one, most similar first: "
          "[{layer, head, similarity}] (similarity in [0, 1]: the mean cosine of their scores, grid rows and "
          "received attention); [] in hidden mode; a click sets `layer` and `head`"),
    _spec("query_rows", t.Int(0), "state", "query-key mode: rows 0..query_rows-1 of `frame` are the queries and "
          "the rest the keys of the same tokens (`kept` lists each token twice); 0 in the other modes"),
    _spec("cluster_names", t.List(_U()), "state", "the names of the map's clusters, one a cluster (a density "
          "clustering of the 2-D map, each named by its most characteristic tokens or senses; render as TEXT); [] "
          "for none"),
    _spec("cluster_of", _array("int32", 1), "state", "int32 (m,): the cluster of each row of `frame` (an index into "
          "`cluster_names`, -1 for none), set with `cluster_names` when a run ends; null for none"),
    _spec("attribution_request", t.List(StrictInt(min=0), default_value=None, allow_none=True, minlen=4, maxlen=4),
          "display", "[layer, head, i, j]: why query i attends to key j in that head (a click on a token's "
          "partner); Python answers in `attribution`", keyword=False, mirrored=False),
    _spec("attribution", t.Dict(default_value=None, allow_none=True), "state", "the answer to "
          "`attribution_request`: {layer, head, i, j, state (\"running\" / \"done\" / \"error\"), error, score, "
          "pairs: [{query, key, score, share}] (the largest (query-side, key-side) component pairs of the "
          "pre-softmax score, `score_attribution`), n_pairs, seconds}", mirrored=True),
    _spec("composition", t.Dict(default_value=None, allow_none=True), "state", "after the control message "
          "\"composition\": {state, error, layer, head, links: [{kind (\"q\" / \"k\" / \"v\"), layer, head, "
          "score}], seconds}: the earlier heads feeding the selected head most (`head_composition`, once per "
          "text); follows the selection", mirrored=True),
    _spec("decomposition_state", t.Enum(("idle", "running", "done", "error"), default_value="idle"), "state",
          "the decomposition panel's job: idle until the browser asks (control \"decomposition\"), then it follows "
          "the selected layer; a refusal (beyond the memory budget) is \"error\" with `status` saying why"),
    _spec("decomposition_layer", t.Int(None, allow_none=True), "state", "the layer of `decomposition_terms` and "
          "`decomposition_heads`, or null"),
    _spec("decomposition_terms", _array("float32", 2), "state", "float32 (4, n): each token's state at "
          "`decomposition_layer` split by what wrote it, shares t.e/||e||^2 summed per kind: input, attention, "
          "feed-forward, correction (sum 1 per token, each may be negative; docs/what-a-head-writes.md)",
          mirrored=True),
    _spec("decomposition_heads", _array("float32", 2), "state", "float32 (H, n): the share of each head of "
          "`decomposition_layer` in each token's state at that layer", mirrored=True),
)  # fmt: skip

_BY_ROLE = {role: tuple(s.name for s in TRAITS if s.role == role) for role in ROLES}
#: what the browser may set; every other trait is Python's only
BROWSER_WRITABLE = frozenset(s.name for s in TRAITS if s.browser_writable)
#: display-only traits: an invalid browser value is refused without touching the run
DISPLAY_ONLY = frozenset(_BY_ROLE["display"])
#: traits whose change restarts a run that is going or has finished
RUN_PARAMETERS = _BY_ROLE["parameter"]
#: traits whose change (re)starts the run
RESTARTS_RUN = frozenset(s.name for s in TRAITS if s.restarts_run)
#: keywords of ``HeadSNE(...)`` besides the selection's own
KEYWORDS = tuple(s.name for s in TRAITS if s.keyword)


ROLE_TITLES = {
    "data": "Data, set by Python once per text",
    "selection": "The selection, both ways: a change restarts the run (layer and head are written together)",
    "parameter": "Run parameters, both ways: a change restarts a run that is going or has finished",
    "display": "Display, both ways: an invalid value from the browser is refused and the run goes on",
    "state": "State, set by Python only: the run, derived data, the background jobs",
}


def describe(trait: t.TraitType) -> str:
    """A trait's type for the protocol's tables: its kind, its choices or bounds."""
    if isinstance(trait, Array):
        return f"{trait.dtype.name} array, {trait.ndim}-D"
    if isinstance(trait, t.Enum):
        return " / ".join(f'"{v}"' for v in trait.values or ())
    if isinstance(trait, t.Union):
        return " or ".join(describe(part) for part in trait.trait_types)
    if isinstance(trait, t.Dict):  # the partners (serialized arrays), or a small reply
        return "{indices: int32 (n, k), weights: float32 (n, k)}" if "to_json" in trait.metadata else "dict or null"
    if isinstance(trait, TokenIndices):
        return "list of token indices"
    kind = {t.Bool: "bool", t.Int: "int", t.Float: "float", t.Unicode: "str", t.List: "list"}
    name = next((label for cls, label in kind.items() if isinstance(trait, cls)), type(trait).__name__)
    low, high = getattr(trait, "min", None), getattr(trait, "max", None)
    bounds = "" if low is None and high is None else f" in [{_number(low)}, {_number(high)}]"
    return name + bounds + (" or null" if trait.allow_none else "")


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return "..."
    return f"{value:g}" if isinstance(value, float) else str(value)


def markdown_table(role: str) -> str:
    """The trait table of ``js/PROTOCOL.md`` for one role: trait, type, default, meaning."""
    rows = [f"{ROLE_TITLES[role]}:", "", "| trait | type | default | meaning |", "| --- | --- | --- | --- |"]
    for spec in TRAITS:
        if spec.role == role:
            default = spec.trait.default_value
            default = None if isinstance(spec.trait, t.Dict) else [] if default is t.Undefined else default
            shown = "null" if default is None else repr(default).replace("'", '"')
            shown = {"True": "true", "False": "false"}.get(shown, shown)
            meaning = spec.doc.replace("|", "\\|")  # KL(P||Q), ||e||: a bare bar would split the cell
            rows.append(f"| `{spec.name}` | {describe(spec.trait)} | {shown} | {meaning} |")
    return "\n".join(rows)


def markdown_tables() -> str:
    """Every trait table, as ``js/PROTOCOL.md`` holds them between its ``traits`` markers."""
    return "\n\n".join(markdown_table(role) for role in ROLES)


class _ChosenOnLoad:
    """A default the widget chooses when the text is loaded (shown as such by ``help``)."""

    def __init__(self, how: str) -> None:
        self.how = how

    def __repr__(self) -> str:
        return f"<{self.how}>"


#: keywords whose default is chosen when the text is loaded, not the trait's own
_CHOSEN_ON_LOAD = {"grid_norm": _ChosenOnLoad("above_uniform for causal models, else raw")}


def keyword_signature(init: Callable[..., Any]) -> inspect.Signature:
    """The signature of ``init`` (``HeadSNE.__init__``) with its ``**params`` spelled out: every keyword of
    :data:`KEYWORDS` with its type (params.HeadSNEParams') and default, so ``help(HeadSNE)`` and the IDEs that
    read signatures list them on every Python version."""
    from .params import HeadSNEParams  # generated from this module: imported here, so regenerating never needs it

    signature = inspect.signature(init)
    named = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    hints = HeadSNEParams.__annotations__
    keywords = [
        inspect.Parameter(
            spec.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=_CHOSEN_ON_LOAD.get(spec.name, spec.trait.default_value),
            annotation=getattr(hints[spec.name], "__forward_arg__", hints[spec.name]),  # a TypedDict's are ForwardRefs
        )
        for spec in TRAITS
        if spec.keyword
    ]
    return signature.replace(parameters=[*named, *keywords])
