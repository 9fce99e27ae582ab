"""Naming the node when a kernel's call goes wrong, and the types kernels are written in.

A JAX kernel decides everything it can at build time, because what it decides there costs nothing
inside ``jax.jit``. Its settings come checked from the core (:func:`trama.catalog.check_settings`,
the same check for every framework, a :class:`trama.RegistryError` naming the node for a bad
one), with the catalog's defaults applied and every tensor slot's shape checked without its value:
tensors are arguments of ``apply`` (so that ``jax.grad`` can differentiate with respect to them),
and the settings' ``tensors``, the slots the check read, are the kernel's ``tensor_slots``.

At call time the kernel only sees shapes and dtypes of its inputs (static under ``jax.jit``), and
:class:`Site` turns a mismatch there into a :class:`trama.ExecutionError` naming the node: the
class for "running a prepared model failed: wrong inputs".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from trama import ExecutionError, Node, Parameter
from trama.catalog import Settings

__all__ = ["Inputs", "Outputs", "Parameters", "Site", "Tensors", "held"]

#: What a factory receives: the node's parameters by slot.
Parameters = Mapping[str, Parameter]
#: What ``apply`` receives and returns: tensors by slot, inputs by port, outputs by name.
Tensors = Mapping[str, Any]
Inputs = Mapping[str, Any]
Outputs = dict[str, Any]


def held(settings: Settings, slot: str) -> str | None:
    """``slot`` when the node holds that tensor (its settings' check read it), else ``None``: the
    key ``apply`` finds it under in ``tensors``."""
    return slot if slot in settings.tensors else None


class Site:
    """Where a kernel runs, for its errors: ``ExecutionError``\\ s that name the op and the node."""

    __slots__ = ("node_id", "op")

    def __init__(self, node: Node) -> None:
        self.op = node.op
        self.node_id = node.id

    def fail(self, message: str) -> ExecutionError:
        return ExecutionError(f"{self.op}: {message}", node_id=self.node_id)

    def floating(self, inputs: Mapping[str, Any], port: str = "x") -> jax.Array:
        """The value on ``port`` as a JAX array of floating-point numbers: torch refuses integer
        inputs to these layers, and computing them in integers would be silently wrong."""
        value = jnp.asarray(inputs[port])
        if not jnp.issubdtype(value.dtype, jnp.floating):
            raise self.fail(f"{port} must hold floating-point numbers, got dtype {value.dtype}")
        return value

    def __repr__(self) -> str:
        return f"{self.op} (node {self.node_id!r})"
