"""The catalog's tensor functions (``relu``, ``add``, ``concat``, ``getitem``, ``constant``…) as torch
modules, and, re-exported from :mod:`trama_torch.fx.function_calls`, the mapping of traced torch calls to them.

An imported graph is a tree of modules, so a function node becomes a :class:`FunctionModule`: a
small ``nn.Module`` whose ``forward`` takes the values of the node's connected input ports, in the
order of ``node.inputs``, and returns the result. Everything constant (dims, shapes, an ``other``
held by a slot, an index list) is read and checked once, when the module is built, and bound in
the closure it runs; tensor constants are registered on the module (buffers, or ``nn.Parameter``
when their entry is learnable, tied to other slots through :mod:`trama_torch.tensors`) so that
``.to(device)`` moves them.

Each op calls the torch function that the catalog names, with the operands as the catalog holds
them, so an exported call gives back torch's own result, bit for bit. In particular a Python
number stays a Python number (it promotes as one: ``float16 * 2.0`` is float16), and binary ops
without ``alpha`` or ``rounding_mode`` use Python's operators, so that a reversed constant
(``1 - x``, ``2 / x``) runs the very method torch ran for it (``Tensor.__rtruediv__`` multiplies by
the reciprocal, which can differ from ``torch.div`` in the last bit).
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from trama import ImportModelError, Node, Parameter, Tensor
from trama_torch.fx.function_calls import FunctionCall, export_function_call
from trama_torch.leaves.modules import implicit_softmax_dim
from trama_torch.tensors import tied_buffer, tied_parameter

__all__ = [
    "FunctionCall",
    "FunctionFactory",
    "FunctionModule",
    "export_function_call",
    "function_factories",
]

#: What a function op computes from its operands (ports and constant slots) by name.
Compute = Callable[[Mapping[str, Any]], Any]


class FunctionModule(nn.Module):
    """A catalog tensor function as a module: ``forward(*values)`` takes the node's connected input
    ports in the order of ``node.inputs`` and returns the result (ops of the catalog have one
    output ``y``). ``op`` names the op; ``ports`` the order ``forward`` expects."""

    def __init__(
        self,
        op: str,
        ports: Sequence[str],
        compute: Compute,
        *,
        constants: Mapping[str, Any] | None = None,
        description: str = "",
    ) -> None:
        super().__init__()
        self.op = op
        self.ports = tuple(ports)
        self._compute = compute
        self._description = description
        self._scalars: dict[str, Any] = {}
        self._tensors: list[str] = []
        for name, value in (constants or {}).items():
            if isinstance(value, nn.Parameter):
                self.register_parameter(name, value)
                self._tensors.append(name)
            elif isinstance(value, torch.Tensor):
                self.register_buffer(name, value)
                self._tensors.append(name)
            else:
                self._scalars[name] = value

    def forward(self, *values: Any) -> Any:
        if len(values) != len(self.ports):
            raise TypeError(
                f"{self.op} takes the ports {list(self.ports)} ({len(self.ports)} values), got {len(values)}"
            )
        operands = dict(self._scalars)
        operands.update((name, getattr(self, name)) for name in self._tensors)
        operands.update(zip(self.ports, values, strict=True))
        return self._compute(operands)

    def extra_repr(self) -> str:
        return f"op={self.op}" + (f", {self._description}" if self._description else "")


class _Slots:
    """A node's slot values, read with checks that name the node, and remembered for ``repr``."""

    def __init__(self, node: Node, parameters: Mapping[str, Parameter]) -> None:
        self.node = node
        self.parameters = parameters
        self.read: dict[str, Any] = {}

    def error(self, message: str) -> ImportModelError:
        return ImportModelError(f"{self.node.op} (node {self.node.id!r}): {message}", node_id=self.node.id)

    def get(self, slot: str, default: Any = None) -> Any:
        entry = self.parameters.get(slot)
        value = default if entry is None else entry.value
        self.read[slot] = value
        return value

    def integer(self, slot: str, default: Any = None) -> int:
        value = self.get(slot, default)
        if not _is_int(value):
            raise self.error(f"{slot} must be an int, got {value!r}")
        return _int(value)

    def optional_integer(self, slot: str) -> int | None:
        return None if self.get(slot) is None else self.integer(slot)

    def integers(self, slot: str) -> list[int]:
        value = self.get(slot)
        if not isinstance(value, list) or not all(_is_int(item) for item in value):
            raise self.error(f"{slot} must be a list of ints, got {value!r}")
        return [_int(item) for item in value]

    def dims(self, slot: str) -> int | tuple[int, ...] | None:
        """A ``dim`` that is null, an int or a non-empty list of ints (a tuple for torch)."""
        value = self.get(slot)
        if value is None:
            return None
        if _is_int(value):
            return _int(value)
        if isinstance(value, list) and value and all(_is_int(item) for item in value):
            return tuple(_int(item) for item in value)
        raise self.error(f"{slot} must be null, an int or a non-empty list of ints, got {value!r}")

    def flag(self, slot: str, default: bool) -> bool:
        value = self.get(slot, default)
        if not isinstance(value, bool):
            raise self.error(f"{slot} must be a bool, got {value!r}")
        return value

    def number(self, slot: str, default: float) -> float | int:
        value = self.get(slot, default)
        if isinstance(value, bool) or not isinstance(value, (int, float, torch.SymInt, torch.SymFloat)):
            raise self.error(f"{slot} must be a number, got {value!r}")
        return cast(float, value)  # a symbolic size stands for a number

    def choice(self, slot: str, choices: tuple[Any, ...], default: Any) -> Any:
        value = self.get(slot, default)
        if value not in choices:
            raise self.error(f"{slot} must be one of {list(choices)}, got {value!r}")
        return value

    def description(self) -> str:
        return ", ".join(f"{slot}={_show(value)}" for slot, value in self.read.items())


def _is_int(value: Any) -> bool:
    """An int, not a bool; or a symbolic size while ``torch.export`` traces the module."""
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, torch.SymInt)


def _int(value: Any) -> int:
    """``value`` as a Python int; a symbolic size stays symbolic (``int()`` would fix it), and
    stands for an int to the torch functions it is given to."""
    return cast(int, value) if isinstance(value, torch.SymInt) else int(value)


def _show(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"tensor({value.dtype}{list(value.shape)})"
    return repr(value)


# --- Builders: each reads its slots and returns what the op computes ------------------------------
#: A builder reads a node's slots and returns its computation.
Builder = Callable[[_Slots], Compute]


def _elementwise(function: Callable[..., torch.Tensor], **defaults: Any) -> Builder:
    """An activation with keyword hyper-parameters named as the slots (``negative_slope``)."""

    def build(slots: _Slots) -> Compute:
        kwargs = {name: slots.get(name, default) for name, default in defaults.items()}
        return lambda values: function(values["x"], **kwargs)

    return build


def _softmax(function: Callable[..., torch.Tensor]) -> Builder:
    def build(slots: _Slots) -> Compute:
        dim = slots.optional_integer("dim")
        return lambda values: function(values["x"], dim=implicit_softmax_dim(values["x"].dim()) if dim is None else dim)

    return build


#: The operators that the binary ops run when no ``alpha``/``rounding_mode`` asks for torch's function.
_OPERATORS: Mapping[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "pow": operator.pow,
    "matmul": operator.matmul,
}


def _binary(op: str) -> Builder:
    """``x`` and ``other`` from ports or slots (the factory resolves which), with ``alpha`` for
    ``add``/``sub`` and ``rounding_mode`` for ``div``."""

    def build(slots: _Slots) -> Compute:
        function = _OPERATORS[op]
        if op in ("add", "sub"):
            alpha = slots.number("alpha", 1)
            if alpha != 1:
                scaled = torch.add if op == "add" else torch.sub
                return lambda values: scaled(values["x"], values["other"], alpha=alpha)
        if op == "div":
            mode = slots.choice("rounding_mode", (None, "trunc", "floor"), None)
            if mode is not None:
                return lambda values: torch.div(values["x"], values["other"], rounding_mode=mode)
        return lambda values: function(values["x"], values["other"])

    return build


def _joined(function: Callable[..., torch.Tensor]) -> Builder:
    """``concat``/``stack`` over the ports ``x0``, ``x1``, … in numeric order."""

    def build(slots: _Slots) -> Compute:
        dim = slots.integer("dim", 0)
        count = len(slots.node.inputs)
        if count == 0 or set(slots.node.inputs) != {f"x{k}" for k in range(count)}:
            raise slots.error(f"the inputs must be the ports x0 … x{count - 1}, got {sorted(slots.node.inputs)}")
        names = [f"x{k}" for k in range(count)]
        return lambda values: function([values[name] for name in names], dim=dim)

    return build


def _reshape(slots: _Slots) -> Compute:
    shape = slots.integers("shape")
    if any(size < -1 for size in shape) or shape.count(-1) > 1:
        raise slots.error(f"shape must hold sizes ≥ 0 and at most one -1, got {shape}")
    return lambda values: torch.reshape(values["x"], shape)


def _permute(slots: _Slots) -> Compute:
    dims = slots.integers("dims")
    return lambda values: torch.permute(values["x"], dims)


def _transpose(slots: _Slots) -> Compute:
    dim0, dim1 = slots.integer("dim0"), slots.integer("dim1")
    return lambda values: torch.transpose(values["x"], dim0, dim1)


def _flatten(slots: _Slots) -> Compute:
    start, end = slots.integer("start_dim", 0), slots.integer("end_dim", -1)
    return lambda values: torch.flatten(values["x"], start, end)


def _squeeze(slots: _Slots) -> Compute:
    dim = slots.dims("dim")
    if dim is None:
        return lambda values: torch.squeeze(values["x"])
    return lambda values: torch.squeeze(values["x"], dim)


def _unsqueeze(slots: _Slots) -> Compute:
    dim = slots.integer("dim")
    return lambda values: torch.unsqueeze(values["x"], dim)


def _reduction(function: Callable[..., torch.Tensor], *, all_dims: Any = None) -> Builder:
    """A reduction over ``dim`` (null: all, which ``torch.amax`` spells ``()``) with ``keepdim``."""

    def build(slots: _Slots) -> Compute:
        dim = slots.dims("dim")
        keepdim = slots.flag("keepdim", False)
        resolved = all_dims if dim is None else dim
        return lambda values: function(values["x"], dim=resolved, keepdim=keepdim)

    return build


def _argmax(slots: _Slots) -> Compute:
    dim = slots.optional_integer("dim")
    keepdim = slots.flag("keepdim", False)
    return lambda values: torch.argmax(values["x"], dim=dim, keepdim=keepdim)


_INDEX_PORT = re.compile(r"i(0|[1-9][0-9]*)")


def _index_item(slots: _Slots, item: Any) -> Any:
    """One item of ``getitem``'s index list as a Python index item (a port name stays a string)."""
    if item is None or _is_int(item):
        return item
    if item == "...":
        return Ellipsis
    if isinstance(item, str) and _INDEX_PORT.fullmatch(item):
        return item
    if isinstance(item, list) and len(item) == 3 and all(bound is None or _is_int(bound) for bound in item):
        if item[2] is not None and item[2] <= 0:
            raise slots.error(f"slice {item} must have a positive step, as torch requires")
        return slice(*item)
    raise slots.error(f'index item {item!r} is none of: an int, [start, stop, step], null, "...", "iN"')


def _getitem(slots: _Slots) -> Compute:
    """``x[index]``: the index list parsed once; tensor items come from the ports ``i0``, ``i1``…"""
    index = slots.get("index")
    if not isinstance(index, list):
        raise slots.error(f"index must be a list, got {index!r}")
    items = [_index_item(slots, item) for item in index]
    ports = [item for item in items if isinstance(item, str)]
    if ports != [f"i{k}" for k in range(len(ports))]:
        raise slots.error(f"the index ports must be i0, i1, … in order, each once; got {ports}")
    if sum(item is Ellipsis for item in items) > 1:
        raise slots.error('index has "..." more than once')

    def compute(values: Mapping[str, Any]) -> Any:
        return values["x"][tuple(values[item] if isinstance(item, str) else item for item in items)]

    return compute


def _tuple_get(slots: _Slots) -> Compute:
    index = slots.integer("index")
    where = f"tuple_get (node {slots.node.id!r})"

    def compute(values: Mapping[str, Any]) -> Any:
        x = values["x"]
        if not isinstance(x, (tuple, list)):
            raise TypeError(f"{where}: x must be a tuple or a list, got {type(x).__name__}")
        return x[index]

    return compute


def _constant(slots: _Slots) -> Compute:
    slots.get("value")
    return lambda values: values["value"]


#: Each function op: its builder, and the slots that may stand for an input port of the same name.
_OPS: Mapping[str, tuple[Builder, tuple[str, ...]]] = {
    "relu": (_elementwise(F.relu), ()),
    "leaky_relu": (_elementwise(F.leaky_relu, negative_slope=0.01), ()),
    "gelu": (_elementwise(F.gelu, approximate="none"), ()),
    "silu": (_elementwise(F.silu), ()),
    "sigmoid": (_elementwise(torch.sigmoid), ()),
    "tanh": (_elementwise(torch.tanh), ()),
    "softmax": (_softmax(F.softmax), ()),
    "log_softmax": (_softmax(F.log_softmax), ()),
    "softplus": (_elementwise(F.softplus, beta=1.0, threshold=20.0), ()),
    "elu": (_elementwise(F.elu, alpha=1.0), ()),
    "hardswish": (_elementwise(F.hardswish), ()),
    **{op: (_binary(op), ("x", "other")) for op in _OPERATORS},
    "neg": (_elementwise(torch.neg), ()),
    "concat": (_joined(torch.cat), ()),
    "stack": (_joined(torch.stack), ()),
    "reshape": (_reshape, ()),
    "permute": (_permute, ()),
    "transpose": (_transpose, ()),
    "flatten": (_flatten, ()),
    "squeeze": (_squeeze, ()),
    "unsqueeze": (_unsqueeze, ()),
    "mean": (_reduction(torch.mean), ()),
    "sum": (_reduction(torch.sum), ()),
    "max": (_reduction(torch.amax, all_dims=()), ()),
    "argmax": (_argmax, ()),
    "getitem": (_getitem, ()),
    "tuple_get": (_tuple_get, ()),
    "constant": (_constant, ("value",)),
}


def _operand(entry: Parameter, slot: str) -> Any:
    """A constant operand as the module holds it: a tied parameter or buffer for a tensor, the
    Python value otherwise (a number must stay one, to promote as one)."""
    if isinstance(entry.value, Tensor):
        return tied_parameter(entry, what=f"slot {slot!r}") if entry.learnable else tied_buffer(entry)
    return entry.value


@dataclass(frozen=True, slots=True)
class FunctionFactory:
    """Builds the :class:`FunctionModule` of one function op from a node (the importer's protocol)."""

    op: str

    def __call__(
        self, node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
    ) -> FunctionModule:
        build, operands = _all_ops()[self.op]
        slots = _Slots(node, parameters)
        constants: dict[str, Any] = {}
        for name in operands:
            wired, held = name in node.inputs, name in parameters
            if wired and held:
                raise slots.error(f"operand {name!r} is both wired and held by a slot")
            if held:
                constants[name] = _operand(parameters[name], name)
                slots.read[name] = parameters[name].value
            elif not wired:
                raise slots.error(f"operand {name!r} is neither wired nor held by a slot")
        compute = build(slots)
        return FunctionModule(
            self.op, tuple(node.inputs), compute, constants=constants, description=slots.description()
        )


@functools.cache
def _all_ops() -> Mapping[str, tuple[Builder, tuple[str, ...]]]:
    """Opset 1's function ops and those of the opset-2 families (:mod:`trama_torch.function_ops`),
    imported here rather than at the top because each family builds on this module's helpers."""
    from trama_torch.function_ops import activations, arrays, attention, elementwise, layer_functions, pooling

    merged: dict[str, tuple[Builder, tuple[str, ...]]] = dict(_OPS)
    for family in (activations, elementwise, arrays, layer_functions, pooling, attention):
        for op, row in family.OPS.items():
            if op in merged:
                raise RuntimeError(f"torch function op {op!r} is implemented twice")
            merged[op] = row
    return merged


def function_factories() -> Mapping[str, FunctionFactory]:
    """The factory of every catalog function op (the ops that are neither modules nor composites)."""
    return {op: FunctionFactory(op) for op in _all_ops()}
