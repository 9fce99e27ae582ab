"""From an aten op of the captured program to a catalog function node: which op, ports, slots.

After a non-strict ``torch.export`` the graph holds aten ops at the level torch's Python API
calls them (``aten.linear``, ``aten.layer_norm``, ``aten.add.Tensor``, ``aten.view``), not their
decompositions. Modules that are catalog leaves never reach this table: their whole scope is
their op. What is left is what a module's own ``forward`` computes between its submodule calls,
and each op here is mapped to the catalog's function op that means the same (``aten.add.Tensor``
→ ``add``, ``aten.view`` → ``reshape``, ``aten.select.int`` → ``getitem``).

Three things need no node: ops that only restate a value (``contiguous``, ``clone``,
``dropout`` in eval mode, a cast to the dtype the value already has) alias their input;
runtime assertions vanish; and sizes (``aten.sym_size.int`` and the arithmetic on them) stay
symbolic values that an op may still be able to write without reading them (a ``view`` with
one unknown size is a ``reshape`` with ``-1``).

Anything else raises :class:`MissingOp` naming the aten op; the caller turns it into one line
that says which module, which source line, and that the catalog has no op for it yet.
"""

from __future__ import annotations

import functools
import math
import operator
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from trama import SizeExpr
from trama_torch.capture.sizes import size_expr
from trama_torch.capture.values import ConstTensor, Several, Sym, is_runtime
from trama_torch.leaves.modules import implicit_softmax_dim

__all__ = [
    "VIEWS",
    "Alias",
    "Emit",
    "InPlaceHazard",
    "MissingOp",
    "Nothing",
    "Register",
    "foldable",
    "inplace_hazard",
    "is_view",
    "mutated_argument",
    "op_name",
    "size_value",
    "slice_bounds",
    "translate",
    "translate_pure",
]

aten = torch.ops.aten


class MissingOp(Exception):
    """The catalog has no op for this aten op (or for the form it was called in)."""

    def __init__(self, what: str, why: str = "has no catalog op for it yet") -> None:
        super().__init__(f"{what} {why}")
        self.what = what
        self.why = why


@dataclass(frozen=True)
class Emit:
    """A catalog function node: ``ports`` hold scope values, ``parameters`` slot values, and
    ``outputs`` are the op's outputs: ``y``, or, for an op whose aten form gives a tuple
    (``topk``'s values and indices), its items in the tuple's order."""

    op: str
    ports: dict[str, Any]
    parameters: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] = ("y",)


@dataclass(frozen=True)
class Alias:
    """No node: the op's result is this value."""

    value: Any


@dataclass(frozen=True)
class Nothing:
    """No node and no value (a runtime assertion)."""


Mapped = Emit | Alias | Nothing | Several


def op_name(target: Any) -> str:
    """How errors name an op: ``aten.scaled_dot_product_attention.default``, ``operator.mul``."""
    if isinstance(target, torch._ops.OpOverload):
        return f"aten.{target._opname}.{target._overloadname}" if target.namespace == "aten" else str(target)
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or repr(target)
    return f"{'operator' if module == '_operator' else module}.{name}" if module else name


@dataclass(frozen=True)
class _Node:
    """The node being mapped, with its arguments (scope values) bound by name."""

    node: fx.Node
    arguments: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.arguments[name]

    def get(self, name: str, default: Any = None) -> Any:
        value = self.arguments.get(name, default)
        return default if value is None else value

    @property
    def what(self) -> str:
        return op_name(self.node.target)

    def missing(self, why: str = "has no catalog op for it yet") -> MissingOp:
        return MissingOp(self.what, why)

    def val(self, name: str = "self") -> Any:
        """The fake value of an argument (its shape and dtype at capture)."""
        arg = self.node.kwargs.get(name)
        if arg is None:
            names = _argument_names(self.node.target)
            if name in names and names.index(name) < len(self.node.args):
                arg = self.node.args[names.index(name)]
        return arg.meta.get("val") if isinstance(arg, fx.Node) else None

    def rank(self, name: str = "self") -> int:
        value = self.val(name)
        if not isinstance(value, torch.Tensor):
            raise self.missing(f"reads an input whose rank the capture does not know ({name})")
        return value.dim()

    def tensor(self, name: str = "self") -> Any:
        value = self.arguments[name]
        if not is_runtime(value):
            raise self.missing(f"takes {name}={value!r}, which is not a tensor")
        return value

    def constant(self, name: str) -> Any:
        value = self.arguments.get(name)
        if isinstance(value, Sym):
            return as_size(self, value)
        if is_runtime(value):
            raise self.missing(f"takes a tensor as {name}, which the catalog records only as a constant")
        if isinstance(value, (list, tuple)):
            return [as_size(self, item) if isinstance(item, Sym) else item for item in value]
        return value


def as_size(call: _Node, value: Sym) -> SizeExpr:
    """A symbolic size as the document's expression over the input symbols
    (:mod:`trama_torch.capture.sizes`); one it cannot write is the size read the catalog lacks."""
    expr = size_expr(value.node)
    if expr is None:
        raise _size_read(call)
    return expr


def sizes_or_numbers(call: _Node, sizes: Any) -> list[Any]:
    """A list of sizes (a created tensor's shape, an expansion): numbers, and expressions where
    torch kept them symbolic; a size held in a tensor cannot be written."""
    if isinstance(sizes, Sym) or is_runtime(sizes) or not isinstance(sizes, (list, tuple)):
        raise _size_read(call)
    written: list[Any] = []
    for size in sizes:
        if isinstance(size, Sym):
            written.append(as_size(call, size))
        elif is_runtime(size):
            raise _size_read(call)
        else:
            written.append(int(size))
    return written


def _size_read(call: _Node) -> MissingOp:
    """A symbolic size used where the catalog needs a number: the missing op is the size read."""
    return MissingOp(
        "aten.sym_size.int", f"has no catalog op for it yet (a size read at run time, used by {call.what})"
    )


def _argument_names(target: Any) -> list[str]:
    schema = getattr(target, "_schema", None)
    return [argument.name for argument in schema.arguments] if schema is not None else []


def _bind(node: fx.Node, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The node's arguments by their schema names, defaults filled in."""
    schema = node.target._schema  # type: ignore[union-attr]
    bound: dict[str, Any] = {}
    for index, argument in enumerate(schema.arguments):
        if index < len(args):
            bound[argument.name] = args[index]
        elif argument.name in kwargs:
            bound[argument.name] = kwargs[argument.name]
        elif argument.has_default_value():
            bound[argument.name] = argument.default_value
        else:
            bound[argument.name] = None
    return bound


# --- Handlers ------------------------------------------------------------------------------------

Handler = Callable[[_Node], Mapped]


def _operand(call: _Node, name: str, slot: str, ports: dict[str, Any], parameters: dict[str, Any]) -> None:
    value = call.arguments[name]
    if isinstance(value, Sym):
        parameters[slot] = as_size(call, value)
    elif is_runtime(value):
        ports[slot] = value
    elif isinstance(value, float) and not math.isfinite(value):
        # JSON has no inf or NaN number: a 0-d float32 tensor promotes as the Python float did
        # (it never widens a float tensor, and an integer tensor with it gives float32).
        ports[slot] = ConstTensor(torch.tensor(value, dtype=torch.float32), f"{name}_{slot}")
    elif isinstance(value, (bool, int, float)):
        parameters[slot] = value
    else:
        raise call.missing(f"takes the operand {name}={value!r}, which is neither a tensor nor a number")


def _binary(op: str, first: str = "self", second: str = "other", *, swapped: bool = False) -> Handler:
    """``add``/``sub``/``mul``/``div``/``pow``/``matmul``: each operand a port or a slot."""

    def handle(call: _Node) -> Mapped:
        ports: dict[str, Any] = {}
        parameters: dict[str, Any] = {}
        x, other = (second, first) if swapped else (first, second)
        _operand(call, x, "x", ports, parameters)
        _operand(call, other, "other", ports, parameters)
        if op in ("add", "sub"):
            alpha = call.constant("alpha") if "alpha" in call.arguments else 1
            if alpha is None:
                alpha = 1
            if alpha != 1:
                if swapped:
                    raise call.missing("with alpha has no catalog op for it yet")
                parameters["alpha"] = alpha
        if op == "div":
            mode = call.arguments.get("rounding_mode")
            if mode is not None:
                parameters["rounding_mode"] = mode
        return Emit(op, ports, parameters)

    return handle


def _floor_divide(call: _Node) -> Mapped:
    ports: dict[str, Any] = {}
    parameters: dict[str, Any] = {"rounding_mode": "floor"}
    _operand(call, "self", "x", ports, parameters)
    _operand(call, "other", "other", ports, parameters)
    return Emit("div", ports, parameters)


def _unary(op: str, **slots: str) -> Handler:
    """An op of one input; ``slots`` maps slot names to aten argument names."""

    def handle(call: _Node) -> Mapped:
        x = call.tensor("self")
        return Emit(op, {"x": x}, {slot: call.constant(argument) for slot, argument in slots.items()})

    return handle


def _elu(call: _Node) -> Mapped:
    if call.constant("scale") != 1 or call.constant("input_scale") != 1:
        raise call.missing("with scale or input_scale other than 1 has no catalog op for it yet")
    return Emit("elu", {"x": call.tensor()}, {"alpha": call.constant("alpha")})


def _softmax(op: str, dtype_argument: str | None) -> Handler:
    def handle(call: _Node) -> Mapped:
        x: Any = call.tensor()
        source = call.val()
        wanted: Any = None
        if dtype_argument == "half_to_float" and call.constant("half_to_float"):
            wanted = torch.float32
        if dtype_argument == "dtype":
            wanted = call.arguments.get("dtype")
        if wanted is not None and (not isinstance(source, torch.Tensor) or source.dtype != wanted):
            # ``softmax(x, dtype=torch.float32)`` (transformers' eager attention in half
            # precision): the cast, then the softmax in the wider dtype, as torch computes it.
            name = str(wanted).removeprefix("torch.")
            if name not in ("float16", "bfloat16", "float32", "float64"):
                raise MissingOp(
                    "aten._to_copy.default", f"(a cast to {wanted}, in softmax) has no catalog op for it yet"
                )
            x = Emit("to", {"x": x}, {"dtype": name})
        dim = call.constant("dim")
        if dim is None:
            dim = implicit_softmax_dim(call.rank())
        return Emit(op, {"x": x}, {"dim": dim})

    return handle


def _sizes(call: _Node, sizes: Any) -> list[int]:
    """A shape for ``reshape``: ints, with one symbolic size written as ``-1`` (the catalog infers
    it from the element count); two unknown sizes need a size read, which the catalog lacks."""
    if isinstance(sizes, Sym) or is_runtime(sizes):
        raise _size_read(call)
    entries = list(sizes)
    unknown = [index for index, size in enumerate(entries) if isinstance(size, Sym)]
    if any(is_runtime(size) for size in entries):
        raise _size_read(call)
    if not unknown:
        return [int(size) for size in entries]
    if len(unknown) > 1 or -1 in entries:
        return sizes_or_numbers(call, entries)
    return [-1 if index == unknown[0] else int(size) for index, size in enumerate(entries)]


def _reshape(call: _Node) -> Mapped:
    sizes = call["size"] if "size" in call.arguments else call["shape"]
    if isinstance(sizes, (list, tuple)) and not any(isinstance(size, Sym) for size in sizes):
        return Emit("reshape", {"x": call.tensor()}, {"shape": _sizes(call, sizes)})
    return _reshaped(call)


def _equal_size(a: Any, b: Any) -> bool:
    """Whether two sizes at capture are the same: equal numbers, or the same symbolic expression."""
    if isinstance(a, torch.SymInt) or isinstance(b, torch.SymInt):
        return isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt) and a.node.expr == b.node.expr
    return bool(a == b)


def _same_sizes(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(_equal_size(x, y) for x, y in zip(a, b, strict=True))


def _reshaped(call: _Node) -> Mapped:
    """A reshape whose sizes are symbolic, written from the shapes before and after it: nothing
    when they are the same, ``reshape`` with ``-1`` for one unknown size, ``flatten`` when it
    merges neighbouring dimensions and keeps the others (``view(b * s, d)`` of ``[b, s, d]``)."""
    x = call.tensor()
    source, target = call.val(), call.node.meta.get("val")
    if not isinstance(source, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise _size_read(call)
    before: list[Any] = list(source.shape)
    after: list[Any] = list(target.shape)
    if _same_sizes(before, after):
        return Alias(x)
    unknown = [index for index, size in enumerate(after) if isinstance(size, torch.SymInt)]
    if len(unknown) <= 1:
        return Emit(
            "reshape", {"x": x}, {"shape": [-1 if index in unknown else int(size) for index, size in enumerate(after)]}
        )
    merged = len(before) - len(after)
    if merged > 0:
        for start in reversed(range(len(after))):  # the longest kept prefix first
            if _same_sizes(after[:start], before[:start]) and _same_sizes(
                after[start + 1 :], before[start + merged + 1 :]
            ):
                end = start + merged
                return Emit("flatten", {"x": x}, {"start_dim": start, "end_dim": end if end < len(before) - 1 else -1})
    return Emit("reshape", {"x": x}, {"shape": sizes_or_numbers(call, [_sym_or_int(size) for size in after])})


def _sym_or_int(size: Any) -> Any:
    return Sym(size) if isinstance(size, torch.SymInt) else int(size)


def _static_shape(call: _Node, name: str = "self") -> list[Any]:
    """The input's shape at capture, symbolic sizes as :class:`Sym`."""
    value = call.val(name)
    if not isinstance(value, torch.Tensor):
        raise call.missing("reads an input whose shape the capture does not know")
    sizes: list[Any] = list(value.shape)
    return [_sym_or_int(size) for size in sizes]


def _unflatten(call: _Node) -> Mapped:
    target = call.node.meta.get("val")
    if isinstance(target, torch.Tensor) and not any(isinstance(size, torch.SymInt) for size in list(target.shape)):
        return Emit("reshape", {"x": call.tensor()}, {"shape": [int(size) for size in target.shape]})
    return _reshaped(call)


def _permute(call: _Node) -> Mapped:
    return Emit("permute", {"x": call.tensor()}, {"dims": list(call.constant("dims"))})


def _t(call: _Node) -> Mapped:
    x = call.tensor()
    if call.rank() < 2:
        return Alias(x)
    return Emit("transpose", {"x": x}, {"dim0": 0, "dim1": 1})


def _squeeze(call: _Node) -> Mapped:
    dim = call.constant("dim") if "dim" in call.arguments else None
    return Emit("squeeze", {"x": call.tensor()}, {"dim": dim})


def _reduction(op: str, dim: str | None = "dim") -> Handler:
    def handle(call: _Node) -> Mapped:
        x = call.tensor()
        if call.arguments.get("dtype") is not None:
            source = call.val()
            if not isinstance(source, torch.Tensor) or source.dtype != call.arguments["dtype"]:
                raise MissingOp("aten._to_copy.default", f"(a dtype cast, in {call.what}) has no catalog op for it yet")
        dims = call.constant(dim) if dim is not None else None
        if isinstance(dims, list) and not dims:
            dims = None
        keepdim = bool(call.constant("keepdim")) if "keepdim" in call.arguments else False
        return Emit(op, {"x": x}, {"dim": dims, "keepdim": keepdim})

    return handle


def _argmax(call: _Node) -> Mapped:
    return Emit(
        "argmax", {"x": call.tensor()}, {"dim": call.constant("dim"), "keepdim": bool(call.constant("keepdim"))}
    )


def _max_dim(call: _Node) -> Mapped:
    x = call.tensor()
    dim, keepdim = call.constant("dim"), bool(call.constant("keepdim"))
    return Several(
        (
            Emit("max", {"x": x}, {"dim": dim, "keepdim": keepdim}),
            Emit("argmax", {"x": x}, {"dim": dim, "keepdim": keepdim}),
        )
    )


def _joined(op: str) -> Handler:
    def handle(call: _Node) -> Mapped:
        tensors = call["tensors"]
        if not isinstance(tensors, (list, tuple)) or not tensors or not all(is_runtime(t) for t in tensors):
            raise call.missing("takes a list that is not all tensors")
        return Emit(op, {f"x{k}": tensor for k, tensor in enumerate(tensors)}, {"dim": call.constant("dim")})

    return handle


_FULL = [None, None, None]


def _bound(call: _Node, value: Any, size: Any, *, start: bool) -> int | SizeExpr | None:
    """A slice bound as the catalog writes it: ``None`` for torch's "to the end" (a bound at or
    past the size, ``sys.maxsize``, or a symbolic bound equal to the dimension's own size)."""
    if value is None:
        return None
    if isinstance(value, Sym):
        if not start and isinstance(size, Sym) and _same_size(value.node, size.node):
            return None
        return as_size(call, value)
    if is_runtime(value):
        raise _size_read(call)
    if not start and (value >= sys.maxsize or (isinstance(size, int) and value >= size)):
        return None
    if start and value == 0:
        return None
    return int(value)


def _same_size(a: Any, b: Any) -> bool:
    node_a = getattr(a, "node", None)
    node_b = getattr(b, "node", None)
    return node_a is not None and node_b is not None and node_a.expr == node_b.expr


def _positive_dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def _slice(call: _Node) -> Mapped:
    x = call.tensor()
    shape = _static_shape(call)
    dim = _positive_dim(call.constant("dim"), len(shape))
    start = _bound(call, call.arguments.get("start"), shape[dim], start=True)
    end = _bound(call, call.arguments.get("end"), shape[dim], start=False)
    step = call.constant("step")
    if start is None and end is None and step in (None, 1):
        return Alias(x)
    item = [start, end, None if step in (None, 1) else int(step)]
    return Emit("getitem", {"x": x}, {"index": [list(_FULL) for _ in range(dim)] + [item]})


def _select(call: _Node) -> Mapped:
    x = call.tensor()
    dim = _positive_dim(call.constant("dim"), call.rank())
    return Emit("getitem", {"x": x}, {"index": [list(_FULL) for _ in range(dim)] + [call.constant("index")]})


def _index(call: _Node) -> Mapped:
    x = call.tensor()
    indices = call["indices"]
    ports: dict[str, Any] = {"x": x}
    index: list[Any] = []
    for item in indices:
        if item is None:
            index.append(list(_FULL))
        elif is_runtime(item):
            port = f"i{len(ports) - 1}"
            ports[port] = item
            index.append(port)
        else:
            raise call.missing(f"takes the index {item!r}, which is neither a tensor nor absent")
    return Emit("getitem", ports, {"index": index})


def _pieces(call: _Node, dim_name: str = "dim") -> tuple[Any, int, Any]:
    x = call.tensor()
    shape = _static_shape(call)
    dim = _positive_dim(call.constant(dim_name), len(shape))
    size = shape[dim]
    if isinstance(size, Sym):
        raise _size_read(call)
    return x, dim, size


def _sliced(x: Any, dim: int, bounds: Sequence[tuple[int, int]]) -> Several:
    prefix = [list(_FULL) for _ in range(dim)]
    return Several(tuple(Emit("getitem", {"x": x}, {"index": [*prefix, [start, end, None]]}) for start, end in bounds))


def _split(call: _Node) -> Mapped:
    x, dim, size = _pieces(call)
    step = call.constant("split_size")
    bounds = [(start, min(start + step, size)) for start in range(0, size, step)] or [(0, 0)]
    return _sliced(x, dim, bounds)


def _split_with_sizes(call: _Node) -> Mapped:
    x, dim, _ = _pieces(call)
    bounds, start = [], 0
    for piece in call.constant("split_sizes"):
        bounds.append((start, start + piece))
        start += piece
    return _sliced(x, dim, bounds)


def _chunk(call: _Node) -> Mapped:
    x, dim, size = _pieces(call)
    chunks = call.constant("chunks")
    step = -(-size // chunks) if size else 1
    bounds = [(start, min(start + step, size)) for start in range(0, size, step)] or [(0, 0)]
    return _sliced(x, dim, bounds)


def _unbind(call: _Node) -> Mapped:
    x, dim, size = _pieces(call)
    prefix = [list(_FULL) for _ in range(dim)]
    return Several(tuple(Emit("getitem", {"x": x}, {"index": [*prefix, index]}) for index in range(size)))


def _same(call: _Node) -> Mapped:
    return Alias(call.tensor())


def _dropout(call: _Node) -> Mapped:
    if call.constant("train"):
        return Emit("Dropout", {"x": call.tensor("input")}, {"p": call.constant("p")})
    return Alias(call.tensor("input"))


def _cast(call: _Node) -> Mapped:
    """A cast (``.to(dtype)``, ``.float()``): nothing when the value already has that dtype."""
    x = call.tensor()
    source, target = call.val(), call.node.meta.get("val")
    if isinstance(source, torch.Tensor) and isinstance(target, torch.Tensor) and source.dtype == target.dtype:
        return Alias(x)
    raise call.missing("(a dtype cast) has no catalog op for it yet")


def _expand(call: _Node) -> Mapped:
    x = call.tensor()
    source, target = call.val(), call.node.meta.get("val")
    if not isinstance(source, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise call.missing()
    if _same_sizes(list(source.shape), list(target.shape)):
        return Alias(x)
    raise call.missing()


def _numpy_t(call: _Node) -> Mapped:
    """``x.T``: every dimension reversed."""
    x = call.tensor()
    rank = call.rank()
    if rank < 2:
        return Alias(x)
    return Emit("permute", {"x": x}, {"dims": list(reversed(range(rank)))})


def _matrix_t(call: _Node) -> Mapped:
    """``x.mT``: the last two dimensions swapped."""
    return Emit("transpose", {"x": call.tensor()}, {"dim0": -2, "dim1": -1})


def _nothing(call: _Node) -> Mapped:
    return Nothing()


def _overloads(packet: Any) -> list[str]:
    names: list[str] = packet.overloads()
    return names


#: How a family module adds handlers: ``each(aten.packet, handler, *overloads)`` (every overload
#: of the packet when none is named).
Register = Callable[..., None]


@functools.cache
def _handlers() -> dict[Any, Handler]:
    """Every handler by aten overload: opset 1's, here, then the opset-2 families'
    (``aten_<family>`` modules, imported here because they build on this module), then aten's
    other names for any of them (:mod:`trama_torch.capture.aten_aliases`)."""
    from trama_torch.capture import (
        aten_activations,
        aten_aliases,
        aten_arrays,
        aten_attention,
        aten_elementwise,
        aten_layer_functions,
        aten_pooling,
    )

    table: dict[Any, Handler] = {}

    def each(packet: Any, handler: Handler, *overloads: str) -> None:
        for name in overloads or _overloads(packet):
            table[getattr(packet, name)] = handler

    for op, packets in (
        ("add", (aten.add, aten.add_)),
        ("sub", (aten.sub, aten.sub_)),
        ("mul", (aten.mul, aten.mul_)),
        ("div", (aten.div, aten.div_)),
    ):
        for packet in packets:
            for name in _overloads(packet):
                if name in ("Tensor", "Scalar", "Tensor_mode", "Scalar_mode"):
                    table[getattr(packet, name)] = _binary(op)
    each(aten.rsub, _binary("sub", swapped=True), "Tensor", "Scalar")
    each(aten.floor_divide, _floor_divide, "default", "Scalar")
    each(aten.pow, _binary("pow", "self", "exponent"), "Tensor_Scalar", "Tensor_Tensor")
    each(aten.pow, _binary("pow", "self", "exponent"), "Scalar")
    each(aten.matmul, _binary("matmul"), "default")
    each(aten.mm, _binary("matmul", "self", "mat2"), "default")
    each(aten.bmm, _binary("matmul", "self", "mat2"), "default")
    for name in ("relu", "silu", "sigmoid", "tanh", "neg", "hardswish"):
        each(getattr(aten, name), _unary(name), "default")
        if hasattr(aten, f"{name}_"):
            each(getattr(aten, f"{name}_"), _unary(name), "default")
    each(aten.gelu, _unary("gelu", approximate="approximate"), "default")
    each(aten.gelu_, _unary("gelu", approximate="approximate"), "default")
    each(aten.leaky_relu, _unary("leaky_relu", negative_slope="negative_slope"), "default")
    each(aten.leaky_relu_, _unary("leaky_relu", negative_slope="negative_slope"), "default")
    each(aten.softplus, _unary("softplus", beta="beta", threshold="threshold"), "default")
    each(aten.elu, _elu, "default")
    each(aten.elu_, _elu, "default")
    each(aten.softmax, _softmax("softmax", "dtype"), "int")
    each(aten._softmax, _softmax("softmax", "half_to_float"), "default")
    each(aten.log_softmax, _softmax("log_softmax", "dtype"), "int")
    each(aten._log_softmax, _softmax("log_softmax", "half_to_float"), "default")
    for packet in (aten.view, aten.reshape, aten._unsafe_view):
        each(packet, _reshape, "default")
    each(aten.unflatten, _unflatten, "int")
    each(aten.permute, _permute, "default")
    each(aten.transpose, _unary("transpose", dim0="dim0", dim1="dim1"), "int")
    each(aten.t, _t, "default")
    each(aten.flatten, _unary("flatten", start_dim="start_dim", end_dim="end_dim"), "using_ints")
    each(aten.unsqueeze, _unary("unsqueeze", dim="dim"), "default")
    each(aten.squeeze, _squeeze, "default", "dim", "dims")
    each(aten.mean, _reduction("mean"), "dim")
    each(aten.mean, _reduction("mean", None), "default")
    each(aten.sum, _reduction("sum"), "dim_IntList")
    each(aten.sum, _reduction("sum", None), "default")
    each(aten.amax, _reduction("max"), "default")
    each(aten.max, _reduction("max", None), "default")
    each(aten.max, _max_dim, "dim")
    each(aten.argmax, _argmax, "default")
    each(aten.cat, _joined("concat"), "default")
    each(aten.stack, _joined("stack"), "default")
    each(aten.select, _select, "int")
    each(aten.slice, _slice, "Tensor")
    each(aten.index, _index, "Tensor")
    each(aten.split, _split, "Tensor")
    each(aten.split_with_sizes, _split_with_sizes, "default")
    each(aten.chunk, _chunk, "default")
    each(aten.unbind, _unbind, "int")
    for packet in (aten.contiguous, aten.clone, aten.detach, aten.alias, aten.lift_fresh_copy):
        each(packet, _same, "default")
    each(aten.view_as, _reshaped, "default")
    each(aten.reshape_as, _reshaped, "default")
    each(aten.numpy_T, _numpy_t, "default")
    each(aten.mT, _matrix_t, "default")
    each(aten.dropout, _dropout, "default")
    each(aten.feature_dropout, _dropout, "default")
    each(aten.alpha_dropout, _dropout, "default")
    each(aten._to_copy, _cast, "default")
    each(aten.to, _cast)
    each(aten.type_as, _cast, "default")
    each(aten.expand, _expand, "default")
    each(aten._assert_scalar, _nothing, "default")
    each(aten._assert_tensor_metadata, _nothing, "default")
    each(aten.sym_constrain_range_for_size, _nothing, "default")
    each(aten.sym_constrain_range, _nothing, "default")
    for family in (aten_activations, aten_elementwise, aten_arrays, aten_layer_functions, aten_pooling, aten_attention):
        family.register(each)
    table.update(aten_aliases.aliased(table))  # ``aten.multiply`` is ``aten.mul``'s handler
    return table


#: Python functions on sizes that torch.export records (``x.size(0) * 2``): the values stay symbolic.
_SIZE_FUNCTIONS = frozenset(
    {
        operator.add,
        operator.sub,
        operator.mul,
        operator.floordiv,
        operator.truediv,
        operator.mod,
        operator.neg,
        operator.pow,
        operator.eq,
        operator.ne,
        operator.lt,
        operator.le,
        operator.gt,
        operator.ge,
        torch.sym_float,
        torch.sym_int,
        torch.sym_max,
        torch.sym_min,
        torch.sym_not,
    }
)
_SIZE_OPS = frozenset({aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int, aten.sym_storage_offset.default})


def size_value(node: fx.Node) -> Any:
    """A size node's value: the number where torch knows it, else a :class:`Sym`."""
    value = node.meta.get("val")
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return Sym(value)
    return value


def translate(node: fx.Node, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Mapped:
    """The catalog form of one ``call_function`` node whose arguments are scope values.

    ``args``/``kwargs`` are the node's with every graph node replaced by its value in the
    scope (:mod:`trama_torch.capture.values`). Raises :class:`MissingOp` where the catalog has
    no op for it."""
    target = node.target
    if target is operator.getitem:
        container, index = args
        if isinstance(container, Several):
            return Alias(container.items[index])
        if isinstance(container, (tuple, list)):
            return Alias(container[index])
        raise MissingOp("operator.getitem", f"on {type(container).__name__} has no catalog op for it yet")
    if target in _SIZE_OPS or target in _SIZE_FUNCTIONS:
        return Alias(size_value(node))
    hazard = inplace_hazard(node)
    if hazard is not None:
        raise InPlaceHazard(op_name(target), f"{hazard}: the catalog's ops are pure, and this mutation is seen")
    return translate_pure(node, args, kwargs)


def translate_pure(node: fx.Node, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Mapped:
    """The value an (in-place) aten op computes, as its pure catalog form, whoever else sees the
    write: for :mod:`trama_torch.capture.emit`, which writes the write itself where it can."""
    handler = _handlers().get(node.target)
    if handler is None:
        raise MissingOp(op_name(node.target))
    return handler(_Node(node, _bind(node, args, kwargs)))


def mutated_argument(node: fx.Node) -> fx.Node | None:
    """The graph node an in-place op writes into, if it writes into one."""
    return _mutated(node)


def slice_bounds(node: fx.Node) -> tuple[int, int | None, int | None, int] | None:
    """``(dim, start, end, step)`` of an ``aten.slice.Tensor`` node, bounds ``None`` where they
    are the defaults, or ``None`` when a bound is not a number at capture."""
    bound = _bind(node, node.args, node.kwargs)
    dim, start, end, step = bound["dim"], bound["start"], bound["end"], bound["step"]
    numbers = [value for value in (dim, start, end, step) if value is not None]
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in numbers):
        return None
    if end is not None and end >= sys.maxsize:
        end = None
    return int(dim or 0), start, end, int(step or 1)


class InPlaceHazard(MissingOp):
    """An in-place op whose mutation is seen elsewhere: the catalog's ops are pure, so it cannot
    be written as the op's out-of-place form (and no decomposition helps)."""


#: Ops whose result shares its first argument's storage (a view), so that writing into one
#: changes the other.
VIEWS = frozenset(
    {
        aten.view.default,
        aten._unsafe_view.default,
        aten.reshape.default,
        aten.slice.Tensor,
        aten.select.int,
        aten.transpose.int,
        aten.permute.default,
        aten.t.default,
        aten.unsqueeze.default,
        aten.squeeze.default,
        aten.squeeze.dim,
        aten.squeeze.dims,
        aten.expand.default,
        aten.alias.default,
        aten.detach.default,
        aten.as_strided.default,
        aten.unflatten.int,
        aten.flatten.using_ints,
        aten.narrow.default,
        aten.split.Tensor,
        aten.split_with_sizes.default,
        aten.chunk.default,
        aten.unbind.int,
        aten.view_as.default,
        aten.reshape_as.default,
        aten.diagonal.default,
        aten.numpy_T.default,
        aten.mT.default,
        aten.swapaxes.default,
        aten.movedim.int,
        aten.contiguous.default,
        operator.getitem,
    }
)


def is_view(node: fx.Node) -> bool:
    """Whether ``node``'s result shares its first argument's storage: a view op's (:data:`VIEWS`),
    or an item of a tuple whose op's schema says it does (``split``'s pieces, ``Tensor(a)[]``).
    The items of another op's tuple are tensors of their own: ``topk``'s values and indices,
    ``max.dim``'s, so that writing into one (``values /= values.sum()``, Mixtral's router) is
    not a write into the other."""
    if node.op != "call_function" or node.target not in VIEWS:
        return False
    if node.target is not operator.getitem:
        return True
    container, index = node.args[0], node.args[1]
    schema = getattr(container.target, "_schema", None) if isinstance(container, fx.Node) else None
    if schema is None or not schema.returns:
        return True  # not an aten op's result: taken as shared, the safe side
    returns = schema.returns
    item = returns[index] if len(returns) > 1 and isinstance(index, int) and 0 <= index < len(returns) else returns[0]
    return item.alias_info is not None


def _mutated(node: fx.Node) -> fx.Node | None:
    """The argument an in-place op writes into (``self`` of ``add_``), if it writes into one."""
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return None
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            value = node.args[index] if index < len(node.args) else node.kwargs.get(argument.name)
            return value if isinstance(value, fx.Node) else None
    return None


def aliases(start: fx.Node) -> set[fx.Node]:
    """``start`` and every node that shares its storage from it on: views of it, in-place ops
    writing into it (whose result is the same tensor), and so on from those."""
    found: set[fx.Node] = set()
    pending = [start]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found.add(current)
        pending.extend(
            user
            for user in current.users
            if user.op == "call_function" and (is_view(user) or _mutated(user) is current)
        )
    return found


def inplace_hazard(node: fx.Node) -> str | None:
    """Why the in-place op ``node`` cannot be written as its pure form, or ``None`` when it can.

    The catalog's ops are pure: ``relu_(x)`` is written as ``relu(x)``, whose result is the
    op's value. That is exact as long as nothing reads the written tensor, or another view of
    its storage, after the op other than through the op's own result, which is how in-place ops
    are used in practice (``nn.ReLU(inplace=True)``, ``out += identity``). A program that reads
    the tensor again (``b = a.clone(); b[:2].zero_(); f(b)``) would silently get the unmutated
    value, so it is refused."""
    target = _mutated(node)
    if target is None:
        return None
    base = target
    while True:  # up through views, and in-place results (the very tensor they wrote into)
        if is_view(base) and base.args and isinstance(base.args[0], fx.Node):
            base = base.args[0]
        elif (written := _mutated(base)) is not None:
            base = written
        else:
            break
    storage = aliases(base)
    # What is taken from the op's own result (a view of it, a further in-place op on it) is
    # computed from the pure form's value: reading those is fine.
    derived = aliases(node)
    order = {each: index for index, each in enumerate(node.graph.nodes)}
    position = order[node]
    for member in sorted(storage - derived, key=order.__getitem__):
        for user in member.users:
            if user in derived or order[user] <= position:
                continue
            shared = "" if member is target else f" ({member.name} shares its storage)"
            return f"writes into {target.name}, and {user.name} reads {member.name} afterwards{shared}"
    return None


def foldable(node: fx.Node) -> bool:
    """Whether a node whose inputs are all known at capture may be computed now (not random)."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return torch.Tag.nondeterministic_seeded not in target.tags
    return target in _SIZE_FUNCTIONS or target is operator.getitem
