"""trama-jax's plugin: JAX implementations of the standard catalog, the exporter of imported JAX
models and the JAX runtimes.

Discovery imports this module whether or not anybody uses JAX, so it imports neither jax nor the
rest of the package at the top.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from trama.catalog import standard_op_names
from trama.extension import hookimpl, implementation_hooks

FRAMEWORK = "jax"


# Every catalog op, each loading the real table (and jax) when its first node is built: asking
# for the table must not import jax. A test checks the real table has them all.
trama_frameworks, trama_op_implementations = implementation_hooks(
    FRAMEWORK, "trama_jax._registry:implementations", names=standard_op_names, distribution="trama-jax"
)


def export_jax_model(obj: Any, ctx: Any) -> Any:
    """The exporter offered every object without ``to_node``: handles trama-jax's imported models.

    Such an object exists only once trama_jax's model module is imported, so a foreign object is
    declined with one dictionary lookup."""
    module = sys.modules.get("trama_jax.model")
    if module is None:
        return None
    return module.export_jax_object(obj, ctx)


@hookimpl(trylast=True)
def trama_exporters(framework: str) -> Sequence[Any] | None:
    return [export_jax_model] if framework == FRAMEWORK else None


def as_jax_module(factory: Any) -> Any:
    """``factory`` as the jax registry offers it, whoever provides it: a
    :class:`~trama_jax.JaxKernel` it builds comes back as the module that knows its node and
    entries (what composites wire and what ``import_model`` returns); a module it builds comes
    back as it is. Imports JAX only when a node is built."""
    build = getattr(factory, "from_node", factory)

    def build_module(node: Any, *, children: Any, parameters: Any) -> Any:
        from trama_jax.model import as_module

        return as_module(node, build(node, children=children, parameters=parameters), parameters)

    build_module.__name__ = getattr(factory, "__name__", "build_module")
    build_module.__doc__ = factory.__doc__
    return build_module


@hookimpl
def trama_factory_adapters(framework: str) -> Sequence[Any] | None:
    """Every jax factory, trama-jax's own and every pack's, goes through :func:`as_jax_module`."""
    return [as_jax_module] if framework == FRAMEWORK else None


def sized_leaf(sized: Any) -> Any:
    """A JAX leaf for a node whose settings depend on the input sizes, built while the program
    is traced (:class:`trama_jax.model.JaxSizedLeaf`)."""
    from trama_jax.model import JaxSizedLeaf

    return JaxSizedLeaf(sized)


@hookimpl
def trama_sized_leaf(framework: str) -> Any:
    return sized_leaf if framework == FRAMEWORK else None


@hookimpl
def trama_runtimes() -> Sequence[Any]:
    from trama_jax.runtime import runtimes

    return runtimes()
