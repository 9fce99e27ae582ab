"""Captured aten ops → the catalog's elementwise ops (see :mod:`trama_torch.capture.aten`).

Unary math (``aten.exp``, ``aten.rsqrt``…), comparisons (``Tensor`` and ``Scalar`` forms), the
logical and bitwise ops (``aten.__and__`` is ``bitwise_and``), ``where``, ``masked_fill``,
``clamp`` (numbers as slots, ``clamp.Tensor``'s bounds as ports), ``minimum``/``maximum``
(``min.other``/``max.other`` too) and casts.

A cast is read from the capture's fake values, whatever overload spelt it (``_to_copy``,
``to.dtype``, ``to.device``, ``type_as``…): the same dtype before and after is no node (a device
move, ``.float()`` of a float32 value), another dtype is the op ``to``; the format has no
devices. An in-place form computes what the out-of-place op computes and then stores it in the
dtype of ``self``: where the two dtypes differ (``mask_int32 &= other_int64``,
``x_float.logical_and_(y)``) the handler adds that conversion as a ``to`` after the op.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trama.catalog import result_type
from trama.format import numpy_dtype
from trama_torch.capture.aten import Alias, Emit, Register, _Node, _operand, _unary, as_size
from trama_torch.capture.values import ConstTensor, Sym, is_runtime
from trama_torch.names import local_name
from trama_torch.tensors import TORCH_DTYPES

__all__ = ["register"]

aten = torch.ops.aten

Handler = Callable[[_Node], Any]

#: The format's dtype names by torch dtype (the names are torch's attribute names).
_DTYPE_NAMES: dict[torch.dtype, str] = {dtype: name for name, dtype in TORCH_DTYPES.items()}

_UNARY = (
    "abs",
    "exp",
    "log",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "erf",
    "floor",
    "ceil",
    "sign",
    "reciprocal",
    "square",
)
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


# --- Dtypes at capture ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Described:
    """A captured tensor as promotion sees it (:func:`trama.catalog.result_type`): dtype and rank."""

    dtype: np.dtype[Any]
    ndim: int


def _dtype_name(call: _Node, dtype: torch.dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        raise call.missing(f"(a cast to {dtype}) has no catalog dtype for it")
    return name


def _promoted(call: _Node, *names: str) -> torch.dtype | None:
    """``torch.result_type`` of the named arguments (tensors by their fake values, numbers as
    they are, ``None`` skipped); ``None`` when a tensor's dtype is unknown or not the format's."""
    operands: list[Any] = []
    for name in names:
        value = call.arguments.get(name)
        if value is None:
            continue
        if is_runtime(value):
            fake = call.val(name)
            if not isinstance(fake, torch.Tensor) or fake.dtype not in _DTYPE_NAMES:
                return None
            operands.append(_Described(numpy_dtype(_DTYPE_NAMES[fake.dtype]), fake.dim()))
        elif isinstance(value, (bool, int, float)):
            operands.append(value)
    if not operands:
        return None
    promoted = result_type(*operands)
    return next(dtype for dtype, name in _DTYPE_NAMES.items() if numpy_dtype(name) == promoted)


def _in_place(handler: Handler, produced: Callable[[_Node], torch.dtype | None]) -> Handler:
    """An in-place form (``bitwise_and_``, ``clamp_``…): the op, then a ``to`` the dtype of
    ``self`` where the op's own result (``produced``) has another dtype."""

    def handle(call: _Node) -> Any:
        mapped = handler(call)
        target = call.node.meta.get("val")
        if not isinstance(mapped, Emit) or not isinstance(target, torch.Tensor):
            return mapped
        own = produced(call)
        if own is None:
            raise call.missing("(in place, on a value whose dtype the capture does not know) has no catalog op")
        if own == target.dtype:
            return mapped
        return Emit("to", {"x": mapped}, {"dtype": _dtype_name(call, target.dtype)})

    return handle


def _bool_result(call: _Node) -> torch.dtype:
    return torch.bool


def _promotion_of(*names: str) -> Callable[[_Node], torch.dtype | None]:
    return lambda call: _promoted(call, *names)


# --- Handlers ------------------------------------------------------------------------------------


def _held_operand(
    call: _Node, name: str, slot: str, ports: dict[str, Any], parameters: dict[str, Any], dtype: torch.dtype | None
) -> None:
    """An operand as :func:`trama_torch.capture.aten._operand` gives it, except a non-finite
    number (``float("-inf")`` in a mask), which JSON cannot hold: a 0-d tensor of ``dtype`` on
    the port instead (a constant node), ``dtype`` being the promotion the number took part in,
    so that the result dtype is the number's."""
    _operand(call, name, slot, ports, parameters)
    value = parameters.get(slot)
    if isinstance(value, float) and not math.isfinite(value):
        if dtype is None:
            raise call.missing(f"takes {name}={value!r} with operands whose dtypes the capture does not know")
        del parameters[slot]
        ports[slot] = ConstTensor(torch.tensor(value, dtype=dtype), f"{local_name(call.node.name)}_{slot}")


def _compare(op: str) -> Handler:
    """Comparisons and bitwise ops: each operand a port or a number (a non-finite one a tensor)."""

    def handle(call: _Node) -> Any:
        ports: dict[str, Any] = {}
        parameters: dict[str, Any] = {}
        dtype = _promoted(call, "self", "other")
        _held_operand(call, "self", "x", ports, parameters, dtype)
        _held_operand(call, "other", "other", ports, parameters, dtype)
        return Emit(op, ports, parameters)

    return handle


def _pair(op: str) -> Handler:
    """``logical_and``, ``minimum``…: two tensors, wired to ``x`` and ``other``."""

    def handle(call: _Node) -> Any:
        return Emit(op, {"x": call.tensor("self"), "other": call.tensor("other")})

    return handle


def _where(call: _Node) -> Any:
    """``where.self``/``ScalarOther``/``ScalarSelf``/``Scalar``: each branch a port or a number."""
    ports: dict[str, Any] = {"condition": call.tensor("condition")}
    parameters: dict[str, Any] = {}
    dtype = _promoted(call, "self", "other")
    _held_operand(call, "self", "x", ports, parameters, dtype)
    _held_operand(call, "other", "other", ports, parameters, dtype)
    return Emit("where", ports, parameters)


def _masked_fill(call: _Node) -> Any:
    """``masked_fill.Scalar`` (the value a slot) and ``masked_fill.Tensor`` (the value a port)."""
    ports: dict[str, Any] = {"x": call.tensor("self"), "mask": call.tensor("mask")}
    parameters: dict[str, Any] = {}
    source = call.val("self")
    dtype = source.dtype if isinstance(source, torch.Tensor) else None
    _held_operand(call, "value", "value", ports, parameters, dtype)
    return Emit("masked_fill", ports, parameters)


def _clamp(call: _Node) -> Any:
    """``clamp``, ``clamp_min``, ``clamp_max`` (numbers or, for ``.Tensor``, tensors): a tensor
    bound is a port, a number a slot, ``None`` nothing."""
    ports: dict[str, Any] = {"x": call.tensor("self")}
    parameters: dict[str, Any] = {}
    for name in ("min", "max"):
        value = call.arguments.get(name)
        if value is None:
            continue
        if isinstance(value, Sym):
            parameters[name] = as_size(call, value)
        elif is_runtime(value):
            ports[name] = value
        elif isinstance(value, float) and not math.isfinite(value):  # JSON has no number for it
            dtype = _promoted(call, "self", "min", "max")
            if dtype is None:
                raise call.missing(f"takes {name}={value!r} with operands whose dtypes the capture does not know")
            ports[name] = ConstTensor(torch.tensor(value, dtype=dtype), f"{local_name(call.node.name)}_{name}")
        elif isinstance(value, (bool, int, float)):
            parameters[name] = value
        else:
            raise call.missing(f"takes the bound {name}={value!r}, which is neither a tensor nor a number")
    return Emit("clamp", ports, parameters)


def _cast(call: _Node) -> Any:
    """Any cast overload, read from the fake values before and after: the same dtype is no node
    (a device move, or a cast to the dtype the value has), another dtype is ``to``."""
    x = call.tensor("self")
    source, target = call.val("self"), call.node.meta.get("val")
    if not isinstance(source, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise call.missing("(a cast whose dtypes the capture does not know) has no catalog op for it")
    if source.dtype == target.dtype:
        return Alias(x)
    return Emit("to", {"x": x}, {"dtype": _dtype_name(call, target.dtype)})


def _some(each: Register, packet: Any, handler: Handler, *wanted: str) -> None:
    """``each`` for the overloads of ``wanted`` that this torch has (some come and go between
    versions); never for none of them, which ``each`` would read as every overload."""
    have = set(packet.overloads())
    names = [name for name in wanted if name in have]
    if names:
        each(packet, handler, *names)


def register(each: Register) -> None:
    """Add this family's handlers: ``each(aten.packet, handler, *overloads)``."""
    for name in _UNARY:
        each(getattr(aten, name), _unary(name), "default")
        in_place = getattr(aten, f"{name}_", None)
        if in_place is not None:
            each(in_place, _unary(name), "default")  # torch refuses an in-place dtype change here
    for packet in (aten.round, aten.round_):
        each(packet, _unary("round"), "default")
        each(packet, _unary("round", decimals="decimals"), "decimals")
    for name in _COMPARISONS:
        _some(each, getattr(aten, name), _compare(name), "Tensor", "Scalar")

    for op, dunder in (("bitwise_and", "and"), ("bitwise_or", "or"), ("bitwise_xor", "xor")):
        handler = _compare(op)
        in_place = _in_place(handler, _promotion_of("self", "other"))
        _some(each, getattr(aten, op), handler, "Tensor", "Scalar", "Scalar_Tensor")
        _some(each, getattr(aten, f"{op}_"), in_place, "Tensor", "Scalar")
        each(getattr(aten, f"__{dunder}__"), handler, "Tensor", "Scalar")
        each(getattr(aten, f"__i{dunder}__"), in_place, "Tensor", "Scalar")
    for packet in (aten.bitwise_not, aten.bitwise_not_):  # `~x` is aten.bitwise_not (no aten.__invert__)
        each(packet, _unary("bitwise_not"), "default")

    for op in ("logical_and", "logical_or", "logical_xor"):
        each(getattr(aten, op), _pair(op), "default")
        each(getattr(aten, f"{op}_"), _in_place(_pair(op), _bool_result), "default")
    each(aten.logical_not, _unary("logical_not"), "default")
    each(aten.logical_not_, _in_place(_unary("logical_not"), _bool_result), "default")

    each(aten.where, _where, "self", "ScalarOther", "ScalarSelf", "Scalar")
    for packet in (aten.masked_fill, aten.masked_fill_):
        each(packet, _masked_fill, "Scalar", "Tensor")
    clamp_in_place = _in_place(_clamp, _promotion_of("self", "min", "max"))
    for name in ("clamp", "clamp_min", "clamp_max", "clip"):
        for suffix, handler in (("", _clamp), ("_", clamp_in_place)):
            found: Any = getattr(aten, f"{name}{suffix}", None)
            if found is not None:
                _some(each, found, handler, "default", "Tensor")
    # min.other/max.other only: min.default/max.default are reductions, and max.default is mapped
    # to the catalog's ``max`` by the base table
    each(aten.minimum, _pair("minimum"), "default")
    each(aten.min, _pair("minimum"), "other")
    each(aten.maximum, _pair("maximum"), "default")
    each(aten.max, _pair("maximum"), "other")

    each(aten._to_copy, _cast, "default")
    each(aten.to, _cast, "dtype", "dtype_layout", "device", "other")
    each(aten.type_as, _cast, "default")
