"""What each layer of a transformer writes into its residual stream, read by hooks in one forward pass
(:class:`Trace`): the per-head contexts and the output projection's per-head slices, the values, the
feed-forward's output, and every LayerNorm/RMSNorm the stream passes through, as a per-token linear map.

Nothing here is a table of module names. A layer is an entry of the model's ``ModuleList`` of ``n_layers``
blocks; its attention is the call to transformers' ``AttentionInterface`` (the capture's own function, which
computes what eager attention does, in query chunks); its output projection is the first ``Linear``/``Conv1D``
called after it whose input equals that call's output (the heads' contexts side by side); the feed-forward's
output is the last ``Linear``/``Conv1D`` the layer calls; a norm is a leaf module with a 1-D gain and an epsilon
(``nn.LayerNorm``, or an RMSNorm of gain ``w`` or ``1 + w``) and it is placed by what it reads: the layer's
output (post-LN, BERT), the attention's or the feed-forward's output (Gemma 2's sandwich norms), or, after the
last layer, its output (a decoder's final norm). The value biases are found by matching the value columns bit
for bit with a biased projection's output columns (fused q/k/v included). :mod:`.decompose` walks the result.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..budget import within_budget
from ..errors import UnsupportedAttentionError
from .attention import can_capture, capture_attention_forward
from .loading import LoadedModel, input_device, load_model
from .masks import capture_mask
from .qk_trace import find_qk
from .trace_layers import LayerTrace, NormMap, layer_trace, norm_map

if TYPE_CHECKING:
    from .extracted import Extraction

__all__ = [
    "COMPONENTS_IMPLEMENTATION",
    "TRACE_ARRAYS_PER_LAYER",
    "Trace",
    "allow_components",
    "check_components",
    "check_trace_budget",
    "finish_trace",
    "keep_trace",
    "trace_bytes",
    "trace_of",
    "traced_layers",
    "tracing",
]

COMPONENTS_IMPLEMENTATION = "headsne_components"
_EVENTS: contextvars.ContextVar[list | None] = contextvars.ContextVar("headsne_component_events", default=None)
_TRACES: weakref.WeakKeyDictionary[Extraction, Trace] = weakref.WeakKeyDictionary()
_MODELS: weakref.WeakKeyDictionary[Extraction, Any] = weakref.WeakKeyDictionary()
#: (n, d) arrays a layer's trace keeps, at most: its input and output, the heads' context, the values, the
#: attention's and the feed-forward's outputs, the queries and keys, and the forward pass's own working set
TRACE_ARRAYS_PER_LAYER = 10
_REGISTERED = False


@dataclass
class Trace:
    """Every layer's :class:`LayerTrace`, and the final norm after the last layer (None: the last hidden state
    is the last layer's output)."""

    model_name: str
    layers: list[LayerTrace]
    final_norm: NormMap | None = None
    dtype: torch.dtype = torch.float32
    #: ``decompose.value_norms`` of this trace, once computed (every head's, for each norm-mode click)
    value_norms: Any = field(default=None, repr=False)

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers)


@dataclass
class _Recorder:
    layers: list[Any]
    current: int | None = None
    events: list[tuple] = field(default_factory=list)
    initial: list[tuple] = field(default_factory=list)  # norms called before the first layer (the embeddings')
    final: list[tuple] = field(default_factory=list)
    traces: list[LayerTrace] = field(default_factory=list)
    x_in: torch.Tensor | None = None
    name: str = ""


def trace_bytes(ex: Extraction) -> int:
    """The estimated bytes of ``ex``'s trace (:data:`TRACE_ARRAYS_PER_LAYER` (n, d) arrays a layer)."""
    states = ex.states.states
    return ex.n_layers * TRACE_ARRAYS_PER_LAYER * int(states[0].numel()) * states.element_size()


def check_trace_budget(needed: int, n_tokens: int, n_layers: int) -> None:
    """MemoryBudgetError before a trace of ``needed`` bytes is made past the memory budget."""
    within_budget(needed, f"the components of {n_tokens} tokens over {n_layers} layers", "a shorter text (max_tokens=)")


def check_components(components: Any) -> bool:
    """``components=`` of a capture, checked at its boundary (before the model loads): True or False."""
    if not isinstance(components, bool):
        raise TypeError(f"components must be True or False, got {components!r}")
    return components


def traced_layers(loaded: LoadedModel, n: int, components: bool = True) -> int | None:
    """The layers to trace in the capture's own pass for ``components`` (False: None), after the trace's memory
    budget is checked; None where the model's config does not say its shape (the trace then takes a pass of its
    own)."""
    if not components:
        return None
    config = loaded.model.config
    layers, width = getattr(config, "num_hidden_layers", None), getattr(config, "hidden_size", None)
    if not (isinstance(layers, int) and isinstance(width, int) and can_capture(loaded.model)):
        return None
    itemsize = torch.empty((), dtype=loaded.model.dtype).element_size()
    check_trace_budget(layers * TRACE_ARRAYS_PER_LAYER * n * width * itemsize, n, layers)
    return layers


def allow_components(ex: Extraction, model: Any) -> None:
    """Let :func:`trace_of` make ``ex``'s components with ``model`` when first asked (the widget: the model its
    text was given with), so that a view that needs them works without ``extract(..., components=True)``."""
    _MODELS[ex] = model


def keep_trace(ex: Extraction, model: Any) -> Trace:
    """Run ``model`` on ``ex``'s tokens with the component hooks and keep the trace with ``ex``
    (``extract(..., components=True)``): later :func:`trace_of` calls need no model. Refused before the forward
    pass where the trace would exceed the memory budget."""
    check_trace_budget(trace_bytes(ex), ex.n_tokens, ex.n_layers)
    if isinstance(model, torch.nn.Module):  # a loaded model: its tokenizer is not needed, the tokens are given
        model = LoadedModel(model, None, type(model).__name__, input_device(model))  # type: ignore[arg-type]
    return _run_trace(ex, model if isinstance(model, LoadedModel) else load_model(model))


def trace_of(ex: Extraction, model: Any = None) -> Trace:
    """The trace kept with ``ex`` (``model`` then unused), else one made now from ``model`` (or the model
    :func:`allow_components` gave) and kept with ``ex``; neither: a clear error."""
    trace = _TRACES.get(ex)
    if trace is not None:
        return trace
    model = _MODELS.get(ex) if model is None else model
    if model is None:
        raise ValueError(
            f"this extraction of {ex.model_name} holds no components: extract it with "
            "extract(text, model, components=True), or pass the model that made it, e.g. decompose(ex, layer, "
            "model=...)"
        )
    return keep_trace(ex, model)


def _run_trace(ex: Extraction, loaded: LoadedModel) -> Trace:
    """A forward pass of its own with the component hooks (the trace of an extraction made without them)."""
    if ex.n_tokens < 2:
        raise ValueError(f"a decomposition needs at least 2 tokens, the text has {ex.n_tokens}: give a longer text")
    model = loaded.model
    ids = torch.tensor(np.array(ex.token_ids))[None].to(input_device(model))
    inputs: dict[str, Any] = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    with torch.inference_mode(), tracing(loaded, ex.n_layers) as recorder:
        try:
            model(**inputs, use_cache=False, return_dict=True)
        except TypeError:
            model(**inputs, return_dict=True)
    return finish_trace(ex, recorder)


def _model_name(loaded: LoadedModel) -> str:
    kind = type(loaded.model).__name__
    return loaded.name if kind in loaded.name else f"{loaded.name} ({kind})"


@contextlib.contextmanager
def tracing(loaded: LoadedModel, n_layers: int) -> Iterator[_Recorder]:
    """The component hooks on ``loaded``'s model for the forward passes inside the block; what they record goes
    to :func:`finish_trace`. Inside the capture's own pass (``extract(..., components=True)``) the components'
    attention function runs the capture's, so that one forward pass gives both."""
    name = _model_name(loaded)
    if not can_capture(loaded.model):
        raise UnsupportedAttentionError(
            f"{name} does not route its attention through transformers' AttentionInterface: its heads' outputs "
            "cannot be read, so its states cannot be decomposed exactly"
        )
    recorder = _Recorder(layers=_layer_modules(loaded.model, n_layers, name), name=name)
    with _hooked(loaded.model, recorder):
        yield recorder


def finish_trace(ex: Extraction, recorder: _Recorder) -> Trace:
    """The trace recorded under :func:`tracing`, checked against ``ex`` (the same model, one residual stream)
    and kept with it."""
    name = recorder.name
    if len(recorder.traces) != ex.n_layers:
        raise UnsupportedAttentionError(f"{name}: {len(recorder.traces)} of its {ex.n_layers} layers were traced")
    first = recorder.traces[0].x_in.to("cpu", ex.states.states.dtype)
    if first.shape != ex.states.states[0].shape:
        raise UnsupportedAttentionError(
            f"{name} carries hidden states of shape {tuple(recorder.traces[0].x_in.shape)} between its layers, not "
            "one (tokens, hidden) residual stream (e.g. Gemma 3n's AltUp streams): its states cannot be decomposed"
        )
    if not torch.equal(first, ex.states.states[0]):
        raise ValueError(f"the model given ({name}) is not the one that made this extraction ({ex.model_name})")
    final = _final_norm(recorder, ex, name)
    _TRACES[ex] = trace = Trace(name, recorder.traces, final, ex.states.states.dtype)
    return trace


def _layer_modules(model: Any, n_layers: int, name: str) -> list[Any]:
    """The blocks: the first ModuleList of ``n_layers`` entries each holding a Linear (or Conv1D)."""
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n_layers:
            if all(any(_is_linear(m) for m in block.modules()) for block in module):
                return list(module)
    raise UnsupportedAttentionError(f"{name}: no list of {n_layers} layers found to decompose")


def _is_linear(module: Any) -> bool:
    return isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D"


def _is_norm(module: Any) -> bool:
    """A LayerNorm or RMSNorm: ``nn.LayerNorm``, or a leaf module named a norm with a 1-D gain and an epsilon, or
    without a gain a normalised shape (OLMo's LayerNorm); what it computes is checked where it is placed."""
    if isinstance(module, torch.nn.LayerNorm):
        return True
    if "norm" not in type(module).__name__.lower() or list(module.children()):
        return False
    weight = getattr(module, "weight", None)
    if weight is None:
        return hasattr(module, "normalized_shape")
    has_eps = any(hasattr(module, e) for e in ("eps", "variance_epsilon", "epsilon"))
    return has_eps and isinstance(weight, torch.Tensor) and weight.ndim == 1


def _register() -> None:
    global _REGISTERED
    if not _REGISTERED:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface

        AttentionInterface.register(COMPONENTS_IMPLEMENTATION, _attention)
        AttentionMaskInterface.register(COMPONENTS_IMPLEMENTATION, capture_mask)
        _REGISTERED = True


def _attention(
    module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, **kwargs: Any
) -> tuple[torch.Tensor, None]:
    """The capture's attention (eager's output, in query chunks), noting its values and output for the trace."""
    out, weights = capture_attention_forward(module, query, key, value, *args, **kwargs)
    events = _EVENTS.get()
    if events is not None:
        events.append(("qk", *_qk_inputs(module, query, key, value, args, kwargs)))
        events.append(("attention", value[0].detach().clone(), out[0].reshape(out.shape[1], -1).clone()))
    return out, weights


def _qk_inputs(
    module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, args: tuple, kwargs: dict
) -> tuple:
    """What turns the queries and keys into scores: (query, key, mask, scaling, softcap, position bias)."""
    bound = inspect.signature(capture_attention_forward).bind(module, query, key, value, *args, **kwargs).arguments
    scaling = bound.get("scaling")
    bias = bound.get("position_bias")
    return (
        query[0].detach().clone(),
        key[0].detach().clone(),
        bound.get("attention_mask"),
        float(query.shape[-1] ** -0.5 if scaling is None else scaling),
        None if bound.get("softcap") is None else float(bound["softcap"]),
        None if bias is None else bias.detach(),
    )


@contextlib.contextmanager
def _hooked(model: Any, recorder: _Recorder) -> Iterator[None]:
    from .attention import _SWITCH_LOCK

    _register()
    in_layer = {id(m) for block in recorder.layers for m in block.modules()}
    # the hooks go on under the lock: another thread's capture forward on this model must not run them
    with _SWITCH_LOCK:
        handles = []
        previous = model.config._attn_implementation
        token = _EVENTS.set(recorder.events)
        try:
            for module in model.modules():
                if _is_linear(module) and id(module) in in_layer:
                    handles.append(module.register_forward_hook(_event_hook("linear", recorder)))
                elif _is_norm(module):
                    handles.append(module.register_forward_hook(_event_hook("norm", recorder, id(module) in in_layer)))
            for index, block in enumerate(recorder.layers):
                for child in block.children():
                    if not _is_norm(child):
                        handles.append(child.register_forward_hook(_event_hook("child", recorder)))
                handles.append(block.register_forward_pre_hook(_layer_start(recorder, index), with_kwargs=True))
                handles.append(block.register_forward_hook(_layer_end(recorder, index)))
            model.set_attn_implementation(COMPONENTS_IMPLEMENTATION)
            yield
        finally:
            _EVENTS.reset(token)
            model.set_attn_implementation(previous)
            for handle in handles:
                handle.remove()


def _first_tensor(values: Any) -> torch.Tensor | None:
    if isinstance(values, torch.Tensor):
        return values
    items = values.values() if isinstance(values, dict) else values if isinstance(values, (tuple, list)) else ()
    for item in items:
        if isinstance(item, torch.Tensor):
            return item
    return None


def _one_sequence(t: torch.Tensor) -> torch.Tensor:
    """The one sequence's rows of a hooked tensor: (1, n, ...) -> (n, ...); a 2-D tensor is already (n, d), the
    states flattened over the batch (OPT's feed-forward, the mixtures of experts)."""
    return t.detach() if t.ndim <= 2 else t[0].detach()


def _event_hook(kind: str, recorder: _Recorder, inside: bool = True) -> Any:
    def hook(module: Any, args: tuple, output: Any) -> None:
        inp, out = _first_tensor(args), _first_tensor(output)
        if inp is None or out is None:
            return
        event = (kind, module, _one_sequence(inp), _one_sequence(out))
        if recorder.current is not None and inside:
            recorder.events.append(event)
        elif recorder.current is None and not inside and len(recorder.traces) == len(recorder.layers):
            recorder.final.append(event)
        elif recorder.current is None and not inside and not recorder.traces:
            recorder.initial.append(event)

    return hook


def _layer_start(recorder: _Recorder, index: int) -> Any:
    def hook(module: Any, args: tuple, kwargs: dict) -> None:
        x = _first_tensor(args)
        x = _first_tensor(kwargs) if x is None else x
        if x is None:
            raise UnsupportedAttentionError(f"{recorder.name}: layer {index} takes no hidden states tensor")
        recorder.current, recorder.x_in = index, x[0].detach().clone()
        recorder.events.clear()

    return hook


def _layer_end(recorder: _Recorder, index: int) -> Any:
    def hook(module: Any, args: tuple, output: Any) -> None:
        x_out = _first_tensor(output)
        if x_out is None or recorder.x_in is None:
            raise UnsupportedAttentionError(f"{recorder.name}: layer {index} returned no hidden states")
        trace = layer_trace(recorder.events, recorder.x_in, x_out[0].detach().clone(), recorder.name)
        trace.qk = find_qk(recorder.events, recorder.x_in, recorder.name, trace)
        if index == 0:
            trace.embed_in, trace.embed_norm = _embedding_norm(recorder)
        for name in ("x_in", "x_out", "context", "values", "attn_out", "mlp_out", "embed_in"):  # off an accelerator
            if getattr(trace, name) is not None:
                setattr(trace, name, getattr(trace, name).to("cpu"))
        recorder.traces.append(trace)
        recorder.current = None
        recorder.events.clear()

    return hook


def _embedding_norm(recorder: _Recorder) -> tuple[torch.Tensor | None, NormMap | None]:
    """The norm that made the first layer's input (BERT's embedding LayerNorm): its input (the embeddings' sum) and
    its map; (None, None) where the first layer reads the embeddings as they are."""
    x_in = recorder.x_in
    assert x_in is not None
    for _, module, inp, out in recorder.initial:
        if out.shape == x_in.shape and inp.shape == x_in.shape and torch.equal(out, x_in):
            return inp.clone(), norm_map(module, inp, out, recorder.name)
    return None, None


def _final_norm(recorder: _Recorder, ex: Extraction, name: str) -> NormMap | None:
    """The norm between the last layer's output and the last hidden state, when they differ."""
    last = recorder.traces[-1].x_out
    if torch.equal(last.to("cpu", ex.states.states.dtype), ex.states.states[-1]):
        return None
    for _, module, inp, out in recorder.final:
        if inp.shape == last.shape and torch.equal(inp.to("cpu"), last):
            return norm_map(module, inp, out, name)
    raise UnsupportedAttentionError(
        f"{name}: its last hidden state is not its last layer's output nor a norm of it; it cannot be decomposed"
    )
