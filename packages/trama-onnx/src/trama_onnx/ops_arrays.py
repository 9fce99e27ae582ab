"""Lowerings of the tensor functions that move, join, reduce, index and create: ``reshape``,
``flatten``, ``transpose``, ``permute``, ``unsqueeze``, ``squeeze``, ``concat``, ``mean``,
``sum``, ``constant``, ``getitem``, ``expand``, ``arange``, ``contiguous``, ``gather``,
``index_select``, ``cumsum``, ``cumprod``, ``triu``, ``tril``, ``roll``, ``flip``,
``slice_scatter``, ``repeat``, ``tile``, ``repeat_interleave``, ``einsum`` and the created tensors
(``full``, ``zeros``, ``ones`` and their ``_like`` forms). The other reductions are in
:mod:`trama_onnx.ops_reductions`.

Sizes that depend on the inputs (``reshape``'s ``shape``, ``expand``'s ``size``, ``arange``'s
bounds) are computed in the graph from the inputs' shapes (:meth:`Emitter.int64s`); shapes this
module derives (``flatten``, ``squeeze``) are read with ``Shape`` and computed, so that one
lowered graph serves every size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trama.format import Node, Parameter, SizeExpr, Tensor, numpy_dtype
from trama.format._sizes import has_sizes
from trama_onnx._common import Operand, axis, compute_dtype, is_float, is_integral, promoted
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, ValueInfo, catalog_settings

__all__ = ["flattened"]

_INT64_MAX = np.iinfo(np.int64).max


def _ints(g: Emitter, values: Sequence[int]) -> str:
    return g.const(np.asarray(list(values), np.int64))


# --- shapes -----------------------------------------------------------------------------------


@lowers("reshape")
def reshape(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Reshape`` with ``allowzero``: a 0 is a size of 0, as in torch, not "keep this dimension"."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": g.op1("Reshape", [inputs["x"], g.int64s("shape")], {"allowzero": 1})}

    return Lowering(node, parameters, emit)


def flattened(g: Emitter, x: str, rank: int, start_dim: int, end_dim: int) -> str:
    """``x`` with dimensions ``start_dim`` … ``end_dim`` merged; a 0-d ``x`` becomes ``[1]``."""
    if rank == 0:
        return g.op1("Reshape", [x, _ints(g, [1])])
    start, end = axis(start_dim, rank, where="start_dim"), axis(end_dim, rank, where="end_dim")
    if start > end:
        raise LoweringError(f"start_dim {start_dim} comes after end_dim {end_dim}")
    if start == end:
        return g.op1("Identity", [x])
    parts = []
    if start > 0:
        parts.append(g.shape(x, 0, start))
    parts.append(g.op1("ReduceProd", [g.shape(x, start, end + 1)], {"keepdims": 1}))
    if end + 1 < rank:
        parts.append(g.shape(x, end + 1))
    shape = parts[0] if len(parts) == 1 else g.op1("Concat", parts, {"axis": 0})
    return g.op1("Reshape", [x, shape], {"allowzero": 1})


@lowers("flatten")
def flatten(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    settings = catalog_settings(node, parameters)
    start, end = settings.integer("start_dim"), settings.integer("end_dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": flattened(g, inputs["x"], g.input_info("x").rank, start, end)}

    return Lowering(node, parameters, emit)


@lowers("transpose")
def transpose(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    settings = catalog_settings(node, parameters)
    first, second = settings.integer("dim0"), settings.integer("dim1")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        rank = g.input_info("x").rank
        a, b = axis(first, rank, where="dim0"), axis(second, rank, where="dim1")
        if rank == 0 or a == b:
            return {"y": g.op1("Identity", [inputs["x"]])}
        perm = list(range(rank))
        perm[a], perm[b] = perm[b], perm[a]
        return {"y": g.op1("Transpose", [inputs["x"]], {"perm": perm})}

    return Lowering(node, parameters, emit)


@lowers("permute")
def permute(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    dims = catalog_settings(node, parameters).integers("dims")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        rank = g.input_info("x").rank
        perm = [axis(d, rank) for d in dims]
        if rank == 0 or perm == list(range(rank)):
            return {"y": g.op1("Identity", [inputs["x"]])}
        return {"y": g.op1("Transpose", [inputs["x"]], {"perm": perm})}

    return Lowering(node, parameters, emit)


@lowers("unsqueeze")
def unsqueeze(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    dim = catalog_settings(node, parameters).integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        rank = g.input_info("x").rank
        where = axis(dim, rank + 1)
        return {"y": g.op1("Unsqueeze", [inputs["x"], _ints(g, [where])])}

    return Lowering(node, parameters, emit)


@lowers("squeeze")
def squeeze(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Every dimension of size 1 (``dim`` null), or those ``dim`` names that have size 1: decided
    on the shape at run time, so that one graph serves every size."""
    dims = catalog_settings(node, parameters)["dim"]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x = inputs["x"]
        rank = g.input_info("x").rank
        if rank == 0:
            return {"y": g.op1("Identity", [x])}
        if dims is None:
            return {"y": g.op1("Squeeze", [x])}
        named = {axis(d, rank) for d in dims}
        shape = g.shape(x)
        ones = g.op1("Equal", [shape, _ints(g, [1])])
        chosen = g.const(np.asarray([d in named for d in range(rank)]))
        keep = g.op1("Not", [g.op1("And", [ones, chosen])])
        kept = g.op1("Compress", [shape, keep], {"axis": 0})
        return {"y": g.op1("Reshape", [x, kept], {"allowzero": 1})}

    return Lowering(node, parameters, emit)


@lowers("contiguous")
def contiguous(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": g.op1("Identity", [inputs["x"]])}

    return Lowering(node, parameters, emit)


# --- joining and reducing ---------------------------------------------------------------------


@lowers("concat")
def concat(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The inputs ``x0``, ``x1``, … in numeric order, promoted to one dtype, joined along ``dim``."""
    dim = catalog_settings(node, parameters).integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        ports = sorted((port for port in inputs if port[1:].isdigit()), key=lambda port: int(port[1:]))
        operands = []
        for port in ports:
            info = g.input_info(port)
            operands.append(Operand(inputs[port], info.dtype or "float32", info.rank))
        result = promoted(*operands)
        rank = operands[0].rank
        values = [g.cast(each.value or "", result, each.dtype) for each in operands]
        if len(values) == 1:
            return {"y": g.op1("Identity", values)}
        return {"y": g.op1("Concat", values, {"axis": axis(dim, rank)})}

    return Lowering(node, parameters, emit)


def _reduction(node: Node, parameters: Mapping[str, Parameter], kind: str) -> Lowering:
    settings = catalog_settings(node, parameters)
    dims = settings["dim"]
    keepdim = settings.flag("keepdim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        x = inputs["x"]
        if kind == "ReduceSum" and is_integral(dtype):
            result = work = "int64"  # bools and integers are summed as int64
        elif not is_float(dtype):
            raise LoweringError(f"{node.op} takes a floating x, got {dtype}")
        else:
            result, work = dtype, compute_dtype(dtype)
        x = g.cast(x, work, dtype)
        if info.rank == 0:
            if dims is not None:
                for d in dims:
                    axis(d, 0)
            return {"y": g.cast(g.op1("Identity", [x]), result, work)}
        attributes = {"keepdims": int(keepdim)}
        if dims is None:
            y = g.op1(kind, [x], attributes)
        else:
            y = g.op1(kind, [x, _ints(g, sorted(axis(d, info.rank) for d in dims))], attributes)
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


@lowers("mean")
def mean(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _reduction(node, parameters, "ReduceMean")


@lowers("sum")
def total(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _reduction(node, parameters, "ReduceSum")


# --- constants and creation -------------------------------------------------------------------


@lowers("constant")
def constant(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """A tensor is its entry's initializer (a function's input, inside one); a Python number or bool
    a 0-d constant (int64, float32, bool), a list of numbers a constant tensor. A string or null has
    no ONNX value: the node gives none, and a model output it feeds is returned as it is."""
    catalog_settings(node, parameters)
    value = parameters["value"].value

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        if isinstance(value, Tensor):
            return {"y": g.op1("Identity", [g.tensor("value")])}
        if isinstance(value, (bool, int, float)):
            return {"y": g.const(value)}
        if isinstance(value, list):
            array = np.asarray(value)
            if array.dtype.kind in "biuf":
                return {"y": g.const(value)}
        return {}

    return Lowering(node, parameters, emit)


@lowers("arange")
def arange(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """A constant where the bounds are numbers (the catalog's values, computed in float64 and rounded
    once); ``Range`` over int64 where a bound is a size computed from the inputs."""
    from trama.catalog._arrays_checks import arange_values

    settings = catalog_settings(node, parameters)
    result = settings.text("result_dtype")
    sized = any(isinstance(entry.value, SizeExpr) for entry in parameters.values())

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        if not sized:
            return {"y": g.const(arange_values(settings["start"], settings["end"], settings["step"], result))}
        bounds = []
        for slot, default in (("start", 0), ("end", None), ("step", 1)):
            entry = parameters.get(slot)
            if entry is None:
                bounds.append(g.const(np.asarray(default, np.int64)))
            elif isinstance(entry.value, float):
                raise LoweringError("arange with a size among its bounds takes integer bounds")
            else:
                bounds.append(g.int64s(slot))
        y = g.op1("Range", bounds)
        return {"y": g.cast(y, result, "int64")}

    return Lowering(node, parameters, emit)


@lowers("expand")
def expand(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Expand`` to ``size``, each −1 replaced by the size of ``x`` there (read from its shape)."""
    catalog_settings(node, parameters)
    size = parameters["size"].value
    assert isinstance(size, list)
    keeps = any(isinstance(item, int) and item == -1 for item in size)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x = inputs["x"]
        rank = g.input_info("x").rank
        target = g.int64s("size")
        if keeps:
            shape = g.shape(x)
            lead = len(size) - rank
            if lead > 0:
                shape = g.op1("Concat", [_ints(g, [1] * lead), shape], {"axis": 0})
            target = g.op1("Where", [g.op1("Equal", [target, _ints(g, [-1])]), shape, target])
        return {"y": g.op1("Expand", [x, target])}

    return Lowering(node, parameters, emit)


# --- indexing ---------------------------------------------------------------------------------


@lowers("getitem")
def getitem(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """torch's indexing in two steps, as :func:`trama.catalog.torch_index` splits it: a basic one
    (``Slice`` for the slices, ``Gather`` for the integers, which remove their dimensions first,
    ``Unsqueeze`` for ``None``), then the tensor items on what is left: one integer tensor is a
    ``Gather``; several, or a bool mask (``NonZero``), broadcast together and ``GatherND`` on the
    indexed dimensions moved to the front, the result's dimensions put back in place where the
    tensor items were adjacent."""
    items: tuple[Any, ...] = catalog_settings(node, parameters)["index"]
    # The index as written: a slice bound that is a size read from the inputs is a number in
    # ``items`` (the catalog checked it at the shape pass's sizes), computed in the graph here.
    written = parameters["index"].value
    raw = list(written) if isinstance(written, list) and len(written) == len(items) else [None] * len(items)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": _index(g, inputs, items, raw)}

    return Lowering(node, parameters, emit)


def _width(g: Emitter, item: Any) -> int:
    if isinstance(item, str):
        info = g.input_info(item)
        return info.rank if info.dtype == "bool" else 1
    return 1 if isinstance(item, (int, slice)) else 0


def _index(g: Emitter, inputs: Mapping[str, str], items: Sequence[Any], raw: Sequence[Any]) -> str:
    for item in items:
        if isinstance(item, str) and item not in inputs:
            raise LoweringError(f"the index port {item!r} is not wired")
        if isinstance(item, (SizeExpr, list)):
            raise LoweringError(f"index item {item!r} is not lowered")
    x = inputs["x"]
    rank = g.input_info("x").rank
    consumed = sum(_width(g, item) for item in items)
    if consumed > rank:
        raise LoweringError(f"too many indices for a tensor of {rank} dimensions")
    at = next((k for k, item in enumerate(items) if item is Ellipsis), len(items))
    expanded = [*items[:at], *[slice(None)] * (rank - consumed), *items[at + 1 :]]
    written = [*raw[:at], *[None] * (rank - consumed), *raw[at + 1 :]]
    sized: dict[int, list[Any]] = {}  # a slice's dimension -> its bounds as written, where one is a size
    slices: list[tuple[int, slice]] = []
    gathers: list[tuple[int, str]] = []
    news: list[int] = []
    advanced: dict[int, tuple[str, ValueInfo, bool]] = {}  # position -> (value, info, a 0-d bool)
    position = dim = 0
    for item, as_written in zip(expanded, written, strict=True):
        if isinstance(item, str):
            info = g.input_info(item)
            if info.dtype == "bool" and info.rank == 0:
                news.append(position)
                advanced[position] = (inputs[item], info, True)
                position += 1
            elif info.rank == 0:
                gathers.append((dim, inputs[item]))
                dim += 1
            else:
                width = info.rank if info.dtype == "bool" else 1
                advanced[position] = (inputs[item], info, False)
                position += width
                dim += width
        elif item is None:
            news.append(position)
            position += 1
        elif isinstance(item, bool):
            raise LoweringError(f"index item {item!r} is not lowered")
        elif isinstance(item, int):
            gathers.append((dim, g.const(np.asarray(item, np.int64))))
            dim += 1
        else:
            if isinstance(as_written, list) and any(isinstance(bound, SizeExpr) for bound in as_written):
                slices.append((dim, item))
                sized[dim] = list(as_written)
            elif item != slice(None) and item != slice(None, None, 1):
                slices.append((dim, item))
            position += 1
            dim += 1
    position += rank - dim
    if slices:
        starts = [0 if part.start is None else part.start for _, part in slices]
        stops = [_INT64_MAX if part.stop is None else part.stop for _, part in slices]
        steps = [1 if part.step is None else part.step for _, part in slices]
        if any(step <= 0 for step in steps):
            raise LoweringError("a slice's step must be positive")
        axes = [where for where, _ in slices]
        if sized:
            bounds = [
                _bounds(g, [sized.get(where, [None] * 3)[k] for where, _ in slices], values)
                for k, values in enumerate((starts, stops, steps))
            ]
            x = g.op1("Slice", [x, bounds[0], bounds[1], _ints(g, axes), bounds[2]])
        else:
            x = g.op1("Slice", [x, _ints(g, starts), _ints(g, stops), _ints(g, axes), _ints(g, steps)])
    for where, index in sorted(gathers, key=lambda pair: -pair[0]):
        x = g.op1("Gather", [x, index], {"axis": where})
    if news:
        x = g.op1("Unsqueeze", [x, _ints(g, sorted(news))])
    if advanced:
        x = _advanced(g, x, position, advanced)
    elif not (slices or gathers or news):
        x = g.op1("Identity", [x])
    return x


def _bounds(g: Emitter, written: Sequence[Any], numbers: Sequence[int]) -> str:
    """One of a ``Slice``'s bound lists: a constant, or, where a bound is a size read from the
    inputs, the sizes computed in the graph and the numbers joined into one int64 vector."""
    if not any(isinstance(bound, SizeExpr) for bound in written):
        return _ints(g, list(numbers))
    parts = [
        g.size(bound) if isinstance(bound, SizeExpr) else _ints(g, [number])
        for bound, number in zip(written, numbers, strict=True)
    ]
    return parts[0] if len(parts) == 1 else g.op1("Concat", parts, {"axis": 0})


def _advanced(g: Emitter, x: str, rank: int, advanced: Mapping[int, tuple[str, ValueInfo, bool]]) -> str:
    """numpy's (and, with the integers gone, torch's) advanced indexing of ``x`` by the tensor items
    at their dimensions."""
    indexed: list[tuple[int, str, int]] = []  # (dimension, int64 index, its rank)
    for position in sorted(advanced):
        value, info, zero_d_bool = advanced[position]
        if zero_d_bool:  # a new dimension, indexed by [0] when true, by [] when false
            flat = g.op1("Reshape", [g.op1("NonZero", [g.op1("Unsqueeze", [value, _ints(g, [0])])]), _ints(g, [-1])])
            indexed.append((position, flat, 1))
        elif info.dtype == "bool":  # a mask: the positions of its true elements, one index per dimension
            found = g.op1("NonZero", [value])
            for k in range(info.rank):
                row = g.op1("Gather", [found, g.const(np.asarray(k, np.int64))], {"axis": 0})
                indexed.append((position + k, row, 1))
        else:
            index = g.cast(value, "int64", info.dtype)
            size = g.shape(x, position, position + 1)
            negative = g.op1("Less", [index, _ints(g, [0])])
            index = g.op1("Where", [negative, g.op1("Add", [index, size]), index])
            indexed.append((position, index, info.rank))
    if len(indexed) == 1:
        where, index, _ = indexed[0]
        return g.op1("Gather", [x, index], {"axis": where})
    dims = [where for where, _, _ in indexed]
    width = max(index_rank for _, _, index_rank in indexed)
    zero = g.const(np.asarray(0, np.int64))
    total = indexed[0][1]
    for _, index, _ in indexed[1:]:
        total = g.op1("Add", [total, index])
    shape = g.shape(g.op1("Mul", [total, zero]))
    last = _ints(g, [-1])
    stacked = [g.op1("Unsqueeze", [g.op1("Expand", [index, shape]), last]) for _, index, _ in indexed]
    indices = g.op1("Concat", stacked, {"axis": -1})
    rest = [d for d in range(rank) if d not in dims]
    moved = g.op1("Transpose", [x], {"perm": dims + rest}) if dims + rest != list(range(rank)) else x
    y = g.op1("GatherND", [moved, indices])
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    if adjacent and dims[0] > 0:
        before = dims[0]
        perm = (
            [width + k for k in range(before)]
            + list(range(width))
            + [width + before + k for k in range(len(rest) - before)]
        )
        y = g.op1("Transpose", [y], {"perm": perm})
    return y


# --- gathering, scans, triangles, moving --------------------------------------------------------


def _numbers(node: Node, parameters: Mapping[str, Parameter], *slots: str) -> None:
    """Refuse a size computed from the inputs in ``slots``, which the lowering bakes in as numbers."""
    for slot in slots:
        entry = parameters.get(slot)
        if entry is not None and has_sizes(entry.value):
            raise LoweringError(
                f"{node.op}: slot {slot!r} depends on the input sizes, which this lowering takes only as numbers",
                node_id=node.id,
            )


def _sized(g: Emitter, parameters: Mapping[str, Parameter], slot: str, default: int) -> str:
    """A setting that may be a size, as an int64 ``[1]`` (``default`` where absent or null)."""
    entry = parameters.get(slot)
    if entry is None or entry.value is None:
        return _ints(g, [default])
    return g.op1("Reshape", [g.int64s(slot), _ints(g, [1])])


def _scalar(g: Emitter, value: str) -> str:
    """A ``[1]`` (or 0-d) int64 value as a 0-d one."""
    return g.op1("Reshape", [value, g.const(np.zeros(0, np.int64))])


def _extent(g: Emitter, x: str, where: int) -> str:
    """The size of ``x`` along ``where``, a 0-d int64."""
    return _scalar(g, g.shape(x, where, where + 1))


@lowers("gather")
def gather(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``GatherElements`` on ``x`` cut to the index's sizes off ``dim`` (torch lets the index be
    smaller there)."""
    _numbers(node, parameters, "dim")
    dim = catalog_settings(node, parameters).integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x = inputs["x"]
        rank = g.input_info("x").rank
        where = axis(dim, rank)
        if rank == 0:
            return {"y": g.op1("Identity", [x])}
        index = g.cast(inputs["index"], "int64", g.input_info("index").dtype)
        others = [k for k in range(rank) if k != where]
        if others:
            ends = g.op1("Gather", [g.shape(index), _ints(g, others)], {"axis": 0})
            x = g.op1("Slice", [x, _ints(g, [0] * len(others)), ends, _ints(g, others)])
        return {"y": g.op1("GatherElements", [x, index], {"axis": where})}

    return Lowering(node, parameters, emit)


@lowers("index_select")
def index_select(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Gather`` along ``dim`` with the index made 1-D (a 0-d index acts as a 1-element one)."""
    _numbers(node, parameters, "dim")
    dim = catalog_settings(node, parameters).integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x = inputs["x"]
        rank = g.input_info("x").rank
        where = axis(dim, rank)
        if rank == 0:
            return {"y": g.op1("Identity", [x])}
        index = g.cast(inputs["index"], "int64", g.input_info("index").dtype)
        index = g.op1("Reshape", [index, _ints(g, [-1])])
        return {"y": g.op1("Gather", [x, index], {"axis": where})}

    return Lowering(node, parameters, emit)


def _scan_dtypes(dtype: str) -> tuple[str, str]:
    """A scan's result dtype and the dtype it is computed in: floats their own (16-bit ones in
    float32), bools and integers int64."""
    if is_float(dtype):
        return dtype, compute_dtype(dtype)
    return "int64", "int64"


@lowers("cumsum")
def cumsum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``CumSum`` along ``dim``; bools and integers as int64, 16-bit floats in float32."""
    _numbers(node, parameters, "dim")
    dim = catalog_settings(node, parameters).integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        result, work = _scan_dtypes(dtype)
        x = g.cast(inputs["x"], work, dtype)
        where = axis(dim, info.rank)
        if info.rank == 0:
            return {"y": g.cast(g.op1("Identity", [x]), result, work)}
        y = g.op1("CumSum", [x, g.const(np.asarray(where, np.int64))])
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


@lowers("cumprod")
def cumprod(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """ONNX has no running product: ``y[i] = Π_{j ≤ i} x[j]`` as a ``ReduceProd`` over a new
    dimension ``j`` of ``x`` with the elements ``j > i`` replaced by 1 (``n²`` elements along
    ``dim``, exact: the same products as a scan)."""
    _numbers(node, parameters, "dim")
    dim = catalog_settings(node, parameters).integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        result, work = _scan_dtypes(dtype)
        x = g.cast(inputs["x"], work, dtype)
        where = axis(dim, info.rank)
        if info.rank == 0:
            return {"y": g.cast(g.op1("Identity", [x]), result, work)}
        n = _extent(g, x, where)
        positions = g.op1("Range", [g.const(np.asarray(0, np.int64)), n, g.const(np.asarray(1, np.int64))])
        rows = g.op1("Unsqueeze", [positions, _ints(g, [1])])  # i
        keep = g.op1("LessOrEqual", [positions, rows])  # [i, j]: j <= i
        trailing = info.rank - where - 1
        if trailing:
            keep = g.op1("Unsqueeze", [keep, _ints(g, list(range(2, 2 + trailing)))])
        spread = g.op1("Unsqueeze", [x, _ints(g, [where])])  # [..., 1, j, ...]
        one = g.const(np.asarray(1).astype(numpy_dtype(work)))
        masked = g.op1("Where", [keep, spread, one])
        y = g.op1("ReduceProd", [masked, _ints(g, [where + 1])], {"keepdims": 0})
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


def _triangle(node: Node, parameters: Mapping[str, Parameter], upper: bool) -> Lowering:
    """``Trilu``: the elements with ``j − i ≥ diagonal`` (``triu``) or ``≤`` (``tril``) kept, the
    others 0. onnxruntime's ``Trilu`` takes bool, int32, int64, float16, float32 and float64: the
    other dtypes go through int32 or float32 and back (exactly)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        if info.rank < 2:
            raise LoweringError(f"{node.op}: x must have at least 2 dimensions, got {info.rank}")
        dtype = info.dtype or "float32"
        work = dtype
        if dtype not in ("bool", "int32", "int64", "float16", "float32", "float64"):
            work = "float32" if is_float(dtype) else "int32"
        x = g.cast(inputs["x"], work, dtype)
        diagonal = _scalar(g, _sized(g, parameters, "diagonal", 0))
        y = g.op1("Trilu", [x, diagonal], {"upper": int(upper)})
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("triu")
def triu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _triangle(node, parameters, upper=True)


@lowers("tril")
def tril(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _triangle(node, parameters, upper=False)


def _rolled(g: Emitter, x: str, where: int, shift: str) -> str:
    """``x`` rolled by ``shift`` along ``where``: ``Gather`` at ``(i − shift) mod n``."""
    n = _extent(g, x, where)
    positions = g.op1("Range", [g.const(np.asarray(0, np.int64)), n, g.const(np.asarray(1, np.int64))])
    moved = g.op1("Sub", [positions, shift])
    divisor = g.op1("Max", [n, g.const(np.asarray(1, np.int64))])  # n = 0 has no element to move
    index = g.op1("Mod", [moved, divisor], {"fmod": 0})
    return g.op1("Gather", [x, index], {"axis": where})


@lowers("roll")
def roll(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Each dimension rolled in turn; ``dims`` null rolls the flattened ``x``."""
    settings = catalog_settings(node, parameters)
    shifts, dims = settings.integers("shifts"), settings["dims"]
    _numbers(node, parameters, "dims")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x = inputs["x"]
        rank = g.input_info("x").rank
        amounts = g.op1("Reshape", [g.int64s("shifts"), _ints(g, [-1])])

        def shift(k: int) -> str:
            return _scalar(g, g.op1("Slice", [amounts, _ints(g, [k]), _ints(g, [k + 1])]))

        if dims is None:
            if len(shifts) != 1:
                raise LoweringError(f"roll with dims null takes one shift, got {list(shifts)}")
            flat = g.op1("Reshape", [x, _ints(g, [-1])])
            return {"y": g.op1("Reshape", [_rolled(g, flat, 0, shift(0)), g.shape(x)], {"allowzero": 1})}
        if rank == 0:
            raise LoweringError("a 0-d x has no dimension to roll (dims must be null)")
        if len(shifts) != len(dims):
            raise LoweringError(f"roll takes one shift per dim: shifts {list(shifts)}, dims {list(dims)}")
        y = x
        for k, d in enumerate(dims):
            y = _rolled(g, y, axis(d, rank), shift(k))
        return {"y": y if y != x else g.op1("Identity", [x])}

    return Lowering(node, parameters, emit)


@lowers("flip")
def flip(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Slice`` with step −1 along ``dims``."""
    _numbers(node, parameters, "dims")
    dims = catalog_settings(node, parameters).integers("dims")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x = inputs["x"]
        rank = g.input_info("x").rank
        axes = [axis(d, rank) for d in dims]
        if len(set(axes)) != len(axes):
            raise LoweringError(f"flip: dims {list(dims)} names a dimension twice")
        if rank == 0 or not axes:
            return {"y": g.op1("Identity", [x])}
        count = len(axes)
        starts, ends = _ints(g, [-1] * count), _ints(g, [np.iinfo(np.int64).min] * count)
        return {"y": g.op1("Slice", [x, starts, ends, _ints(g, axes), _ints(g, [-1] * count)])}

    return Lowering(node, parameters, emit)


@lowers("slice_scatter")
def slice_scatter(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``ScatterElements`` of ``src`` at the slice's positions along ``dim`` (``Slice`` of the
    positions ``0 … n − 1``, which clamps as Python does for a positive step)."""
    settings = catalog_settings(node, parameters)
    dim = settings["dim"]
    _numbers(node, parameters, "dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, src = inputs["x"], inputs["src"]
        info = g.input_info("x")
        if info.rank == 0:
            raise LoweringError(f"dim {dim} is out of range for x of 0 dimensions")
        if g.input_info("src").dtype != info.dtype:
            raise LoweringError("slice_scatter: src and x must have the same dtype")
        where = axis(dim, info.rank)
        n = _extent(g, x, where)
        positions = g.op1("Range", [g.const(np.asarray(0, np.int64)), n, g.const(np.asarray(1, np.int64))])
        first, last = _sized(g, parameters, "start", 0), _sized(g, parameters, "end", _INT64_MAX)
        step = _sized(g, parameters, "step", 1)
        chosen = g.op1("Slice", [positions, first, last, _ints(g, [0]), step])
        shape = [1] * info.rank
        shape[where] = -1
        index = g.op1("Expand", [g.op1("Reshape", [chosen, _ints(g, shape)]), g.shape(src)])
        return {"y": g.op1("ScatterElements", [x, index, src], {"axis": where})}

    return Lowering(node, parameters, emit)


def _tiled(g: Emitter, x: str, rank: int, repeats: str, count: int) -> str:
    """``x`` with leading size-1 dimensions up to ``count``, ``Tile``d by ``repeats``."""
    if count > rank:
        shape = g.op1("Concat", [_ints(g, [1] * (count - rank)), g.shape(x)], {"axis": 0})
        x = g.op1("Reshape", [x, shape], {"allowzero": 1})
    if count == 0:
        return g.op1("Identity", [x])
    return g.op1("Tile", [x, repeats])


@lowers("repeat")
def repeat(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Tensor.repeat``: ``Tile`` of ``x`` given leading dimensions up to the count of repeats."""
    count = len(catalog_settings(node, parameters).integers("repeats"))

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        rank = g.input_info("x").rank
        if count < rank:
            raise LoweringError(f"repeat: {count} repeats for x of {rank} dimensions")
        return {"y": _tiled(g, inputs["x"], rank, g.int64s("repeats"), count)}

    return Lowering(node, parameters, emit)


@lowers("tile")
def tile(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``torch.tile``: ``dims`` padded with leading 1s to the rank of ``x``, then as ``repeat``."""
    count = len(catalog_settings(node, parameters).integers("dims"))

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        rank = g.input_info("x").rank
        repeats = g.int64s("dims")
        if count < rank:
            repeats = g.op1("Concat", [_ints(g, [1] * (rank - count)), repeats], {"axis": 0})
        return {"y": _tiled(g, inputs["x"], rank, repeats, max(count, rank))}

    return Lowering(node, parameters, emit)


@lowers("repeat_interleave")
def repeat_interleave(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Gather`` along ``dim`` (of the flattened ``x`` where it is null) at each position repeated
    its count: ``⌊i / c⌋`` for one count ``c``, the positions listed once per count otherwise."""
    _numbers(node, parameters, "repeats", "dim")
    settings = catalog_settings(node, parameters)
    counts, dim = settings.integers("repeats"), settings.optional_integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x = inputs["x"]
        rank = g.input_info("x").rank
        if dim is None:
            x, where = g.op1("Reshape", [x, _ints(g, [-1])]), 0
        elif rank == 0:
            raise LoweringError(f"a 0-d x takes dim null only, got dim {dim}")
        else:
            where = axis(dim, rank)
        if len(counts) != 1:  # one count per slice (none for no slice)
            index = g.const(np.repeat(np.arange(len(counts), dtype=np.int64), np.asarray(counts, np.int64)))
        elif counts[0] == 0:
            index = g.const(np.zeros(0, np.int64))
        else:
            c = g.const(np.asarray(counts[0], np.int64))
            total = g.op1("Mul", [_extent(g, x, where), c])
            positions = g.op1("Range", [g.const(np.asarray(0, np.int64)), total, g.const(np.asarray(1, np.int64))])
            index = g.op1("Div", [positions, c])
        return {"y": g.op1("Gather", [x, index], {"axis": where})}

    return Lowering(node, parameters, emit)


@lowers("einsum")
def einsum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Einsum`` of the explicit equation (spaces removed); 16-bit floats in float32, rounded once."""
    equation = catalog_settings(node, parameters).text("equation").replace(" ", "")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        ports = sorted((port for port in inputs if port[1:].isdigit()), key=lambda port: int(port[1:]))
        dtypes = {g.input_info(port).dtype for port in ports}
        if len(dtypes) != 1:
            raise LoweringError(f"einsum: operands of dtypes {sorted(map(str, dtypes))} (one dtype is required)")
        (dtype,) = dtypes
        if dtype not in ("float16", "bfloat16", "float32", "float64", "int32", "int64"):
            raise LoweringError(f"einsum of {dtype} is not lowered (onnxruntime computes floats, int32 and int64)")
        work = compute_dtype(dtype)
        values = [g.cast(inputs[port], work, dtype) for port in ports]
        return {"y": g.cast(g.op1("Einsum", values, {"equation": equation}), dtype, work)}

    return Lowering(node, parameters, emit)


# --- creation -----------------------------------------------------------------------------------


def _fill_value(value: Any, dtype: str) -> np.ndarray:
    from trama.catalog._arrays_checks import filled

    return filled((), value, numpy_dtype(dtype))


def _full(node: Node, parameters: Mapping[str, Parameter], fill: Any) -> Lowering:
    """The fill value, converted as torch converts a Python number, ``Expand``ed to ``size``."""
    settings = catalog_settings(node, parameters)
    value = settings["fill_value"] if fill is None else fill
    dtype = settings.text("result_dtype")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": g.op1("Expand", [g.const(_fill_value(value, dtype)), g.int64s("size")])}

    return Lowering(node, parameters, emit)


@lowers("full")
def full(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _full(node, parameters, None)


@lowers("zeros")
def zeros(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _full(node, parameters, 0)


@lowers("ones")
def ones(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _full(node, parameters, 1)


def _like(node: Node, parameters: Mapping[str, Parameter], fill: Any) -> Lowering:
    """The fill value ``Expand``ed to the shape of ``x``, of ``dtype`` or that of ``x``."""
    settings = catalog_settings(node, parameters)
    value = settings["fill_value"] if fill is None else fill
    chosen = settings["result_dtype"]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = chosen or g.input_info("x").dtype or "float32"
        return {"y": g.op1("Expand", [g.const(_fill_value(value, dtype)), g.shape(inputs["x"])])}

    return Lowering(node, parameters, emit)


@lowers("full_like")
def full_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _like(node, parameters, None)


@lowers("zeros_like")
def zeros_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _like(node, parameters, 0)


@lowers("ones_like")
def ones_like(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    return _like(node, parameters, 1)
