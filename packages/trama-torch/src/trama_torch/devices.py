"""Device names of the torch runtimes: which exist here, and one spelling for each.

A runtime compares a tensor's device with its own on every input and at every placement
boundary, and ``torch.device("cuda") != torch.device("cuda:0")`` although a tensor on the first
GPU reports the latter (and a tensor on Apple's GPU reports ``mps:0``). So every name a user
gives (``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"cpu"``) is turned once into the exact device that
tensors report, and comparisons stay plain equality.

Only the kinds the torch runtimes support are accepted (CPU, CUDA, Metal); anything else, or a
device this machine lacks, is a :class:`trama.ExecutionError` naming it and what exists here.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from trama.errors import ExecutionError

if TYPE_CHECKING:
    import torch

__all__ = ["KINDS", "available_devices", "device_available", "move", "resolve_device"]

#: The device kinds the torch runtimes run on.
KINDS = ("cpu", "cuda", "mps")


def _split(name: str) -> tuple[str, int | None]:
    """``"cuda:1"`` -> ``("cuda", 1)``; ``"cpu"`` -> ``("cpu", None)``; refuses other shapes."""
    kind, colon, index = name.partition(":")
    if kind not in KINDS or (colon and not index.isdigit()):
        raise ExecutionError(f"{name!r} is not a torch device the runtimes know: use cpu, cuda, cuda:N or mps")
    return kind, int(index) if colon else None


def device_available(name: str) -> bool:
    """Whether the device ``name`` exists here. The CPU needs only torch to be installed, which is
    checked without importing it, so listing runtimes stays cheap; CUDA and Metal ask torch."""
    try:
        kind, index = _split(name)
    except ExecutionError:
        return False
    if importlib.util.find_spec("torch") is None:
        return False
    if kind == "cpu":
        return index in (None, 0)
    import torch

    if kind == "cuda":
        return bool(torch.cuda.is_available()) and (index or 0) < torch.cuda.device_count()
    return bool(torch.backends.mps.is_available()) and index in (None, 0)


def available_devices() -> list[str]:
    """The devices of this machine, as the runtimes name them (for error messages)."""
    import torch

    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        names.append("mps")
    return names


def resolve_device(name: str) -> torch.device:
    """The device ``name`` stands for, spelled as its tensors report it (``cuda`` -> ``cuda:0``,
    ``mps`` -> ``mps:0``); :class:`trama.ExecutionError` if it does not exist here."""
    import torch

    kind, index = _split(name)
    if not device_available(name):
        raise ExecutionError(
            f"torch device {name!r} is not available here; available: {', '.join(available_devices())}"
        )
    return torch.device("cpu") if kind == "cpu" else torch.device(kind, index or 0)


def move(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor in it on ``device``: a tensor, or tuples, lists and dicts of
    them as modules take and return (an LSTM's ``(y, (h_n, c_n))``). Tensors already there are
    returned as they are, so moving is free when nothing has to move."""
    import torch

    if isinstance(value, torch.Tensor):
        return value if value.device == device else value.to(device)
    if isinstance(value, tuple | list):
        items = [move(item, device) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # a namedtuple's fields
    if isinstance(value, dict):
        return {key: move(item, device) for key, item in value.items()}
    return value
