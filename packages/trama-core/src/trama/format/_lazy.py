"""Importing on first use: what keeps ``import trama`` and plugin discovery free of numpy.

``import trama; trama.registry("numpy")`` must cost less than ``import numpy`` alone
(``benchmarks/bench_discovery.py``): discovery needs op specs, never a tensor. So the faces of
trama's packages (``trama``, ``trama.format``, ``trama.catalog``, ``trama.conversion``) import
each public name from its module when it is first read (PEP 562, :func:`lazy_face`), and the
modules discovery loads test for a :class:`~trama.Tensor` without importing the tensor module
(:func:`is_tensor`). numpy, ml_dtypes and jsonschema load when a tensor, a schema check or a
kernel is first used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from trama.format._tensor import Tensor

__all__ = ["TENSOR_MODULE", "is_tensor", "lazy_face"]

#: The module that defines :class:`~trama.Tensor` (and imports numpy).
TENSOR_MODULE = "trama.format._tensor"


def is_tensor(value: object) -> TypeGuard[Tensor]:
    """``isinstance(value, Tensor)``, without importing numpy to find out: no tensor can exist
    before the module that defines the class has been imported, so until then the answer is no."""
    module = sys.modules.get(TENSOR_MODULE)
    return module is not None and isinstance(value, module.Tensor)


def lazy_face(
    package: str, homes: Mapping[str, str], *, submodules: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package face's ``__getattr__`` and ``__dir__`` (PEP 562), to assign in its ``__init__``.

    ``homes`` maps each public name to the module (relative to ``package``, without the dot)
    that defines it; reading the name imports that module, once, and keeps the value in the
    package's namespace so that later reads are plain attribute reads. ``submodules`` are
    subpackages that ``package.name`` imports when read before anything imported them (``import
    trama; trama.format`` keeps working).
    """
    namespace = sys.modules[package].__dict__
    children = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is not None:
            value = getattr(importlib.import_module(f"{package}.{home}"), name)
            namespace[name] = value
            return value
        if name in children:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes, *children})

    return __getattr__, __dir__
