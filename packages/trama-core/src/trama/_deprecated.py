"""Deprecated import paths: what moved in trama 0.4.0, and the one warning each old path gives.

The policy (``docs/plugins.md``, "Migrating from 0.3 to 0.4"): a public name that moves keeps
working at its old path for one minor version, with a :class:`DeprecationWarning` that names its
new home, and is removed in the next. Each module path of trama 0.3.0 that no longer exists is a
small shim module (``trama/plugins.py``, ``trama_torch/tracing.py``...) that calls
:func:`moved_module` first and then re-exports the old module's ``__all__`` from its new home;
a name that moved out of a module that still exists is served by :func:`moved_names`.

Nothing in trama, trama-numpy, trama-torch or trama-jax imports a shim (``tests/test_architecture.py``
checks it), so the warning reaches only code that still uses an old path. This module imports
only the standard library: every layer may use it.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "DEPRECATED_IN",
    "MIGRATION_GUIDE",
    "MOVED_MODULES",
    "REMOVED_IN",
    "moved_message",
    "moved_module",
    "moved_names",
    "warn_deprecated",
]

#: The release that moved the names, and the one that removes the old paths.
DEPRECATED_IN = "0.4.0"
REMOVED_IN = "0.5.0"
#: Where the moves are explained, as every warning says.
MIGRATION_GUIDE = "docs/plugins.md, 'Migrating from 0.3 to 0.4'"

#: Every module path of the 0.3 packages that is a deprecated shim now -> where its names live.
#: A home that starts with ``_`` somewhere is internal: those old modules were implementation
#: details, and their names have no public replacement.
MOVED_MODULES: Mapping[str, tuple[str, ...]] = {
    "trama.calls": ("trama.format._calls",),
    "trama.cli": ("trama.tools.cli",),
    "trama.codec": ("trama.format._codec",),
    "trama.costs": ("trama.execution",),
    "trama.deferred": ("trama.extension",),
    "trama.dtypes": ("trama.format",),
    "trama.export": ("trama.conversion",),
    "trama.external": ("trama.format._external",),
    "trama.factorytable": ("trama.extension",),
    "trama.hookspecs": ("trama.extension", "trama.extension.hookspecs"),
    "trama.importer": ("trama.conversion",),
    "trama.jsontext": ("trama.format._jsontext", "trama.format._layout"),
    "trama.kernels": ("trama.extension",),
    "trama.legacy": ("trama.format._legacy",),
    "trama.model": ("trama.format",),
    "trama.opregistry": ("trama.format",),
    "trama.plugins": ("trama.extension",),
    "trama.protocols": ("trama.conversion",),
    "trama.runtime": ("trama.execution",),
    "trama.schema": ("trama.format",),
    "trama.serialization": ("trama.format",),
    "trama.ssa": ("trama.tools",),
    "trama.summary": ("trama.tools",),
    "trama.tensor": ("trama.format",),
    "trama.validation": ("trama.format",),
    "trama_torch.calling": ("trama_torch.fx.submodule_calls",),
    "trama_torch.calls": ("trama_torch.fx.function_calls",),
    "trama_torch.leaf_modules": ("trama_torch.leaves.modules",),
    "trama_torch.leaf_table": ("trama_torch.leaves.table",),
    "trama_torch.scopes": ("trama_torch.fx.containers",),
    "trama_torch.traced": ("trama_torch.fx.graph",),
    "trama_torch.tracing": ("trama_torch.fx.trace",),
}


def _internal(home: str) -> bool:
    return any(part.startswith("_") for part in home.split("."))


def moved_message(old: str, homes: tuple[str, ...] | str) -> str:
    """The warning's text: ``old`` moved to ``homes`` (a module path, or several)."""
    homes = (homes,) if isinstance(homes, str) else homes
    where = " and ".join(homes)
    note = " (internal: no public replacement, do not depend on it)" if all(_internal(home) for home in homes) else ""
    return (
        f"{old} is deprecated since trama {DEPRECATED_IN} and will be removed in {REMOVED_IN}: "
        f"it moved to {where}{note}; see {MIGRATION_GUIDE}"
    )


def warn_deprecated(message: str, *, stacklevel: int = 2) -> None:
    """A :class:`DeprecationWarning` with ``message``, attributed ``stacklevel`` frames up from
    the caller of this function (1: the caller itself)."""
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel + 1)


def moved_module(name: str) -> None:
    """Called by the shim module ``name`` as it is imported: warn that it moved.

    The warning is attributed to the code that imported the shim (Python skips its import
    machinery's frames), and is given once per process, since a module is executed once."""
    warn_deprecated(moved_message(name, MOVED_MODULES[name]), stacklevel=3)


def moved_names(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``module``, a module that still exists, serving the
    names that moved out of it: ``homes`` maps each to the module that has it now. Reading one
    warns, naming its new home, and gives the object from there."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_deprecated(moved_message(f"{module}.{name}", f"{home}.{name}"), stacklevel=2)
        return getattr(importlib.import_module(home), name)

    return __getattr__
