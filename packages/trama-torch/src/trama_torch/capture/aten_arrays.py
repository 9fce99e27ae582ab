"""Captured aten ops → the catalog's arrays ops (see :mod:`trama_torch.capture.aten`).

``aten.expand`` replaces opset 1's handler, which knew only the expansion that changes nothing:
an expansion is now ``expand``, its sizes written as numbers, a symbolic size that is the input's
own size there as −1 (it keeps that dimension), and any other symbolic size refused as a size
read. ``swapaxes``/``swapdims`` are opset 1's ``transpose``; ``min.dim`` is two nodes, ``min``
and ``argmin``, as ``max.dim`` is ``max`` and ``argmax``; ``topk`` is one node of two outputs,
its values and indices. ``repeat_interleave`` takes its counts as numbers: an int, or a tensor
of counts the capture computed from constants.

Creation ops reach these handlers only when one of their arguments is known at run time alone
(the capture computes the others into constants): ``x.new_ones(size)`` with ``x`` a wire becomes
``ones`` with the dtype of ``x`` (its value never depends on the values of ``x``), and a size
that torch.export kept symbolic is a size read, which the catalog cannot record.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trama.format._dtypes import DTYPE_NAMES
from trama_torch.capture.aten import (
    Alias,
    Emit,
    Handler,
    Mapped,
    MissingOp,
    Register,
    _equal_size,
    _Node,
    _reduction,
    _same_sizes,
    _size_read,
    _static_shape,
    as_size,
    sizes_or_numbers,
)
from trama_torch.capture.values import ConstTensor, Several, Sym, is_runtime

__all__ = ["register"]

aten = torch.ops.aten


def _dtype_name(call: _Node, dtype: Any) -> str:
    """A torch dtype as the format names it; one the format cannot store is a missing op."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPE_NAMES:
        raise call.missing(f"with dtype {dtype} has no catalog op for it yet (the format has no such dtype)")
    return name


def _result_dtype(call: _Node) -> torch.dtype | None:
    value = call.node.meta.get("val")
    return value.dtype if isinstance(value, torch.Tensor) else None


def _natural_dtype(call: _Node, op: str) -> None:
    """A ``dtype`` argument that asks for another result dtype than the catalog op's own is a
    cast, which this op does not record."""
    if call.arguments.get("dtype") is None:
        return
    source = call.val()
    natural = source.dtype if isinstance(source, torch.Tensor) else None
    if natural is not None and not natural.is_floating_point:
        natural = torch.int64
    if natural is None or _result_dtype(call) != natural:
        raise MissingOp("aten._to_copy.default", f"(a dtype cast, in {call.what}) has no catalog op for it yet")


def _static_sizes(call: _Node, sizes: Any) -> list[Any]:
    """A created tensor's shape: numbers, and expressions over the input symbols."""
    return sizes_or_numbers(call, sizes)


# --- Shapes ---------------------------------------------------------------------------------


def _expand(call: _Node) -> Mapped:
    """``expand``: nothing when the shape is unchanged; a symbolic size is −1 where it is the
    input's own size in that dimension."""
    x = call.tensor()
    source, target = call.val(), call.node.meta.get("val")
    if not isinstance(source, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise call.missing("reads an input whose shape the capture does not know")
    if _same_sizes(list(source.shape), list(target.shape)):
        return Alias(x)
    sizes = call["size"]
    if isinstance(sizes, Sym) or not isinstance(sizes, (list, tuple)):
        raise _size_read(call)
    own = _static_shape(call)
    lead = len(sizes) - len(own)
    written: list[Any] = []
    for k, size in enumerate(sizes):
        if isinstance(size, Sym):
            mine = own[k - lead] if k >= lead else None
            if isinstance(mine, Sym) and _equal_size(size.node, mine.node):
                written.append(-1)
                continue
            written.append(as_size(call, size))
            continue
        if is_runtime(size):
            raise _size_read(call)
        written.append(int(size))
    return Emit("expand", {"x": x}, {"size": written})


def _expand_as(call: _Node) -> Mapped:
    """``expand_as(other)``: ``expand`` to the shape of ``other``, symbolic sizes as −1 where
    they are the input's own."""
    x = call.tensor()
    source, target = call.val(), call.val("other")
    if not isinstance(source, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise call.missing("reads an input whose shape the capture does not know")
    if _same_sizes(list(source.shape), list(target.shape)):
        return Alias(x)
    lead = target.dim() - source.dim()
    written: list[Any] = []
    sizes: list[Any] = list(target.shape)
    own: list[Any] = list(source.shape)
    for k, size in enumerate(sizes):
        if isinstance(size, torch.SymInt):
            mine = own[k - lead] if k >= lead else None
            if isinstance(mine, torch.SymInt) and _equal_size(size, mine):
                written.append(-1)
                continue
            written.append(as_size(call, Sym(size)))
            continue
        written.append(int(size))
    return Emit("expand", {"x": x}, {"size": written})


def _indexed(op: str) -> Handler:
    def handle(call: _Node) -> Mapped:
        return Emit(op, {"x": call.tensor(), "index": call.tensor("index")}, {"dim": call.constant("dim")})

    return handle


def _scan(op: str) -> Handler:
    def handle(call: _Node) -> Mapped:
        x = call.tensor()
        _natural_dtype(call, op)
        return Emit(op, {"x": x}, {"dim": call.constant("dim")})

    return handle


def _triangle(op: str) -> Handler:
    def handle(call: _Node) -> Mapped:
        return Emit(op, {"x": call.tensor()}, {"diagonal": call.constant("diagonal")})

    return handle


def _roll(call: _Node) -> Mapped:
    shifts = call.constant("shifts")
    dims = call.constant("dims")
    return Emit("roll", {"x": call.tensor()}, {"shifts": shifts, "dims": dims if dims else None})


def _listed(op: str, slot: str, argument: str) -> Handler:
    """An op of one input and one list slot (``flip``'s dims, ``repeat``'s repeats)."""

    def handle(call: _Node) -> Mapped:
        return Emit(op, {"x": call.tensor()}, {slot: list(call.constant(argument))})

    return handle


def _repeat_interleave(call: _Node) -> Mapped:
    """``repeat_interleave.self_int`` (a count) and ``.self_Tensor`` (counts in a tensor the
    capture computed from constants, written as the list): the counts must be numbers when the
    model is exported, since the shape of the result depends on them. ``output_size`` is a hint
    of their sum, which the catalog computes."""
    x = call.tensor()
    repeats = call["repeats"]
    counts: Any
    if isinstance(repeats, Sym):
        counts = as_size(call, repeats)
    elif isinstance(repeats, ConstTensor) and repeats.tensor.dim() <= 1:
        counts = [int(count) for count in repeats.tensor.reshape(-1).tolist()]
    elif is_runtime(repeats):
        raise call.missing(
            "takes its repeats from a tensor known only at run time (or held as the model's state), which the "
            "catalog cannot record: the shape of the result would depend on its values; pass the counts as an "
            "int, or compute them from constants"
        )
    else:
        counts = int(repeats)
    return Emit("repeat_interleave", {"x": x}, {"repeats": counts, "dim": call.constant("dim")})


def _contiguous(call: _Node) -> Mapped:
    """Nothing where ``x`` already was contiguous at capture; else a ``contiguous`` node, so that
    the ops after it see the layout they saw in the model (their float results depend on it)."""
    x = call.tensor()
    value = call.val()
    if isinstance(value, torch.Tensor) and not value.is_contiguous():
        return Emit("contiguous", {"x": x})
    return Alias(x)


def _einsum(call: _Node) -> Mapped:
    tensors = call["tensors"]
    if not isinstance(tensors, (list, tuple)) or not tensors or not all(is_runtime(t) for t in tensors):
        raise call.missing("takes a list that is not all tensors")
    ports = {f"x{k}": tensor for k, tensor in enumerate(tensors)}
    return Emit("einsum", ports, {"equation": call.constant("equation")})


def _swap(first: str, second: str) -> Handler:
    def handle(call: _Node) -> Mapped:
        return Emit("transpose", {"x": call.tensor()}, {"dim0": call.constant(first), "dim1": call.constant(second)})

    return handle


# --- Reductions -----------------------------------------------------------------------------


def _min_dim(call: _Node) -> Mapped:
    x = call.tensor()
    dim, keepdim = call.constant("dim"), bool(call.constant("keepdim"))
    return Several(
        (
            Emit("min", {"x": x}, {"dim": dim, "keepdim": keepdim}),
            Emit("argmin", {"x": x}, {"dim": dim, "keepdim": keepdim}),
        )
    )


def _argmin(call: _Node) -> Mapped:
    return Emit(
        "argmin", {"x": call.tensor()}, {"dim": call.constant("dim"), "keepdim": bool(call.constant("keepdim"))}
    )


def _prod(call: _Node) -> Mapped:
    x = call.tensor()
    _natural_dtype(call, "prod")
    dim = call.constant("dim") if "dim" in call.arguments else None
    keepdim = bool(call.constant("keepdim")) if "keepdim" in call.arguments else False
    return Emit("prod", {"x": x}, {"dim": dim, "keepdim": keepdim})


def _variance(op: str) -> Handler:
    """``var``/``std`` in their three overloads: ``correction`` (null: 1), ``dim`` with
    ``unbiased``, and ``default`` with ``unbiased``."""

    def handle(call: _Node) -> Mapped:
        x = call.tensor()
        if "correction" in call.arguments:
            correction = call.constant("correction")
            correction = 1 if correction is None else correction
        else:
            unbiased = call.constant("unbiased")
            correction = 0 if unbiased is False else 1
        dims = call.constant("dim") if "dim" in call.arguments else None
        if isinstance(dims, list) and not dims:
            dims = None
        keepdim = bool(call.constant("keepdim")) if "keepdim" in call.arguments else False
        return Emit(op, {"x": x}, {"dim": dims, "correction": correction, "keepdim": keepdim})

    return handle


def _vector_norm(call: _Node) -> Mapped:
    """``torch.linalg.vector_norm`` (``F.normalize``'s norm); an infinite order as a string."""
    if call.arguments.get("dtype") is not None:
        raise call.missing("with dtype= (a cast before the norm) has no catalog op for it yet")
    order = call.constant("ord")
    if isinstance(order, float) and math.isinf(order):
        order = "inf" if order > 0 else "-inf"
    dims = call.constant("dim")
    if isinstance(dims, list) and not dims:
        dims = None
    return Emit(
        "linalg_vector_norm",
        {"x": call.tensor()},
        {"ord": order, "dim": dims, "keepdim": bool(call.constant("keepdim"))},
    )


def _logsumexp(call: _Node) -> Mapped:
    dims = call.constant("dim")
    if isinstance(dims, list) and not dims:
        raise call.missing("with an empty dim list has no catalog op for it yet")
    return Emit("logsumexp", {"x": call.tensor()}, {"dim": dims, "keepdim": bool(call.constant("keepdim"))})


# --- Selection ------------------------------------------------------------------------------


def _topk(call: _Node) -> Mapped:
    """``topk``: values and indices, one node of two outputs. ``sorted=False`` is written as the
    sorted op (torch leaves that order unspecified; the sorted one is one of those)."""
    slots = {"k": call.constant("k"), "dim": call.constant("dim"), "largest": bool(call.constant("largest"))}
    return Emit("topk", {"x": call.tensor()}, slots, outputs=("values", "indices"))


# --- Creation -------------------------------------------------------------------------------


def _explicit_dtype(call: _Node) -> str | None:
    dtype = call.arguments.get("dtype")
    return None if dtype is None else _dtype_name(call, dtype)


def _number(call: _Node, name: str) -> Any:
    value = call.arguments.get(name)
    if isinstance(value, Sym):
        return as_size(call, value)
    if is_runtime(value):
        raise call.missing(f"takes a tensor as {name}")
    return value


def _arange(call: _Node) -> Mapped:
    start = _number(call, "start") if "start" in call.arguments else 0
    end = _number(call, "end")
    step = _number(call, "step") if "step" in call.arguments else 1
    slots = {"start": start, "end": end, "step": step, "dtype": _explicit_dtype(call)}
    return Emit("arange", {}, slots)


def _full(call: _Node) -> Mapped:
    size = _static_sizes(call, call["size"])
    return Emit("full", {}, {"size": size, "fill_value": _number(call, "fill_value"), "dtype": _explicit_dtype(call)})


def _constant_fill(op: str) -> Handler:
    def handle(call: _Node) -> Mapped:
        return Emit(op, {}, {"size": _static_sizes(call, call["size"]), "dtype": _explicit_dtype(call)})

    return handle


def _like(op: str) -> Handler:
    def handle(call: _Node) -> Mapped:
        slots: dict[str, Any] = {"dtype": _explicit_dtype(call)}
        if op == "full_like":
            slots["fill_value"] = _number(call, "fill_value")
        return Emit(op, {"x": call.tensor()}, slots)

    return handle


def _zero_(call: _Node) -> Mapped:
    """``x.zero_()``'s value: zeros like ``x`` (the write itself is the capture's business)."""
    return Emit("zeros_like", {"x": call.tensor()}, {"dtype": None})


def _fill_(call: _Node) -> Mapped:
    """``x.fill_(value)``'s value: ``value`` everywhere, in ``x``'s dtype."""
    return Emit("full_like", {"x": call.tensor()}, {"fill_value": _number(call, "value"), "dtype": None})


def _new(op: str) -> Handler:
    """``x.new_ones(size)`` and kin: a created tensor of the dtype of ``x`` (or the one asked),
    whose value does not depend on ``x``'s."""

    def handle(call: _Node) -> Mapped:
        call.tensor()
        dtype = call.arguments.get("dtype")
        if dtype is None:
            source = call.val()
            if not isinstance(source, torch.Tensor):
                raise call.missing("reads an input whose dtype the capture does not know")
            dtype = source.dtype
        slots: dict[str, Any] = {"size": _static_sizes(call, call["size"])}
        if op == "full":
            slots["fill_value"] = _number(call, "fill_value")
        slots["dtype"] = _dtype_name(call, dtype)
        return Emit(op, {}, slots)

    return handle


def register(each: Register) -> None:
    """Add this family's handlers: ``each(aten.packet, handler, *overloads)``."""
    each(aten.expand, _expand, "default")
    each(aten.expand_as, _expand_as, "default")
    each(aten.gather, _indexed("gather"), "default")
    each(aten.index_select, _indexed("index_select"), "default")
    each(aten.cumsum, _scan("cumsum"), "default")
    each(aten.cumprod, _scan("cumprod"), "default")
    each(aten.triu, _triangle("triu"), "default")
    each(aten.tril, _triangle("tril"), "default")
    each(aten.roll, _roll, "default")
    each(aten.flip, _listed("flip", "dims", "dims"), "default")
    each(aten.repeat, _listed("repeat", "repeats", "repeats"), "default")
    each(aten.tile, _listed("tile", "dims", "dims"), "default")
    each(aten.repeat_interleave, _repeat_interleave, "self_int", "self_Tensor")
    each(aten.einsum, _einsum, "default")
    each(aten.contiguous, _contiguous, "default")
    each(aten.swapaxes, _swap("axis0", "axis1"), "default")
    each(aten.swapdims, _swap("dim0", "dim1"), "default")
    each(aten.amin, _reduction("min"), "default")
    each(aten.min, _reduction("min", None), "default")
    each(aten.min, _min_dim, "dim")
    each(aten.argmin, _argmin, "default")
    each(aten.prod, _prod, "default", "dim_int")
    for op in ("var", "std"):
        each(getattr(aten, op), _variance(op), "default", "dim", "correction")
    for op in ("any", "all"):
        packet = getattr(aten, op)
        each(packet, _reduction(op, None), "default")
        each(packet, _reduction(op), "dim", "dims")
    each(aten.logsumexp, _logsumexp, "default")
    each(aten.linalg_vector_norm, _vector_norm, "default")
    each(aten.topk, _topk, "default")
    each(aten.arange, _arange, "default", "start", "start_step")
    each(aten.full, _full, "default")
    each(aten.zeros, _constant_fill("zeros"), "default")
    each(aten.ones, _constant_fill("ones"), "default")
    for op in ("full_like", "zeros_like", "ones_like"):
        each(getattr(aten, op), _like(op), "default")
    each(aten.zero_, _zero_, "default")
    each(aten.fill_, _fill_, "Scalar")
    each(aten.new_ones, _new("ones"), "default")
    each(aten.new_zeros, _new("zeros"), "default")
    each(aten.new_full, _new("full"), "default")
