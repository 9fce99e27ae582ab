"""trama-numpy's plugin: numpy implementations of the standard catalog, and the numpy runtimes.

Importing this module is cheap (discovery imports it): the op modules load only when a numpy
registry is built, and the runtime module only when runtimes are listed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trama.extension import hookimpl

FRAMEWORK = "numpy"


@hookimpl
def trama_frameworks() -> Sequence[str]:
    return [FRAMEWORK]


@hookimpl
def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
    if framework != FRAMEWORK:
        return None
    from trama_numpy._registry import implementations

    return implementations()


@hookimpl
def trama_runtimes() -> Sequence[Any]:
    from trama_numpy.runtime import NumpyRuntime

    return [NumpyRuntime()]
