"""Version numbers: the library's, and the document format's it writes and reads.

The format version is ``MAJOR.MINOR`` and moves independently of the library version. A reader
accepts every older version it knows how to upgrade, and any newer *minor* of its own major
(minor versions only add optional fields, which an older reader may ignore). A newer major is
refused with an error that names both versions. See ``docs/format.md`` for the policy.
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["FORMAT_MAJOR", "FORMAT_MINOR", "FORMAT_VERSION", "LEGACY_FORMAT_VERSIONS", "__version__"]

FORMAT_MAJOR = 1
FORMAT_MINOR = 2
#: The format version this library writes.
FORMAT_VERSION = f"{FORMAT_MAJOR}.{FORMAT_MINOR}"
#: Versions written by the trama 0.1.0 and 0.2.0 releases, read through an upgrade step.
LEGACY_FORMAT_VERSIONS = ("0.1", "0.2")

try:
    __version__ = importlib.metadata.version("trama")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"
