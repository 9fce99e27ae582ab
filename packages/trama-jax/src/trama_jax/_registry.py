"""The table of JAX op implementations, filled by the ``@implements`` decorator.

Each op module registers its factories when imported; :func:`implementations` imports them all,
which the plugin does only when a jax registry is asked for, so that discovery stays cheap. A
factory is called as ``factory(node, *, children, parameters)`` and returns a
:class:`~trama_jax.kernel.JaxKernel` (a leaf) or a :class:`~trama_jax.model.JaxModule` (a
composite, built from its children). The registry hands out each factory wrapped by
:func:`~trama_jax.model.bind_kernel`, so that importing gives a module that knows its node:
``_FACTORIES`` keeps the kernel factories themselves, for kernels' own tests.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from trama import Parameter, Tensor

__all__ = ["Factory", "implementations", "implements", "setting", "tensor_slots"]

Factory = Callable[..., Any]
F = TypeVar("F", bound=Factory)

_FACTORIES: dict[str, Factory] = {}
_OP_MODULES = ("layers", "sequence", "activations", "functions", "model")


def implements(*names: str) -> Callable[[F], F]:
    """Register a factory ``(node, *, children, parameters) -> JaxKernel`` for these op names."""

    def register(factory: F) -> F:
        for name in names:
            if name in _FACTORIES:
                raise RuntimeError(f"jax op {name!r} is implemented twice")
            _FACTORIES[name] = factory
        return factory

    return register


def implementations() -> Mapping[str, Factory]:
    """Every JAX implementation, by op name, as the registry offers it (see the module's doc)."""
    for module in _OP_MODULES:
        importlib.import_module(f"trama_jax.{module}")
    from trama_jax.model import bind_kernel

    return {name: bind_kernel(factory) for name, factory in _FACTORIES.items()}


def tensor_slots(parameters: Mapping[str, Parameter]) -> tuple[str, ...]:
    """The slots whose entries hold tensors: what a kernel takes at call time."""
    return tuple(slot for slot, entry in parameters.items() if isinstance(entry.value, Tensor))


def setting(parameters: Mapping[str, Parameter], slot: str, default: Any = None) -> Any:
    """A setting's value (a 0-d tensor becomes a Python scalar), or ``default`` when absent."""
    entry = parameters.get(slot)
    if entry is None:
        return default
    value = entry.value
    if isinstance(value, Tensor):
        array = np.asarray(value)
        return array.item() if array.ndim == 0 else array
    return value
