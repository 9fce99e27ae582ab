"""Tools for a framework package's op implementations: a table its op modules fill with a
decorator, and the reading of a node's settings.

A framework package (trama-numpy, trama-jax, a third party's) spreads its factories over a few
op modules. Each module marks its factories with ``@table.implements("Linear")``, and the plugin
loads the table only when the first node is built (:func:`~trama.extension.deferred_factories`),
so that discovery stays cheap; for the same reason this module imports numpy only to read a
tensor setting. The table refuses an op implemented twice, which would otherwise silently keep
whichever module was imported last.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from trama.format._lazy import is_tensor

if TYPE_CHECKING:
    from trama.format._model import Parameter

__all__ = ["Factory", "FactoryTable", "setting"]

#: ``factory(node, *, children, parameters)``, as the registry calls it.
Factory = Callable[..., Any]
F = TypeVar("F", bound=Factory)


class FactoryTable:
    """The factories of one framework package, by op name.

    ``modules`` are the fully qualified names of the op modules that register into this table
    when imported; :meth:`load` imports them all and returns the table.
    """

    def __init__(self, framework: str, modules: Iterable[str]) -> None:
        self.framework = framework
        self.modules = tuple(modules)
        #: The factories registered so far (read it only after :meth:`load`).
        self.factories: dict[str, Factory] = {}

    def implements(self, *names: str) -> Callable[[F], F]:
        """Register the decorated factory for these op names."""

        def register(factory: F) -> F:
            for name in names:
                if name in self.factories:
                    raise RuntimeError(f"{self.framework} op {name!r} is implemented twice")
                self.factories[name] = factory
            return factory

        return register

    def load(self) -> dict[str, Factory]:
        """Import every op module, then return a copy of the table."""
        for module in self.modules:
            importlib.import_module(module)
        return dict(self.factories)


def setting(parameters: Mapping[str, Parameter], slot: str, default: Any = None) -> Any:
    """A setting's value (a 0-d tensor becomes a Python scalar, another tensor a numpy array),
    or ``default`` when the slot is absent."""
    entry = parameters.get(slot)
    if entry is None:
        return default
    value = entry.value
    if is_tensor(value):
        import numpy as np  # already imported: a tensor exists

        array = np.asarray(value)
        return array.item() if array.ndim == 0 else array
    return value
