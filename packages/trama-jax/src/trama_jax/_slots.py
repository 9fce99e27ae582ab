"""Reading a node's slots when its kernel is built, and naming the node when a call goes wrong.

A JAX kernel decides everything it can at build time, because what it decides there costs nothing
inside ``jax.jit`` and is checked once. :class:`Slots` reads the settings with the catalog's
defaults and checks them, and it checks the *shape* of every tensor slot without keeping its value:
tensors are arguments of ``apply`` (so that ``jax.grad`` can differentiate with respect to them),
and the slots it hands out are recorded in :attr:`Slots.used`, the kernel's ``tensor_slots``.
Every problem becomes a :class:`trama.RegistryError` ("a node does not match its op's
specification") that names the op, the slot and the node.

At call time the kernel only sees shapes and dtypes of its inputs (static under ``jax.jit``), and
:class:`Site` turns a mismatch there into a :class:`trama.ExecutionError` naming the node: the
class for "running a prepared model failed: wrong inputs".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trama import ExecutionError, Node, Parameter, RegistryError, Tensor
from trama_jax._registry import setting

__all__ = ["Inputs", "Outputs", "Parameters", "Site", "Slots", "Tensors"]

#: What a factory receives: the node's parameters by slot.
Parameters = Mapping[str, Parameter]
#: What ``apply`` receives and returns: tensors by slot, inputs by port, outputs by name.
Tensors = Mapping[str, Any]
Inputs = Mapping[str, Any]
Outputs = dict[str, Any]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Slots:
    """One node's slots, read with defaults and checked; the tensor slots handed out are recorded."""

    __slots__ = ("_used", "node", "parameters")

    def __init__(self, node: Node, parameters: Mapping[str, Parameter]) -> None:
        self.node = node
        self.parameters = parameters
        self._used: list[str] = []

    @property
    def used(self) -> tuple[str, ...]:
        """The tensor slots the kernel reads, in the order it asked for them: its ``tensor_slots``."""
        return tuple(self._used)

    def error(self, message: str) -> RegistryError:
        return RegistryError(f"{self.node.op}: {message}", node_id=self.node.id)

    # --- Settings ---------------------------------------------------------------------------

    def raw(self, slot: str, default: Any = None, *, required: bool = False) -> Any:
        """The slot's value as stored (a tensor as nested lists), or ``default`` when absent."""
        if required and slot not in self.parameters:
            raise self.error(f"the required slot {slot!r} is missing")
        value = setting(self.parameters, slot, default)
        return value.tolist() if isinstance(value, np.ndarray) else value

    def integer(self, slot: str, default: int | None = None, *, minimum: int = 0) -> int:
        value = self.raw(slot, default, required=default is None)
        if not _is_int(value) or value < minimum:
            raise self.error(f"{slot} must be an int ≥ {minimum}, got {value!r}")
        return int(value)

    def optional_integer(self, slot: str, *, minimum: int = 0) -> int | None:
        value = self.raw(slot)
        if value is None:
            return None
        if not _is_int(value) or value < minimum:
            raise self.error(f"{slot} must be null or an int ≥ {minimum}, got {value!r}")
        return int(value)

    def signed(self, slot: str, default: int) -> int:
        """An int that may be negative (a dimension counted from the end)."""
        value = self.raw(slot, default)
        if not _is_int(value):
            raise self.error(f"{slot} must be an int, got {value!r}")
        return int(value)

    def integers(
        self, slot: str, count: int, default: Sequence[int] | None = None, *, minimum: int = 0
    ) -> tuple[int, ...]:
        """A list of exactly ``count`` ints (kernel sizes, strides, paddings: one per dimension)."""
        value = self.raw(slot, default, required=default is None)
        if (
            not isinstance(value, (list, tuple))
            or len(value) != count
            or not all(_is_int(v) and v >= minimum for v in value)
        ):
            raise self.error(f"{slot} must be a list of {count} ints ≥ {minimum}, got {value!r}")
        return tuple(int(v) for v in value)

    def number(self, slot: str, default: float | None = None) -> float:
        value = self.raw(slot, default, required=default is None)
        if not _is_number(value):
            raise self.error(f"{slot} must be a number, got {value!r}")
        return float(value)

    def optional_number(self, slot: str) -> float | None:
        value = self.raw(slot)
        if value is None:
            return None
        if not _is_number(value):
            raise self.error(f"{slot} must be null or a number, got {value!r}")
        return float(value)

    def flag(self, slot: str, default: bool) -> bool:
        value = self.raw(slot, default)
        if not isinstance(value, bool):
            raise self.error(f"{slot} must be a bool, got {value!r}")
        return value

    def choice(self, slot: str, default: str, choices: Sequence[str]) -> str:
        value = self.raw(slot, default)
        if value not in choices:
            raise self.error(f"{slot} must be one of {', '.join(map(repr, choices))}, got {value!r}")
        return str(value)

    # --- Tensors ----------------------------------------------------------------------------

    def _present(self, slot: str) -> Tensor | None:
        entry = self.parameters.get(slot)
        if entry is None or entry.value is None:
            return None
        if not isinstance(entry.value, Tensor):
            raise self.error(f"{slot} must be a tensor, got {entry.value!r}")
        return entry.value

    def _shaped(self, slot: str, value: Tensor, shape: Sequence[int] | None, what: str) -> str:
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise self.error(f"{slot} has shape {list(value.shape)}, but {what or 'it'} should be {list(shape)}")
        self._used.append(slot)
        return slot

    def tensor(self, slot: str, shape: Sequence[int] | None = None, what: str = "") -> str:
        """A required tensor slot, checked against ``shape`` (``what`` spells that shape in slot
        names for the message); returns the key under which ``apply`` receives it."""
        value = self._present(slot)
        if value is None:
            raise self.error(f"the required tensor {slot!r} is missing")
        return self._shaped(slot, value, shape, what)

    def optional_tensor(self, slot: str, shape: Sequence[int] | None = None, what: str = "") -> str | None:
        value = self._present(slot)
        return None if value is None else self._shaped(slot, value, shape, what)

    def flagged_tensor(self, slot: str, present: bool, shape: Sequence[int], what: str = "") -> str | None:
        """A tensor whose existence a setting decides (``bias``, ``add_bias_kv``, ``proj_size``).

        Both disagreements are refused: a missing tensor would silently become zero and an extra
        one would silently be ignored, hiding an exporter's bug either way.
        """
        value = self._present(slot)
        if present and value is None:
            raise self.error(f"needs the tensor {slot!r} with these settings")
        if not present and value is not None:
            raise self.error(f"has the tensor {slot!r}, but its settings say it is absent")
        return None if value is None else self._shaped(slot, value, shape, what)


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
