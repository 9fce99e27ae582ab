"""The table of numpy op implementations, filled by the ``@implements`` decorator.

Each op module (``layers``, ``activations``, ``functions``, ``sequence``) registers its factories
when imported; :func:`implementations` imports them all, which the plugin does only when a numpy
registry is actually asked for, so that discovery stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from trama import Parameter
from trama.extension import Factory, FactoryTable, setting

__all__ = ["Factory", "implementations", "implements", "optional_array", "required_array", "setting"]

_TABLE = FactoryTable(
    "numpy",
    (
        f"trama_numpy.{name}"
        for name in (
            "layers",
            "activations",
            "functions",
            "sequence",
            "elementwise",
            "arrays",
            "layer_functions",
            "pooling",
            "attention",
        )
    ),
)

#: Register a factory ``(node, *, children, parameters) -> kernel`` for these op names.
implements = _TABLE.implements


def implementations() -> Mapping[str, Factory]:
    """Every numpy implementation, by op name."""
    return _TABLE.load()


def required_array(parameters: Mapping[str, Parameter], slot: str) -> np.ndarray:
    """A tensor slot as a numpy array (shared, read-only: never write into it)."""
    return np.asarray(parameters[slot].value)


def optional_array(parameters: Mapping[str, Parameter], slot: str) -> np.ndarray | None:
    """A tensor slot that may be absent."""
    entry = parameters.get(slot)
    return None if entry is None or entry.value is None else np.asarray(entry.value)
