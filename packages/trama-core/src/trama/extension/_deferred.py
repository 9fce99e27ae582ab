"""Factories that load their framework on first use, for ``trama_op_implementations``.

The hook's contract says that returning the table must not import the framework: discovery,
``trama plugins`` and the coverage matrix ask every installed plugin for its table, and nobody
listing plugins should wait seconds for torch and JAX to import. A framework package whose real
factories live in modules that import the framework at the top returns :func:`deferred_factories`
instead: one small callable per op name, which imports the real table when the first node is
built and hands every call on to the real factory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trama.errors import RegistryError

__all__ = ["DeferredFactory", "deferred_factories"]


class _Table:
    """The real factories, loaded once, by whichever deferred factory is called first."""

    def __init__(self, load: Callable[[], Mapping[str, Any]], distribution: str) -> None:
        self._load = load
        self._distribution = distribution
        self._lock = threading.Lock()
        self._factories: Mapping[str, Any] | None = None

    def factory(self, op: str) -> Any:
        factories = self._factories
        if factories is None:
            with self._lock:
                if self._factories is None:
                    self._factories = self._load()
                factories = self._factories
        try:
            return factories[op]
        except KeyError:
            raise RegistryError(
                f"{self._distribution} lists op {op!r} among its implementations but its table has no factory for it"
            ) from None


class DeferredFactory:
    """Stands for the real factory of one op until a node of that op is built."""

    __slots__ = ("_table", "op")

    def __init__(self, op: str, table: _Table) -> None:
        self.op = op
        self._table = table

    def __call__(self, node: Any, *, children: Mapping[str, Any], parameters: Mapping[str, Any]) -> Any:
        real = self._table.factory(self.op)
        build = getattr(real, "from_node", real)
        return build(node, children=children, parameters=parameters)

    def resolve(self) -> Any:
        """The real factory this one stands for, loading the table if no node was built yet:
        for tests and tools that compare factories (``registry[op].factory.resolve() is
        linear``); building a node goes through the call, which does the same."""
        return self._table.factory(self.op)

    def __repr__(self) -> str:
        return f"<deferred factory of {self.op!r}>"


def deferred_factories(
    names: Iterable[str], load: Callable[[], Mapping[str, Any]], *, distribution: str
) -> dict[str, DeferredFactory]:
    """One deferred factory per op in ``names``; ``load()`` returns the real table by op name and
    is called once, when the first of them builds a node. ``distribution`` names the package in
    the error raised if ``load()`` lacks a name it promised."""
    table = _Table(load, distribution)
    return {name: DeferredFactory(name, table) for name in names}
