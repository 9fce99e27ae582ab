"""What every framework package's plugin says the same way, written once.

A framework package (trama-numpy, trama-torch, trama-jax, or a third party's) names its framework
in ``trama_frameworks`` and hands out its factory table in ``trama_op_implementations`` for that
framework and nothing for any other. :func:`implementation_hooks` makes both hooks from the
framework's name and a function that loads the table; with ``names``, the table it hands out is
deferred (:func:`~trama.extension.deferred_factories`), so that listing plugins does not import
the framework. Its ``__init__.py`` face loads its public names on first use the same way for
every package: :func:`lazy_exports`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from trama.extension._deferred import deferred_factories
from trama.extension.hookspecs import hookimpl

__all__ = ["implementation_hooks", "lazy_exports"]


def implementation_hooks(
    framework: str,
    load: Callable[[], Mapping[str, Any]] | str,
    *,
    names: Callable[[], Iterable[str]] | None = None,
    distribution: str = "",
) -> tuple[Callable[[], Sequence[str]], Callable[[str], Mapping[str, Any] | None]]:
    """``trama_frameworks`` and ``trama_op_implementations`` for a package implementing ops for
    ``framework``; assign them to the plugin module's names of the same hooks::

        trama_frameworks, trama_op_implementations = implementation_hooks("torch", load, names=...)

    ``load()`` returns the factory table; ``"module:function"`` names such a function, imported
    when the table is first needed. Without ``names`` it is called when the framework's registry
    is built (so it must be cheap); with ``names`` (the op names the table holds), the registry
    gets deferred factories and ``load`` runs when the first node is built.
    """
    own = framework  # the hook's own argument is also called ``framework``
    table = _by_name(load) if isinstance(load, str) else load

    @hookimpl
    def trama_frameworks() -> Sequence[str]:
        return [framework]

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
        if framework != own:
            return None
        if names is None:
            return table()
        return deferred_factories(names(), table, distribution=distribution or f"the {own} plugin")

    return trama_frameworks, trama_op_implementations


def _by_name(target: str) -> Callable[[], Mapping[str, Any]]:
    """The function ``"module:function"`` names, imported when it is first called."""
    module, _, function = target.partition(":")

    def load() -> Mapping[str, Any]:
        result: Mapping[str, Any] = getattr(importlib.import_module(module), function)()
        return result

    return load


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` (PEP 562) that imports each public name from its module
    (``homes``: name -> module within ``package``) on first use, so that importing the package,
    which plugin discovery does, imports no framework."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return __getattr__
