"""From a traced torch call to a catalog function node: which op, which ports, which slots.

A tracer (``torch.fx``) records the calls a ``forward`` makes as ``call_function`` nodes (the
target is the function: ``torch.add``, ``operator.add``, ``F.relu``, ``torch.cat``,
``operator.getitem``) and ``call_method`` nodes (the target is a method name: ``"view"``,
``"softmax"``). torch spells one operation many ways — ``x + y``, ``torch.add(x, y)``,
``x.add(y)``, ``x.add_(y)`` — and each spelling is listed here once, with its signature written as
torch declares it, and mapped by a binder to the one op the catalog has for all of them.

Arguments that are traced values (``is_tensor``) become input ports; everything else (dims,
shapes, scalars, slices) becomes slots. Two places take constants as ports because the catalog
has no slot for them: the elements of ``torch.cat``'s list and the tensor items of an index
(``x[:, [0, 2]]``); the caller feeds such a constant through a ``constant`` node.

Reversed operands need no special case: fx records ``2 - x`` as ``operator.sub(2, x)``, in source
order, and a binary op's ``x`` and ``other`` are each a port or a slot. What opset 1 cannot record
is refused with a :class:`trama.ExportError` that names the function and says what to write
instead: shapes read at run time (``x.size(0)``), dtype casts, ``torch.max(x, dim)``'s
(values, indices) pair, functions without a catalog op.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from trama import ExportError, Tensor
from trama_torch.binding import bind_arguments, signature
from trama_torch.leaves.modules import implicit_softmax_dim
from trama_torch.leaves.table import Structure
from trama_torch.tensors import export_tensor

__all__ = ["FunctionCall", "export_function_call"]


@dataclass(frozen=True)
class FunctionCall:
    """One traced call as a catalog node: ``op``, the arguments wired to input ports (traced values,
    or constants the caller feeds through a ``constant`` node), the slot values, the node's outputs
    and how the call's result maps to them (``result``, as :func:`trama_torch.leaves.leaf_result_structure`).

    ``inplace`` names the port whose argument torch modifies in place (``x.add_(y)``,
    ``F.relu(x, inplace=True)``): the node computes the same value out of place, which is only
    faithful when nothing reads that argument after the call; the caller checks that.
    """

    op: str
    ports: dict[str, Any]
    parameters: dict[str, Any]
    outputs: tuple[str, ...] = ("y",)
    result: Structure = "y"
    inplace: str | None = None


@dataclass(frozen=True)
class _Call:
    """The call being mapped: its name for messages and the caller's questions about values."""

    what: str
    is_tensor: Callable[[Any], bool]
    is_sequence: Callable[[Any], bool] | None
    ndim: Callable[[Any], int | None] | None

    def error(self, message: str) -> ExportError:
        return ExportError(f"{self.what}: {message}")

    def constant(self, value: Any, name: str) -> Any:
        """A slot value: must not be traced; tuples become lists."""
        if self.is_tensor(value):
            raise self.error(
                f"{name} is computed at run time, but opset 1 records it only as a constant; write it as a number"
            )
        if isinstance(value, (tuple, list, torch.Size)):
            return [self.constant(item, name) for item in value]
        return value

    def rank(self, value: Any) -> int | None:
        return self.ndim(value) if self.ndim is not None else None


Binder = Callable[[dict[str, Any], _Call], FunctionCall]


@dataclass(frozen=True)
class _Spelling:
    """One way torch spells an op: its signature, the binder that maps it, and whether it is the
    in-place form (which modifies its first argument)."""

    signature: inspect.Signature
    bind: Binder
    inplace: bool = False


# --- Binders --------------------------------------------------------------------------------------


def _operand_constant(value: Any, call: _Call, name: str) -> Any:
    """A binary operand that is not traced, as its slot holds it."""
    if isinstance(value, torch.Tensor):
        return export_tensor(value)
    if isinstance(value, np.ndarray):
        return Tensor.from_array(value)
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        value = value.item()  # torch takes a numpy scalar as the Python number it holds
    if isinstance(value, (bool, int, float)):
        return value
    raise call.error(f"the operand {name} is a {type(value).__name__}; a tensor, a number or a bool is needed")


def _binary(op: str, first: str = "input", second: str = "other", **fixed: Any) -> Binder:
    """A binary op: each operand a port when traced, else its slot. ``fixed`` slots are set by the
    spelling (``//`` is ``rounding_mode="floor"``); ``alpha`` and ``rounding_mode`` come from the
    call when its signature has them."""

    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        ports: dict[str, Any] = {}
        parameters: dict[str, Any] = {}
        for name, argument in (("x", arguments[first]), ("other", arguments[second])):
            if call.is_tensor(argument):
                ports[name] = argument
            else:
                parameters[name] = _operand_constant(argument, call, name)
        if op in ("add", "sub"):
            alpha = call.constant(arguments.get("alpha", 1), "alpha")
            if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
                raise call.error(f"alpha must be a number, got {alpha!r}")
            parameters["alpha"] = alpha
        if op == "div":
            mode = fixed["rounding_mode"] if "rounding_mode" in fixed else arguments.get("rounding_mode")
            if mode not in (None, "trunc", "floor"):
                raise call.error(f'rounding_mode must be None, "trunc" or "floor", got {mode!r}')
            parameters["rounding_mode"] = mode
        return FunctionCall(op, ports, parameters)

    return bind


def _unary(op: str, first: str = "input", **slots: str) -> Binder:
    """An op of one input and hyper-parameter slots, each read from the argument of that name
    (``slots`` maps slot names to argument names where they differ)."""

    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        parameters = {slot: call.constant(arguments[argument], slot) for slot, argument in slots.items()}
        return FunctionCall(op, {"x": arguments[first]}, parameters)

    return bind


def _same(*names: str) -> dict[str, str]:
    return {name: name for name in names}


def _softmax(op: str, first: str = "input") -> Binder:
    """``softmax``/``log_softmax``: ``dtype`` is refused; ``dim=None`` is resolved to torch's
    implicit dimension when the input's rank is known (the catalog asks exporters to write it)."""

    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        if arguments.get("dtype") is not None:
            raise call.error("dtype= casts before the op, which opset 1 cannot record; cast the input in a module")
        dim = call.constant(arguments["dim"], "dim")
        rank = call.rank(arguments[first])
        if dim is None and rank is not None:
            dim = implicit_softmax_dim(rank)
        return FunctionCall(op, {"x": arguments[first]}, {"dim": dim})

    return bind


def _dims(value: Any, call: _Call, *, empty_means_all: bool) -> Any:
    """A reduction's ``dim`` as the catalog writes it: null, an int or a non-empty list."""
    dim = call.constant(value, "dim")
    if isinstance(dim, list) and not dim:
        if empty_means_all:
            return None
        raise call.error("dim=() is refused: torch reads an empty list as every dimension and NumPy as none")
    return dim


def _reduction(op: str, first: str = "input", *, empty_means_all: bool = False) -> Binder:
    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        if arguments.get("dtype") is not None:
            raise call.error("dtype= casts before the reduction, which opset 1 cannot record")
        dim = _dims(arguments["dim"], call, empty_means_all=empty_means_all)
        keepdim = call.constant(arguments["keepdim"], "keepdim")
        return FunctionCall(op, {"x": arguments[first]}, {"dim": dim, "keepdim": keepdim})

    return bind


def _max(first: str = "input") -> Binder:
    """``torch.max(x)`` is the catalog's ``max``; its two other forms have no single op."""

    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        dim = arguments["dim"]
        if call.is_tensor(dim) or isinstance(dim, torch.Tensor):
            raise call.error("the elementwise maximum of two tensors has no op in opset 1")
        if dim is not None:
            raise call.error(
                "with dim it returns (values, indices), which no single catalog op gives; "
                "write torch.amax(x, dim) for the values and torch.argmax(x, dim) for the indices"
            )
        return FunctionCall("max", {"x": arguments[first]}, {"dim": None, "keepdim": False})

    return bind


def _argmax(first: str = "input") -> Binder:
    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        parameters = {name: call.constant(arguments[name], name) for name in ("dim", "keepdim")}
        return FunctionCall("argmax", {"x": arguments[first]}, parameters)

    return bind


def _joined(op: str, dim: str = "dim") -> Binder:
    """``torch.cat``/``torch.stack``: the list written at the call becomes the ports ``x0``, ``x1``…"""

    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        tensors = arguments["tensors"]
        if not isinstance(tensors, (list, tuple)):
            raise call.error("the tensors must be a list or tuple written at the call")
        if not tensors:
            raise call.error("the list of tensors is empty")
        ports = {f"x{k}": tensor for k, tensor in enumerate(tensors)}
        return FunctionCall(op, ports, {"dim": call.constant(arguments[dim], "dim")})

    return bind


def _sizes(values: Any, call: _Call, name: str) -> list[int]:
    """A shape or a permutation, given as varargs (``view(2, -1)``) or one sequence (``view((2, -1))``)."""
    if isinstance(values, tuple) and len(values) == 1 and isinstance(values[0], (tuple, list, torch.Size)):
        values = values[0]
    if isinstance(values, tuple) and len(values) == 1 and isinstance(values[0], torch.dtype):
        raise call.error("reinterpreting the bytes as another dtype has no op in opset 1")
    if call.is_tensor(values) or not isinstance(values, (tuple, list, torch.Size)):
        raise call.error(f"{name} must be written at the call (ints), got {values!r}")
    sizes = call.constant(values, name)
    if not all(isinstance(size, int) and not isinstance(size, bool) for size in sizes):
        raise call.error(f"{name} must hold ints, got {sizes!r}")
    return list(sizes)


def _reshape(name: str, first: str = "input") -> Binder:
    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        return FunctionCall("reshape", {"x": arguments[first]}, {"shape": _sizes(arguments[name], call, name)})

    return bind


def _permute(name: str, first: str = "input") -> Binder:
    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        return FunctionCall("permute", {"x": arguments[first]}, {"dims": _sizes(arguments[name], call, name)})

    return bind


def _identity(first: str = "input") -> Binder:
    """Calls that change nothing about a value (``contiguous``, ``clone``, ``detach``): values in a
    graph are immutable and gradients are not part of a document, so they are ``Identity``."""

    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        return FunctionCall("Identity", {"x": arguments[first]}, {})

    return bind


def _dropout(training: str, first: str = "input") -> Binder:
    """``F.dropout``: the module ``Dropout`` when the call drops in training (it follows the
    imported module's mode, as ``training=self.training`` does), ``Identity`` when it never drops."""

    def bind(arguments: dict[str, Any], call: _Call) -> FunctionCall:
        if call.constant(arguments[training], training):
            return FunctionCall("Dropout", {"x": arguments[first]}, {"p": call.constant(arguments["p"], "p")})
        return FunctionCall("Identity", {"x": arguments[first]}, {})

    return bind


def _index_item(item: Any, call: _Call, ports: dict[str, Any]) -> Any:
    """One component of a subscript in the getitem index language; tensor items become ports."""
    if call.is_tensor(item) or isinstance(item, (torch.Tensor, np.ndarray, list, tuple)):
        if isinstance(item, (list, tuple)) and any(call.is_tensor(part) for part in item):
            raise call.error("an index list mixing traced values and constants cannot be recorded; stack them")
        port = f"i{len(ports)}"
        ports[port] = list(item) if isinstance(item, tuple) else item
        return port
    if item is None:
        return None
    if item is Ellipsis:
        return "..."
    if isinstance(item, bool):
        raise call.error("a bool index item (x[True]) has no form in the index language")
    if isinstance(item, int):
        return int(item)
    if isinstance(item, slice):
        bounds = [item.start, item.stop, item.step]
        for bound in bounds:
            if call.is_tensor(bound) or not (bound is None or (isinstance(bound, int) and not isinstance(bound, bool))):
                raise call.error(f"slice bounds must be ints written at the call, got {bound!r}")
        if item.step is not None and item.step <= 0:
            raise call.error(f"slice step {item.step} must be positive, as torch requires")
        return bounds
    raise call.error(f"the index item {item!r} has no form in the index language")


def _getitem(arguments: dict[str, Any], call: _Call) -> FunctionCall:
    """``x[index]``: ``tuple_get`` when ``x`` is a tuple value, else ``getitem``."""
    value, index = arguments["a"], arguments["b"]
    if call.is_sequence is not None and call.is_sequence(value):
        if isinstance(index, bool) or not isinstance(index, int):
            raise call.error(f"a tuple value can only be indexed by an int written at the call, got {index!r}")
        return FunctionCall("tuple_get", {"x": value}, {"index": index})
    ports: dict[str, Any] = {}
    items = [_index_item(item, call, ports) for item in (index if isinstance(index, tuple) else (index,))]
    if items.count("...") > 1:
        raise call.error("an index may hold ... only once")
    return FunctionCall("getitem", {"x": value, **ports}, {"index": items})


def _attribute(arguments: dict[str, Any], call: _Call) -> FunctionCall:
    """``getattr(x, name)``: ``x.mT`` (and ``x.T`` of a known rank) are transposes; shapes and other
    attributes are refused."""
    value, name = arguments["obj"], arguments["name"]
    if name == "mT":
        return FunctionCall("transpose", {"x": value}, {"dim0": -2, "dim1": -1})
    if name == "T":
        rank = call.rank(value)
        if rank is None:
            raise call.error(
                "x.T depends on x's rank, which the tracer did not record; write x.transpose(0, 1) or x.mT"
            )
        if rank < 2:
            return FunctionCall("Identity", {"x": value}, {})
        return FunctionCall("permute", {"x": value}, {"dims": list(range(rank - 1, -1, -1))})
    raise call.error(f"the attribute {name!r} {_UNSUPPORTED_HINTS.get(name, 'has no op in opset 1')}")


# --- The spellings --------------------------------------------------------------------------------

_SHAPE_AT_RUN_TIME = (
    "reads the shape at run time, which opset 1 cannot record (it has no shape input): write sizes as "
    "numbers or -1 (x.view(-1, 16), torch.flatten(x, 1))"
)
_CAST = "casts the dtype or moves the device, which opset 1 cannot record; do it outside the exported module"

#: Why common unsupported methods and attributes are refused, by name.
_UNSUPPORTED_HINTS: Mapping[str, str] = {
    **{name: _SHAPE_AT_RUN_TIME for name in ("size", "shape", "dim", "ndim", "ndimension", "numel", "nelement")},
    **{
        name: _CAST
        for name in (
            "to",
            "type",
            "type_as",
            "float",
            "double",
            "half",
            "bfloat16",
            "int",
            "long",
            "bool",
            "cuda",
            "cpu",
        )
    },
}


def _spell(parameters: str, bind: Binder, *, inplace: bool = False) -> _Spelling:
    return _Spelling(signature(parameters), bind, inplace)


def _method(parameters: str) -> str:
    """A method's signature: ``self`` first (the binders call it ``input``)."""
    return f"input, {parameters}" if parameters else "input"


_BINARY_FUNCTION = "input, other"
_OPERATOR = "a, b"


def _arithmetic() -> tuple[dict[Any, _Spelling], dict[str, _Spelling]]:
    """The arithmetic spellings: torch functions, operators and methods (with their in-place forms)."""
    functions: dict[Any, _Spelling] = {}
    methods: dict[str, _Spelling] = {}
    for op, names, operators, in_place_operator, extra in (
        ("add", ("add",), (operator.add,), operator.iadd, ", *, alpha=1"),
        ("sub", ("sub", "subtract"), (operator.sub,), operator.isub, ", *, alpha=1"),
        ("mul", ("mul", "multiply"), (operator.mul,), operator.imul, ""),
        ("div", ("div", "divide"), (operator.truediv,), operator.itruediv, ", *, rounding_mode=None"),
    ):
        for name in names:
            functions[getattr(torch, name)] = _spell(_BINARY_FUNCTION + extra, _binary(op))
            methods[name] = _spell(_method("other" + extra), _binary(op))
            methods[f"{name}_"] = _spell(_method("other" + extra), _binary(op), inplace=True)
        for function in operators:
            functions[function] = _spell(_OPERATOR, _binary(op, "a", "b"))
        functions[in_place_operator] = _spell(_OPERATOR, _binary(op, "a", "b"), inplace=True)
    functions[torch.rsub] = _spell("input, other, *, alpha=1", _binary("sub", "other", "input"))
    floor = _binary("div", rounding_mode="floor")
    functions[torch.true_divide] = _spell(_BINARY_FUNCTION, _binary("div", rounding_mode=None))
    functions[torch.floor_divide] = _spell(_BINARY_FUNCTION, floor)
    methods["true_divide"] = _spell(_method("other"), _binary("div", rounding_mode=None))
    methods["floor_divide"] = _spell(_method("other"), floor)
    functions[operator.floordiv] = _spell(_OPERATOR, _binary("div", "a", "b", rounding_mode="floor"))
    functions[operator.ifloordiv] = _spell(_OPERATOR, _binary("div", "a", "b", rounding_mode="floor"), inplace=True)
    functions[torch.pow] = _spell("input, exponent", _binary("pow", "input", "exponent"))
    methods["pow"] = _spell(_method("exponent"), _binary("pow", "input", "exponent"))
    methods["pow_"] = _spell(_method("exponent"), _binary("pow", "input", "exponent"), inplace=True)
    functions[operator.pow] = _spell(_OPERATOR, _binary("pow", "a", "b"))
    functions[operator.ipow] = _spell(_OPERATOR, _binary("pow", "a", "b"), inplace=True)
    functions[torch.matmul] = _spell(_BINARY_FUNCTION, _binary("matmul"))
    functions[operator.matmul] = _spell(_OPERATOR, _binary("matmul", "a", "b"))
    methods["matmul"] = _spell(_method("other"), _binary("matmul"))
    for name in ("mm", "bmm"):  # special cases of matmul, computed by the same kernels
        functions[getattr(torch, name)] = _spell("input, mat2", _binary("matmul", "input", "mat2"))
        methods[name] = _spell(_method("mat2"), _binary("matmul", "input", "mat2"))
    for name in ("neg", "negative"):
        functions[getattr(torch, name)] = _spell("input", _unary("neg"))
        methods[name] = _spell(_method(""), _unary("neg"))
        methods[f"{name}_"] = _spell(_method(""), _unary("neg"), inplace=True)
    functions[operator.neg] = _spell("a", _unary("neg", "a"))
    return functions, methods


def _activations() -> tuple[dict[Any, _Spelling], dict[str, _Spelling]]:
    """The function forms of the activations (``F.relu``, ``torch.relu``, ``x.relu()``…)."""
    functions: dict[Any, _Spelling] = {
        F.relu: _spell("input, inplace=False", _unary("relu")),
        torch.relu: _spell("input", _unary("relu")),
        torch.relu_: _spell("input", _unary("relu"), inplace=True),
        F.relu_: _spell("input", _unary("relu"), inplace=True),
        F.leaky_relu: _spell(
            "input, negative_slope=0.01, inplace=False", _unary("leaky_relu", **_same("negative_slope"))
        ),
        F.leaky_relu_: _spell(
            "input, negative_slope=0.01", _unary("leaky_relu", **_same("negative_slope")), inplace=True
        ),
        F.gelu: _spell("input, approximate='none'", _unary("gelu", **_same("approximate"))),
        F.silu: _spell("input, inplace=False", _unary("silu")),
        F.hardswish: _spell("input, inplace=False", _unary("hardswish")),
        F.softplus: _spell("input, beta=1.0, threshold=20.0", _unary("softplus", **_same("beta", "threshold"))),
        F.elu: _spell("input, alpha=1.0, inplace=False", _unary("elu", **_same("alpha"))),
        F.elu_: _spell("input, alpha=1.0", _unary("elu", **_same("alpha")), inplace=True),
        F.softmax: _spell("input, dim=None, _stacklevel=3, dtype=None", _softmax("softmax")),
        torch.softmax: _spell("input, dim, dtype=None", _softmax("softmax")),
        F.log_softmax: _spell("input, dim=None, _stacklevel=3, dtype=None", _softmax("log_softmax")),
        torch.log_softmax: _spell("input, dim, dtype=None", _softmax("log_softmax")),
    }
    methods: dict[str, _Spelling] = {
        "relu": _spell(_method(""), _unary("relu")),
        "relu_": _spell(_method(""), _unary("relu"), inplace=True),
        "softmax": _spell(_method("dim, dtype=None"), _softmax("softmax")),
        "log_softmax": _spell(_method("dim, dtype=None"), _softmax("log_softmax")),
    }
    for name in ("sigmoid", "tanh"):
        functions[getattr(torch, name)] = _spell("input", _unary(name))
        functions[getattr(F, name)] = _spell("input", _unary(name))
        methods[name] = _spell(_method(""), _unary(name))
        methods[f"{name}_"] = _spell(_method(""), _unary(name), inplace=True)
    return functions, methods


def _tensors() -> tuple[dict[Any, _Spelling], dict[str, _Spelling]]:
    """Joining, shapes, reductions, indexing, and the calls that leave a value as it is."""
    functions: dict[Any, _Spelling] = {
        torch.cat: _spell("tensors, dim=0", _joined("concat")),
        torch.concat: _spell("tensors, dim=0", _joined("concat")),
        torch.concatenate: _spell("tensors, axis=0", _joined("concat", "axis")),
        torch.stack: _spell("tensors, dim=0", _joined("stack")),
        torch.reshape: _spell("input, shape", _reshape("shape")),
        torch.permute: _spell("input, dims", _permute("dims")),
        torch.transpose: _spell("input, dim0, dim1", _unary("transpose", **_same("dim0", "dim1"))),
        torch.swapaxes: _spell("input, axis0, axis1", _unary("transpose", dim0="axis0", dim1="axis1")),
        torch.swapdims: _spell("input, dim0, dim1", _unary("transpose", **_same("dim0", "dim1"))),
        torch.flatten: _spell("input, start_dim=0, end_dim=-1", _unary("flatten", **_same("start_dim", "end_dim"))),
        torch.squeeze: _spell("input, dim=None", _unary("squeeze", **_same("dim"))),
        torch.unsqueeze: _spell("input, dim", _unary("unsqueeze", **_same("dim"))),
        torch.mean: _spell("input, dim=None, keepdim=False, *, dtype=None", _reduction("mean")),
        torch.sum: _spell("input, dim=None, keepdim=False, *, dtype=None", _reduction("sum")),
        torch.amax: _spell("input, dim=(), keepdim=False", _reduction("max", empty_means_all=True)),
        torch.max: _spell("input, dim=None, keepdim=False", _max()),
        torch.argmax: _spell("input, dim=None, keepdim=False", _argmax()),
        operator.getitem: _spell(_OPERATOR, _getitem),
        builtins.getattr: _spell("obj, name", _attribute),
        torch.clone: _spell("input, *, memory_format=None", _identity()),
        torch.detach: _spell("input", _identity()),
        F.dropout: _spell("input, p=0.5, training=True, inplace=False", _dropout("training")),
        torch.dropout: _spell("input, p, train", _dropout("train")),
    }
    methods: dict[str, _Spelling] = {
        "reshape": _spell(_method("*shape"), _reshape("shape")),
        "view": _spell(_method("*shape"), _reshape("shape")),
        "permute": _spell(_method("*dims"), _permute("dims")),
        "transpose": _spell(_method("dim0, dim1"), _unary("transpose", **_same("dim0", "dim1"))),
        "swapaxes": _spell(_method("axis0, axis1"), _unary("transpose", dim0="axis0", dim1="axis1")),
        "swapdims": _spell(_method("dim0, dim1"), _unary("transpose", **_same("dim0", "dim1"))),
        "flatten": _spell(_method("start_dim=0, end_dim=-1"), _unary("flatten", **_same("start_dim", "end_dim"))),
        "squeeze": _spell(_method("dim=None"), _unary("squeeze", **_same("dim"))),
        "unsqueeze": _spell(_method("dim"), _unary("unsqueeze", **_same("dim"))),
        "mean": _spell(_method("dim=None, keepdim=False, *, dtype=None"), _reduction("mean")),
        "sum": _spell(_method("dim=None, keepdim=False, *, dtype=None"), _reduction("sum")),
        "amax": _spell(_method("dim=(), keepdim=False"), _reduction("max", empty_means_all=True)),
        "max": _spell(_method("dim=None, keepdim=False"), _max()),
        "argmax": _spell(_method("dim=None, keepdim=False"), _argmax()),
        "contiguous": _spell(_method("memory_format=None"), _identity()),
        "clone": _spell(_method("*, memory_format=None"), _identity()),
        "detach": _spell(_method(""), _identity()),
    }
    return functions, methods


def _tables() -> tuple[dict[Any, _Spelling], dict[str, _Spelling]]:
    functions: dict[Any, _Spelling] = {}
    methods: dict[str, _Spelling] = {}
    for part in (_arithmetic, _activations, _tensors):
        more_functions, more_methods = part()
        functions.update(more_functions)
        methods.update(more_methods)
    return functions, methods


_FUNCTIONS, _METHODS = _tables()

#: Functions whose module form is a catalog op: the hint says to hold that module instead.
_MODULE_FORMS: Mapping[Any, str] = {
    F.linear: "Linear",
    F.bilinear: "Bilinear",
    F.conv1d: "Conv1d",
    F.conv2d: "Conv2d",
    F.conv_transpose2d: "ConvTranspose2d",
    F.max_pool2d: "MaxPool2d",
    F.avg_pool2d: "AvgPool2d",
    F.adaptive_avg_pool2d: "AdaptiveAvgPool2d",
    F.batch_norm: "BatchNorm2d",
    F.layer_norm: "LayerNorm",
    F.group_norm: "GroupNorm",
    F.rms_norm: "RMSNorm",
    F.embedding: "Embedding",
    F.multi_head_attention_forward: "MultiheadAttention",
}


def _name(kind: str, target: Any) -> str:
    """How messages name the callee: ``Tensor.view``, ``torch.cat``, ``torch.nn.functional.linear``."""
    if kind == "call_method":
        return f"Tensor.{target}"
    name = getattr(target, "__name__", None) or repr(target)
    module = getattr(target, "__module__", None)
    if module == "_operator":
        module = "operator"
    if module in (None, "torch._C._VariableFunctions", "torch._C._nn") and getattr(torch, name, None) is target:
        module = "torch"
    if module in (None, "torch._C._nn") and getattr(F, name, None) is target:
        module = "torch.nn.functional"
    return f"{module}.{name}" if module else name


def _tensor_method(target: Any) -> str | None:
    """The method name of a ``torch.Tensor`` method called as a function (``torch.Tensor.add(x, y)``)."""
    name = getattr(target, "__name__", None)
    return name if isinstance(name, str) and getattr(torch.Tensor, name, None) is target else None


def _unsupported(what: str, kind: str, target: Any) -> ExportError:
    name = target if kind == "call_method" else getattr(target, "__name__", "")
    hint = _UNSUPPORTED_HINTS.get(name) if isinstance(name, str) else None
    if hint is not None:
        return ExportError(f"{what} {hint}")
    module = _MODULE_FORMS.get(target) if kind == "call_function" else None
    also = f"; its module form torch.nn.{module} is a catalog op: hold one and call it" if module else ""
    return ExportError(
        f"{what} has no op in the trama catalog (docs/ops.md, Tensor functions){also}; write it with a supported "
        "form, or move it into a module that implements to_node (trama.ExportableOp) or that an exporter "
        "registered through the plugin hooks handles (docs/plugins.md)"
    )


def export_function_call(
    kind: str,
    target: Any,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    *,
    is_tensor: Callable[[Any], bool],
    is_sequence: Callable[[Any], bool] | None = None,
    ndim: Callable[[Any], int | None] | None = None,
) -> FunctionCall:
    """The catalog node of one traced call (a ``torch.fx`` ``call_function`` or ``call_method``).

    ``is_tensor(arg)`` says whether an argument is a traced value (those become ports). Two
    optional questions let the caller say more when its tracer knows: ``is_sequence(arg)``
    whether a traced value is a tuple or list (then ``v[0]`` is ``tuple_get``, not ``getitem``),
    and ``ndim(arg)`` a traced tensor's rank or ``None`` (it resolves ``x.T`` and the implicit
    softmax dimension). Anything opset 1 cannot record raises :class:`trama.ExportError`.
    """
    if kind not in ("call_function", "call_method"):
        raise ExportError(f"export_function_call maps call_function and call_method nodes, not {kind!r}")
    method = target if kind == "call_method" else _tensor_method(target)
    what = _name("call_method" if method is not None else kind, method if method is not None else target)
    try:
        spelling = _METHODS.get(method) if isinstance(method, str) else _FUNCTIONS.get(target)
    except TypeError:  # an unhashable target
        spelling = None
    if spelling is None:
        raise _unsupported(what, "call_method" if method is not None else kind, method or target)
    arguments = bind_arguments(spelling.signature, args, kwargs, what=what)
    call = spelling.bind(arguments, _Call(what, is_tensor, is_sequence, ndim))
    if spelling.inplace or arguments.get("inplace") is True:
        call = dataclasses.replace(call, inplace="x")
    return call
