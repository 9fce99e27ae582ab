"""trama-numpy: numpy implementations of trama's standard op catalog, and the numpy runtime.

Nothing needs importing by hand: installed, it plugs into trama through its entry point, so
``trama.registry("numpy")`` holds its kernels and ``trama.runtime_for_name("default")`` runs on
it. See :mod:`trama_numpy.plugin`.

Plugin discovery imports this package (the plugin module's parent) in every program that uses
trama, so it imports nothing at the top: ``__version__`` is read from the distribution's metadata
when first asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["__version__"]

if TYPE_CHECKING:
    __version__: str
else:
    from trama.version import lazy_version

    __getattr__ = lazy_version("trama-numpy", __name__)
