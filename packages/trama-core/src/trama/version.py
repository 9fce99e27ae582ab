"""Version numbers: the library's, and the document format's it writes and reads.

The format version is ``MAJOR.MINOR`` and moves independently of the library version. A reader
accepts every older version it knows how to upgrade, and any newer *minor* of its own major
(minor versions only add optional fields, which an older reader may ignore). A newer major is
refused with an error that names both versions. See ``docs/format.md`` for the policy.

``__version__`` is read from the installed distribution's metadata when first asked for:
``importlib.metadata`` costs more to import than the rest of ``import trama``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

__all__ = [
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "FORMAT_VERSION",
    "LEGACY_FORMAT_VERSIONS",
    "__version__",
    "installed_version",
    "lazy_version",
]

FORMAT_MAJOR = 1
FORMAT_MINOR = 3
#: The format version this library writes.
FORMAT_VERSION = f"{FORMAT_MAJOR}.{FORMAT_MINOR}"
#: Versions written by the trama 0.1.0 and 0.2.0 releases, read through an upgrade step.
LEGACY_FORMAT_VERSIONS = ("0.1", "0.2")


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution`` (``"0+unknown"`` when running from a source
    tree): for a package's lazy ``__version__``, which keeps importlib.metadata out of
    ``import`` (about a sixth of the time discovery took)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def lazy_version(distribution: str, module: str) -> Callable[[str], str]:
    """A ``__getattr__`` (PEP 562) for the package ``module`` that gives its ``__version__``,
    the installed version of ``distribution``, looked up on first use and kept."""
    namespace = sys.modules[module].__dict__

    def __getattr__(name: str) -> str:
        if name != "__version__":
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        version = installed_version(distribution)
        namespace["__version__"] = version
        return version

    return __getattr__


if TYPE_CHECKING:
    #: The installed library's version (``"0+unknown"`` when running from a source tree).
    __version__: str
else:
    __getattr__ = lazy_version("trama", __name__)
