"""trama-numpy's plugin: numpy implementations of the standard catalog, and the numpy runtimes.

Importing this module is cheap (discovery imports it): the op modules load only when a numpy
registry is built, and the runtime module only when runtimes are listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trama.extension import hookimpl, implementation_hooks

FRAMEWORK = "numpy"


#: numpy's table is cheap to load (numpy is imported by trama already): no deferral.
trama_frameworks, trama_op_implementations = implementation_hooks(FRAMEWORK, "trama_numpy._registry:implementations")


@hookimpl
def trama_runtimes() -> Sequence[Any]:
    from trama_numpy.runtime import NumpyRuntime

    return [NumpyRuntime()]
