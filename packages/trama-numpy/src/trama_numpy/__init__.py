"""trama-numpy: numpy implementations of trama's standard op catalog, and the numpy runtime.

Nothing needs importing by hand: installed, it plugs into trama through its entry point, so
``trama.registry("numpy")`` holds its kernels and ``trama.runtime_for_name("default")`` runs on
it. See :mod:`trama_numpy.plugin`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("trama-numpy")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = ["__version__"]
