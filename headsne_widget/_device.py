"""Where the numbers run: CUDA when present, the CPU otherwise, or what the caller names."""

from __future__ import annotations

import torch


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None`` -> ``cuda`` when available else ``cpu``; anything else is passed to ``torch.device``."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"unknown device {device!r}: use 'cpu', 'cuda' or 'cuda:N'") from err
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available on this machine")
    return resolved
