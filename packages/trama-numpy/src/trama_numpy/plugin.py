"""trama-numpy's plugin: numpy implementations of the standard catalog, and the numpy runtimes.

Importing this module is cheap (discovery imports it), and so is building a numpy registry:
``import trama; trama.registry("numpy")`` imports neither numpy nor the op modules. The registry
gets one deferred factory per op (:func:`trama.extension.deferred_factories`), and the first node
built loads the real table, numpy with it; the runtime module loads only when runtimes are listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trama.catalog import standard_specs
from trama.extension import hookimpl, implementation_hooks

FRAMEWORK = "numpy"


def leaf_op_names() -> list[str]:
    """The ops trama-numpy's table implements: every catalog op but the composites, which the
    graph runtime computes from their wiring. Listing them imports no kernel; a test checks the
    real table (``trama_numpy._registry.implementations()``) holds exactly these."""
    return [spec.name for spec in standard_specs() if not spec.composite]


trama_frameworks, trama_op_implementations = implementation_hooks(
    FRAMEWORK, "trama_numpy._registry:implementations", names=leaf_op_names, distribution="trama-numpy"
)


def sized_kernel(sized: Any) -> Any:
    """The kernel of a leaf whose settings depend on the input sizes, built for each run's
    (:class:`trama.execution.SizedKernel`)."""
    from trama.execution import SizedKernel

    return SizedKernel(sized)


@hookimpl
def trama_sized_leaf(framework: str) -> Any:
    return sized_kernel if framework == FRAMEWORK else None


@hookimpl
def trama_runtimes() -> Sequence[Any]:
    from trama_numpy.runtime import NumpyRuntime

    return [NumpyRuntime()]
