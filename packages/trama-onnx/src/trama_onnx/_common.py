"""What several op families' lowerings share: operands, torch's type promotion, float compute.

The catalog's rules (``docs/ops.md``, "Broadcasting and dtypes", "Half precision") decide dtypes
here, before onnxruntime sees anything: a result dtype is torch's promotion of the operands (a
Python number promotes more weakly than a tensor, a 0-d tensor more weakly than one with
dimensions), and float16 and bfloat16 are computed in float32 and rounded once. onnxruntime's CPU
kernels take few dtypes for arithmetic, so every op computes in a dtype they take (:func:`compute_dtype`)
and casts its result back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from trama.format import SizeExpr, Tensor, numpy_dtype
from trama_onnx.lowering import Emitter, LoweringError

__all__ = [
    "Operand",
    "axis",
    "batched",
    "compute_dtype",
    "float_unary",
    "is_float",
    "is_integral",
    "operand",
    "promoted",
    "to_dtype",
]

FLOATS = ("float16", "float32", "float64", "bfloat16")


def is_float(dtype: str | None) -> bool:
    return dtype in FLOATS


def is_integral(dtype: str | None) -> bool:
    """bool or an integer dtype."""
    return dtype is not None and not is_float(dtype)


def compute_dtype(dtype: str) -> str:
    """The dtype onnxruntime's arithmetic kernels compute ``dtype`` in: float32 for the 16-bit
    floats (the catalog's rule), int32 for the narrow integers and bool (the result is cast back,
    keeping the low bits, as torch's integer arithmetic wraps), the dtype itself otherwise."""
    if dtype in ("float16", "bfloat16"):
        return "float32"
    if dtype in ("int8", "int16", "uint8", "bool"):
        return "int32"
    return dtype


@dataclass(frozen=True, slots=True)
class Operand:
    """One operand of an elementwise op: a wired value, a tensor slot, or a Python number."""

    value: str | None  # the ONNX value (None: a Python number, in ``number``)
    dtype: str
    rank: int
    number: bool | int | float | None = None
    python: type | None = None

    def promotion_key(self) -> Any:
        """What :func:`trama.catalog.result_type` reads: an array-like, or the Python number."""
        if self.python is not None:
            return self.python(self.number if self.number is not None else 0)
        return SimpleNamespace(dtype=numpy_dtype(self.dtype), ndim=self.rank)


def operand(g: Emitter, inputs: Mapping[str, str], name: str) -> Operand:
    """The operand ``name``: its input port when wired, else the slot of that name."""
    if name in inputs:
        info = g.input_info(name)
        if info.dtype is None:
            raise LoweringError(f"{g.node.op}: input {name!r} holds no tensor")
        python = g.python_scalar(name)
        return Operand(inputs[name], info.dtype, info.rank, None, python)
    if g.has_tensor(name):
        info = g.tensor_info(name)
        assert info.dtype is not None
        return Operand(g.tensor(name), info.dtype, info.rank)
    written = g.node_parameters.get(name)
    if written is not None and isinstance(written.value, SizeExpr):
        # A size read from the inputs used as a number (``x * seq``): computed in the graph as a
        # 0-d int64, promoting as the Python int it is in the model.
        size = g.op1("Reshape", [g.size(written.value), g.const(np.asarray([], np.int64))])
        return Operand(size, "int64", 0, None, int)
    value = g.setting(name)
    if isinstance(value, bool):
        return Operand(None, "bool", 0, value, bool)
    if isinstance(value, int):
        return Operand(None, "int64", 0, value, int)
    if isinstance(value, float):
        return Operand(None, "float32", 0, value, float)
    raise LoweringError(f"{g.node.op}: operand {name!r} is neither wired nor a tensor or number ({value!r})")


def promoted(*operands: Operand) -> str:
    """torch's result dtype of the operands (:func:`trama.catalog.result_type`)."""
    from trama.catalog import result_type
    from trama.format import dtype_name

    return dtype_name(result_type(*(each.promotion_key() for each in operands)))


def to_dtype(g: Emitter, each: Operand, dtype: str) -> str:
    """The operand as a value of ``dtype``: a Python number becomes a 0-d constant, a tensor is cast."""
    if each.value is None:
        with np.errstate(all="ignore"):
            number = np.asarray(each.number).astype(numpy_dtype(dtype))
        return g.const(number)
    return g.cast(each.value, dtype, each.dtype)


def float_unary(g: Emitter, x: str, dtype: str, body: Callable[[str, str], str]) -> tuple[str, str]:
    """An elementwise float function of ``x``: an integer or bool ``x`` gives float32 (torch's
    default float dtype), a float one its own dtype, computed in float32 for the 16-bit floats.
    ``body(value, compute_dtype)`` adds the computation; returns the result and its dtype."""
    result = dtype if is_float(dtype) else "float32"
    work = compute_dtype(result)
    value = body(g.cast(x, work, dtype), work)
    return g.cast(value, result, work), result


def same_dtype_unary(g: Emitter, x: str, dtype: str, body: Callable[[str, str], str]) -> str:
    """An elementwise function that keeps ``x``'s dtype, computed where onnxruntime computes it."""
    work = compute_dtype(dtype)
    return g.cast(body(g.cast(x, work, dtype), work), dtype, work)


def axis(value: int, rank: int, *, where: str = "dim") -> int:
    """A dimension counted from the front (negative ones count from the end)."""
    size = max(rank, 1)
    if not -size <= value < size:
        raise LoweringError(f"{where} {value} is out of range for {rank} dimensions")
    return value + size if value < 0 else value


def batched(g: Emitter, x: str, rank: int, spatial: int) -> tuple[str, bool]:
    """``x`` with a batch dimension: an unbatched ``[C, *S]`` gets one (and the result loses it again
    through :func:`unbatched`)."""
    if rank == spatial + 2:
        return x, False
    if rank == spatial + 1:
        return g.op1("Unsqueeze", [x, g.const(np.asarray([0], np.int64))]), True
    raise LoweringError(f"{g.node.op}: x has {rank} dimensions, expected {spatial + 1} or {spatial + 2}")


def unbatched(g: Emitter, y: str, added: bool) -> str:
    return g.op1("Squeeze", [y, g.const(np.asarray([0], np.int64))]) if added else y


def const_like(g: Emitter, value: Any, dtype: str) -> str:
    """A 0-d constant of ``dtype``."""
    return g.const(np.asarray(value).astype(numpy_dtype(dtype)))


def tensor_or_none(g: Emitter, slot: str) -> str | None:
    """A tensor slot's value, ``None`` where the slot is absent or null."""
    return g.tensor(slot) if g.has_tensor(slot) else None


def slot_tensor(parameters: Mapping[str, Any], slot: str) -> Tensor | None:
    entry = parameters.get(slot)
    return entry.value if entry is not None and isinstance(entry.value, Tensor) else None


def circular_pad(g: Emitter, x: str, pads: Sequence[tuple[int, int]], axes: Sequence[int]) -> str:
    """``x`` padded circularly: along each of ``axes``, its last ``before`` elements put in front
    and its first ``after`` behind (the padding conv modules and ``pad`` share)."""
    for (before, after), where in zip(pads, axes, strict=True):
        parts = []
        if before:
            parts.append(_slice(g, x, -before, None, where))
        parts.append(x)
        if after:
            parts.append(_slice(g, x, 0, after, where))
        x = parts[0] if len(parts) == 1 else g.op1("Concat", parts, {"axis": where})
    return x


def _slice(g: Emitter, x: str, start: int, stop: int | None, where: int) -> str:
    end = np.iinfo(np.int64).max if stop is None else stop
    starts, ends, axes = (g.const(np.asarray([value], np.int64)) for value in (start, end, where))
    return g.op1("Slice", [x, starts, ends, axes])
