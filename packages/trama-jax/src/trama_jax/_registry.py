"""The table of JAX op implementations, filled by the ``@implements`` decorator.

Each op module registers its factories when imported; :func:`implementations` imports them all,
which the plugin does only when a jax registry is asked for, so that discovery stays cheap. A
factory is called as ``factory(node, *, children, parameters)`` and returns a
:class:`~trama_jax.kernel.JaxKernel` (a leaf) or a :class:`~trama_jax.model.JaxModule` (a
composite, built from its children). The registry hands out every jax factory, these and any
pack's, through the plugin's factory adapter, so that importing gives a module that knows its
node: ``_FACTORIES`` keeps the kernel factories themselves, for kernels' own tests.
"""

from __future__ import annotations

from collections.abc import Mapping

from trama import Parameter, Tensor
from trama.extension import Factory, FactoryTable, setting

__all__ = ["Factory", "implementations", "implements", "setting", "tensor_slots"]

_TABLE = FactoryTable(
    "jax",
    (
        f"trama_jax.{name}"
        for name in (
            "layers",
            "sequence",
            "activations",
            "functions",
            "elementwise",
            "arrays",
            "layer_functions",
            "pooling",
            "attention",
            "model",
        )
    ),
)
#: The raw kernel factories by op name, as the op modules registered them (tests read these).
_FACTORIES = _TABLE.factories

#: Register a factory ``(node, *, children, parameters) -> JaxKernel`` for these op names.
implements = _TABLE.implements


def implementations() -> Mapping[str, Factory]:
    """Every JAX implementation, by op name (the registry adapts them: see the module's doc)."""
    return _TABLE.load()


def tensor_slots(parameters: Mapping[str, Parameter]) -> tuple[str, ...]:
    """The slots whose entries hold tensors: what a kernel takes at call time."""
    return tuple(slot for slot, entry in parameters.items() if isinstance(entry.value, Tensor))
