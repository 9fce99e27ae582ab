"""The table of numpy op implementations, filled by the ``@implements`` decorator.

Each op module (``layers``, ``activations``, ``functions``, ``sequence``) registers its factories
when imported; :func:`implementations` imports them all, which the plugin does only when a numpy
registry is actually asked for, so that discovery stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from trama import Parameter, Tensor

__all__ = ["Factory", "implementations", "implements", "optional_array", "required_array", "setting"]

Factory = Callable[..., Any]
F = TypeVar("F", bound=Factory)

_FACTORIES: dict[str, Factory] = {}
_OP_MODULES = ("layers", "activations", "functions", "sequence")


def implements(*names: str) -> Callable[[F], F]:
    """Register a factory ``(node, *, children, parameters) -> kernel`` for these op names."""

    def register(factory: F) -> F:
        for name in names:
            if name in _FACTORIES:
                raise RuntimeError(f"numpy op {name!r} is implemented twice")
            _FACTORIES[name] = factory
        return factory

    return register


def implementations() -> Mapping[str, Factory]:
    """Every numpy implementation, by op name."""
    for module in _OP_MODULES:
        importlib.import_module(f"trama_numpy.{module}")
    return dict(_FACTORIES)


def required_array(parameters: Mapping[str, Parameter], slot: str) -> np.ndarray:
    """A tensor slot as a numpy array (shared, read-only: never write into it)."""
    return np.asarray(parameters[slot].value)


def optional_array(parameters: Mapping[str, Parameter], slot: str) -> np.ndarray | None:
    """A tensor slot that may be absent."""
    entry = parameters.get(slot)
    return None if entry is None or entry.value is None else np.asarray(entry.value)


def setting(parameters: Mapping[str, Parameter], slot: str, default: Any = None) -> Any:
    """A hyper-parameter's value (a 0-d tensor becomes a Python scalar), or ``default``."""
    entry = parameters.get(slot)
    if entry is None:
        return default
    value = entry.value
    if isinstance(value, Tensor):
        array = np.asarray(value)
        return array.item() if array.ndim == 0 else array
    return value
