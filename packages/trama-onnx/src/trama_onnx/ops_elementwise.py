"""Lowerings of arithmetic and elementwise math: ``add``, ``sub``, ``mul``, ``div``, ``pow``,
``matmul``, ``neg``, ``sqrt``, ``rsqrt``, ``exp``, the cast ``to``; the unary math ``abs``,
``log``, ``log1p``, ``expm1``, ``sin``, ``cos``, ``erf``, ``reciprocal``, ``floor``, ``ceil``,
``round``, ``sign``, ``square``; the comparisons ``eq`` … ``ge``; ``logical_*`` and
``bitwise_*``; and the selections ``where``, ``masked_fill``, ``clamp``, ``minimum``, ``maximum``.

Each operand comes from its port or from the slot of its name (a tensor, or a Python number); the
result dtype is torch's promotion (:func:`trama_onnx._common.promoted`), computed where onnxruntime
computes and cast back (:func:`trama_onnx._common.compute_dtype`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trama.format import Node, Parameter, numpy_dtype
from trama_onnx._common import (
    Operand,
    compute_dtype,
    const_like,
    float_unary,
    is_float,
    is_integral,
    operand,
    promoted,
    same_dtype_unary,
    to_dtype,
)
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, catalog_settings

__all__: list[str] = []

_ARITHMETIC = {"add": "Add", "sub": "Sub", "mul": "Mul"}


@lowers("add", "sub", "mul")
def arithmetic(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x + alpha · other``, ``x − alpha · other`` and ``x · other``; bools give bools (or, and)."""
    settings = catalog_settings(node, parameters)
    alpha = settings.get("alpha", 1)
    kind = _ARITHMETIC[node.op]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, other = operand(g, inputs, "x"), operand(g, inputs, "other")
        result = promoted(x, other)
        work = compute_dtype(result)
        a, b = to_dtype(g, x, work), to_dtype(g, other, work)
        if alpha != 1:
            b = g.op1("Mul", [b, const_like(g, alpha, work)])
        y = g.op1(kind, [a, b])
        if result == "bool":
            return {"y": g.cast(y, "bool")}  # a nonzero sum is true (or), a nonzero product too (and)
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


@lowers("div")
def div(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """True division (integers give float32), or rounded toward zero or −∞ (integers stay integers)."""
    settings = catalog_settings(node, parameters)
    mode = settings["rounding_mode"]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, other = operand(g, inputs, "x"), operand(g, inputs, "other")
        result = promoted(x, other)
        if mode is None and is_integral(result):
            result = "float32"
        work = compute_dtype(result)
        a, b = to_dtype(g, x, work), to_dtype(g, other, work)
        if mode is None:
            y = g.op1("Div", [a, b])
        elif not is_float(work):
            y = g.op1("Div", [a, b]) if mode == "trunc" else _floor_div_integers(g, a, b)
        elif mode == "trunc":
            quotient = g.op1("Div", [a, b])
            y = g.op1("Mul", [g.op1("Sign", [quotient]), g.op1("Floor", [g.op1("Abs", [quotient])])])
        else:
            y = _floor_div_floats(g, a, b, work)
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


def _floor_div_integers(g: Emitter, a: str, b: str) -> str:
    """Python's ``//``: ``(a − a mod b) / b`` is exact, the modulo taking the divisor's sign."""
    return g.op1("Div", [g.op1("Sub", [a, g.op1("Mod", [a, b], {"fmod": 0})]), b])


def _floor_div_floats(g: Emitter, a: str, b: str, dtype: str) -> str:
    """torch's floor division of floats (``div_floor_floating``): from the remainder, so that a
    quotient rounded up to a whole number is not floored past its value."""
    zero = const_like(g, 0, dtype)
    quotient = g.op1("Div", [a, b])
    remainder = g.op1("Mod", [a, b], {"fmod": 1})
    exact = g.op1("Div", [g.op1("Sub", [a, remainder]), b])
    signs_differ = g.op1("Xor", [g.op1("Less", [b, zero]), g.op1("Less", [remainder, zero])])
    adjust = g.op1("And", [g.op1("Not", [g.op1("Equal", [remainder, zero])]), signs_differ])
    exact = g.op1("Sub", [exact, g.cast(adjust, dtype, "bool")])
    floor = g.op1("Floor", [exact])
    up = g.op1("Greater", [g.op1("Sub", [exact, floor]), const_like(g, 0.5, dtype)])
    floor = g.op1("Add", [floor, g.cast(up, dtype, "bool")])
    signed_zero = g.op1("Mul", [quotient, zero])
    result = g.op1("Where", [g.op1("Equal", [exact, zero]), signed_zero, floor])
    return g.op1("Where", [g.op1("Equal", [b, zero]), quotient, result])


@lowers("pow")
def power(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x ** other``: floats in float32 or float64, integers in int64 (a negative integer power of
    an integer is 0 but for ±1, as torch has it)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, other = operand(g, inputs, "x"), operand(g, inputs, "other")
        result = promoted(x, other)
        if is_float(result):
            work = compute_dtype(result)
            y = g.op1("Pow", [to_dtype(g, x, work), to_dtype(g, other, work)])
            return {"y": g.cast(y, result, work)}
        if other.value is None and isinstance(other.number, int) and other.number < 0:
            raise LoweringError("integers to negative integer powers are not allowed (as in torch)")
        base, exponent = to_dtype(g, x, "int64"), to_dtype(g, other, "int64")
        zero, one = const_like(g, 0, "int64"), const_like(g, 1, "int64")
        negative = g.op1("Less", [exponent, zero])
        y = g.op1("Pow", [base, g.op1("Where", [negative, zero, exponent])])
        if other.value is not None:  # a negative power: 1 for base 1, ±1 for −1 by parity, else 0
            odd = g.op1(
                "Not", [g.op1("Equal", [g.op1("Mod", [exponent, const_like(g, 2, "int64")], {"fmod": 0}), zero])]
            )
            minus = g.op1("Where", [odd, const_like(g, -1, "int64"), one])
            reciprocal = g.op1(
                "Where",
                [
                    g.op1("Equal", [base, one]),
                    one,
                    g.op1("Where", [g.op1("Equal", [base, const_like(g, -1, "int64")]), minus, zero]),
                ],
            )
            y = g.op1("Where", [negative, reciprocal, y])
        return {"y": g.cast(y, result, "int64")}

    return Lowering(node, parameters, emit)


@lowers("matmul")
def matmul(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The matrix product (numpy's rules, which ONNX's ``MatMul`` has)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, other = operand(g, inputs, "x"), operand(g, inputs, "other")
        if x.rank == 0 or other.rank == 0:
            raise LoweringError("matmul takes no 0-d operand")
        result = promoted(x, other)
        work = compute_dtype(result)
        if work == "int32" and result == "bool":
            raise LoweringError("matmul of bools is not lowered")
        y = g.op1("MatMul", [to_dtype(g, x, work), to_dtype(g, other, work)])
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


@lowers("neg")
def neg(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = g.input_info("x").dtype or "float32"
        if dtype == "bool":
            raise LoweringError("neg of a bool tensor is refused, as torch refuses it")
        return {"y": same_dtype_unary(g, inputs["x"], dtype, lambda v, _: g.op1("Neg", [v]))}

    return Lowering(node, parameters, emit)


def _unary(op_type: str) -> Any:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
        def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
            dtype = g.input_info("x").dtype or "float32"
            if op_type == "Rsqrt":
                y, _ = float_unary(g, inputs["x"], dtype, lambda v, _: g.op1("Reciprocal", [g.op1("Sqrt", [v])]))
            else:
                y, _ = float_unary(g, inputs["x"], dtype, lambda v, _: g.op1(op_type, [v]))
            return {"y": y}

        return Lowering(node, parameters, emit)

    return factory


lowers("sqrt")(_unary("Sqrt"))
lowers("rsqrt")(_unary("Rsqrt"))
lowers("exp")(_unary("Exp"))


@lowers("to")
def to(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """A cast: floats to integers truncate, integers wrap, anything to bool is ``x ≠ 0``."""
    target = catalog_settings(node, parameters).text("dtype")
    numpy_dtype(target)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        source = g.input_info("x").dtype
        if source == target:
            return {"y": g.op1("Identity", [inputs["x"]])}
        return {"y": g.cast(inputs["x"], target, source)}

    return Lowering(node, parameters, emit)


# --- unary math ---------------------------------------------------------------------------------


def _converted(g: Emitter, each: Operand, result: str, work: str) -> str:
    """The operand converted to ``result`` as torch converts it (a Python integer wraps to a
    narrower integer type, a float number rounds to a 16-bit one), then widened to ``work``."""
    if each.value is None:
        with np.errstate(all="ignore"):
            number = np.asarray(each.number).astype(numpy_dtype(result)).astype(numpy_dtype(work))
        return g.const(number)
    return g.cast(g.cast(each.value, result, each.dtype), work, result)


def _x_dtype(g: Emitter) -> str:
    dtype = g.input_info("x").dtype
    if dtype is None:
        raise LoweringError(f"{g.node.op}: x holds no tensor", node_id=g.node_id)
    return dtype


def _refuse_bool(g: Emitter, dtype: str) -> None:
    if dtype == "bool":
        raise LoweringError(f"{g.node.op} of a bool tensor is refused, as torch refuses it", node_id=g.node_id)


@lowers("log", "sin", "cos", "reciprocal")
def transcendental(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """An ONNX function of the float value (integers and bools give float32)."""
    catalog_settings(node, parameters)
    kind = {"log": "Log", "sin": "Sin", "cos": "Cos", "reciprocal": "Reciprocal"}[node.op]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        y, _ = float_unary(g, inputs["x"], _x_dtype(g), lambda v, _: g.op1(kind, [v]))
        return {"y": y}

    return Lowering(node, parameters, emit)


@lowers("erf")
def erf(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Erf`` in float32 (onnxruntime has no float64 kernel of it: float64 is refused rather than
    computed in float32)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = _x_dtype(g)
        if dtype == "float64":
            raise LoweringError("erf of float64 is not lowered: onnxruntime computes Erf in float32 only")
        y, _ = float_unary(g, inputs["x"], dtype, lambda v, _: g.op1("Erf", [v]))
        return {"y": y}

    return Lowering(node, parameters, emit)


def _log1p(g: Emitter, x: str, work: str) -> str:
    """``ln(1 + x)`` by Goldberg's formula ``ln(u) · x / (u − 1)``, ``u = 1 + x`` (exact where
    ``u`` is 1), accurate for small ``|x|`` where ``Log(1 + x)`` is not; ``inf`` stays ``inf``."""
    one = const_like(g, 1, work)
    u = g.op1("Add", [x, one])
    y = g.op1("Div", [g.op1("Mul", [g.op1("Log", [u]), x]), g.op1("Sub", [u, one])])
    y = _select(g, g.op1("Equal", [u, one]), x, y, work)
    return g.op1("Where", [g.op1("Equal", [u, const_like(g, np.inf, work)]), u, y])


def _expm1(g: Emitter, x: str, work: str) -> str:
    """``eˣ − 1`` by Kahan's formula ``(u − 1) · x / ln(u)``, ``u = eˣ`` (``x`` where ``u`` is 1,
    −1 where ``u − 1`` is, ``inf`` where ``u`` is)."""
    one = const_like(g, 1, work)
    u = g.op1("Exp", [x])
    minus = g.op1("Sub", [u, one])
    y = g.op1("Div", [g.op1("Mul", [minus, x]), g.op1("Log", [u])])
    y = _select(g, g.op1("Equal", [u, one]), x, y, work)
    negative_one = const_like(g, -1, work)
    y = g.op1("Where", [g.op1("Equal", [minus, negative_one]), negative_one, y])
    return g.op1("Where", [g.op1("Equal", [u, const_like(g, np.inf, work)]), u, y])


@lowers("log1p", "expm1")
def log1p_expm1(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Accurate near 0 (ONNX has neither op): computed in float64, rounded once to the result."""
    catalog_settings(node, parameters)
    body = _log1p if node.op == "log1p" else _expm1

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = _x_dtype(g)
        result = dtype if is_float(dtype) else "float32"
        y = body(g, g.cast(inputs["x"], "float64", dtype), "float64")
        return {"y": g.cast(y, result, "float64")}

    return Lowering(node, parameters, emit)


@lowers("abs")
def abs_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``|x|`` in ``x``'s dtype (the most negative integer wraps to itself)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = _x_dtype(g)
        _refuse_bool(g, dtype)
        return {"y": same_dtype_unary(g, inputs["x"], dtype, lambda v, _: g.op1("Abs", [v]))}

    return Lowering(node, parameters, emit)


@lowers("floor", "ceil", "round")
def rounding(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Floor``, ``Ceil``, ``Round`` (half to even) of a float ``x``; an integer ``x`` as it is.
    ``round`` with ``decimals`` scales as torch does: ``Round(x · 10ᵈ) / 10ᵈ`` (``d < 0``:
    ``Round(x / 10⁻ᵈ) · 10⁻ᵈ``) in float32 (float64 for float64), then rounded to ``x``'s dtype."""
    settings = catalog_settings(node, parameters)
    decimals = settings.integer("decimals") if node.op == "round" else 0
    kind = {"floor": "Floor", "ceil": "Ceil", "round": "Round"}[node.op]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = _x_dtype(g)
        _refuse_bool(g, dtype)
        x = inputs["x"]
        if not is_float(dtype):
            if decimals != 0:
                raise LoweringError(f"rounding to {decimals} decimals needs a floating x, got {dtype}")
            return {"y": g.op1("Identity", [x])}
        if decimals == 0:
            return {"y": same_dtype_unary(g, x, dtype, lambda v, _: g.op1(kind, [v]))}
        work = "float64" if dtype == "float64" else "float32"
        power = g.const(np.asarray(10.0 ** abs(decimals), dtype=numpy_dtype(work)))
        value = g.cast(x, work, dtype)
        if decimals > 0:
            y = g.op1("Div", [g.op1("Round", [g.op1("Mul", [value, power])]), power])
        else:
            y = g.op1("Mul", [g.op1("Round", [g.op1("Div", [value, power])]), power])
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


@lowers("sign")
def sign(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``(x > 0) − (x < 0)`` in ``x``'s dtype: NaN gives 0, as in torch (ONNX's ``Sign`` gives NaN);
    a bool ``x`` is its own sign."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = _x_dtype(g)
        if dtype == "bool":
            return {"y": g.op1("Identity", [inputs["x"]])}

        def body(v: str, work: str) -> str:
            zero = const_like(g, 0, work)
            positive = g.cast(g.op1("Greater", [v, zero]), work, "bool")
            negative = g.cast(g.op1("Less", [v, zero]), work, "bool")
            return g.op1("Sub", [positive, negative])

        return {"y": same_dtype_unary(g, inputs["x"], dtype, body)}

    return Lowering(node, parameters, emit)


@lowers("square")
def square(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x · x`` in ``x``'s dtype (16-bit floats in float32, where the product is exact; integers
    wrap); a bool ``x`` gives int64, and its square is itself."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = _x_dtype(g)
        if dtype == "bool":
            return {"y": g.cast(inputs["x"], "int64", "bool")}
        return {"y": same_dtype_unary(g, inputs["x"], dtype, lambda v, _: g.op1("Mul", [v, v]))}

    return Lowering(node, parameters, emit)


# --- comparisons and logic ----------------------------------------------------------------------

_COMPARISONS = {
    "eq": "Equal",
    "ne": "Equal",
    "lt": "Less",
    "le": "LessOrEqual",
    "gt": "Greater",
    "ge": "GreaterOrEqual",
}


@lowers(*_COMPARISONS)
def comparison(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Both operands converted to their promotion (compared where onnxruntime compares: the 16-bit
    floats widened to float32 and the narrow integers and bools to int32, which is exact); NaN
    compares false, so ``ne`` (``Not(Equal)``) is true for it."""
    catalog_settings(node, parameters)
    kind = _COMPARISONS[node.op]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, other = operand(g, inputs, "x"), operand(g, inputs, "other")
        result = promoted(x, other)
        work = compute_dtype(result)
        y = g.op1(kind, [_converted(g, x, result, work), _converted(g, other, result, work)])
        return {"y": g.op1("Not", [y]) if node.op == "ne" else y}

    return Lowering(node, parameters, emit)


def _truth(g: Emitter, value: str, dtype: str) -> str:
    """``value ≠ 0`` as bools (``Cast`` to bool: a NaN is true, −0.0 false)."""
    return g.cast(value, "bool", dtype)


def _port_dtype(g: Emitter, port: str) -> str:
    dtype = g.input_info(port).dtype
    if dtype is None:
        raise LoweringError(f"{g.node.op}: input {port!r} holds no tensor", node_id=g.node_id)
    return dtype


_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


@lowers(*_LOGICAL)
def logical(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``And``, ``Or``, ``Xor`` of the truth values (non-zero, NaN included) of ``x`` and ``other``."""
    catalog_settings(node, parameters)
    kind = _LOGICAL[node.op]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        a = _truth(g, inputs["x"], _port_dtype(g, "x"))
        b = _truth(g, inputs["other"], _port_dtype(g, "other"))
        return {"y": g.op1(kind, [a, b])}

    return Lowering(node, parameters, emit)


@lowers("logical_not")
def logical_not(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        return {"y": g.op1("Not", [_truth(g, inputs["x"], _x_dtype(g))])}

    return Lowering(node, parameters, emit)


_BITWISE = {
    "bitwise_and": ("BitwiseAnd", "And"),
    "bitwise_or": ("BitwiseOr", "Or"),
    "bitwise_xor": ("BitwiseXor", "Xor"),
}


@lowers(*_BITWISE)
def bitwise(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """On the operands' promotion: ``BitwiseAnd``/``Or``/``Xor`` of integers (opset 18), the
    logical ``And``/``Or``/``Xor`` of bools; floats are refused, as torch refuses them."""
    catalog_settings(node, parameters)
    integers, bools = _BITWISE[node.op]

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, other = operand(g, inputs, "x"), operand(g, inputs, "other")
        result = promoted(x, other)
        if is_float(result):
            raise LoweringError(f"{node.op} needs bool or integer operands, got {result}")
        a, b = _converted(g, x, result, result), _converted(g, other, result, result)
        return {"y": g.op1(bools if result == "bool" else integers, [a, b])}

    return Lowering(node, parameters, emit)


@lowers("bitwise_not")
def bitwise_not(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``BitwiseNot`` of an integer, ``Not`` of a bool; floats are refused."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = _x_dtype(g)
        if is_float(dtype):
            raise LoweringError(f"bitwise_not needs a bool or integer x, got {dtype}")
        return {"y": g.op1("Not" if dtype == "bool" else "BitwiseNot", [inputs["x"]])}

    return Lowering(node, parameters, emit)


# --- selection ----------------------------------------------------------------------------------


def _select(g: Emitter, condition: str, a: str, b: str, work: str, number: Any = None, other: Any = None) -> str:
    """``Where(condition, a, b)``. onnxruntime (1.31) gives +0.0 where its ``Where`` takes a −0.0
    from the first branch (one from the second branch is kept, but its graph optimizer swaps the
    branches of ``Where(Not(c), …)``). ``number`` and ``other``: ``a``'s and ``b``'s values where
    they are known numbers (converted to the result dtype). No fix is needed where ``a`` is a number
    other than −0.0; where ``b`` is one, the branches are swapped (``Where(Xor(c, true), b, a)``,
    which the optimizer leaves alone), so that ``a`` is taken from the second branch; otherwise,
    for floats, the elements that lost their sign are multiplied by −1."""
    if not is_float(work) or (number is not None and not _negative_zero(number)):
        return g.op1("Where", [condition, a, b])
    if other is not None and not _negative_zero(other):
        flipped = g.op1("Xor", [condition, g.const(np.asarray(True))])
        return g.op1("Where", [flipped, b, a])
    y = g.op1("Where", [condition, a, b])
    zero = const_like(g, 0, work)
    negative_zero = g.op1("And", [g.op1("Equal", [a, zero]), g.op1("Less", [g.op1("Reciprocal", [a]), zero])])
    lost = g.op1("And", [condition, negative_zero])
    sign = g.op1("Where", [lost, const_like(g, -1, work), const_like(g, 1, work)])
    return g.op1("Mul", [y, sign])


def _negative_zero(number: Any) -> bool:
    return bool(number == 0 and np.signbit(number))


def _selected_number(each: Operand, result: str) -> Any:
    """A number operand's value once converted to ``result`` (``None`` for a tensor)."""
    if each.value is not None:
        return None
    with np.errstate(all="ignore"):
        return np.asarray(each.number).astype(numpy_dtype(result))


def _condition(g: Emitter, inputs: Mapping[str, str], port: str) -> str:
    dtype = _port_dtype(g, port)
    if dtype != "bool":
        raise LoweringError(f"{g.node.op}: {port} must be a bool tensor, got {dtype}", node_id=g.node_id)
    return inputs[port]


@lowers("where")
def where(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Where`` on the promotion of ``x`` and ``other`` (selected in the dtype onnxruntime's
    ``Where`` takes: it has no bool or int16 kernel; widening and narrowing back is exact)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        condition = _condition(g, inputs, "condition")
        x, other = operand(g, inputs, "x"), operand(g, inputs, "other")
        result = promoted(x, other)
        work = compute_dtype(result)
        a, b = _converted(g, x, result, work), _converted(g, other, result, work)
        y = _select(g, condition, a, b, work, _selected_number(x, result), _selected_number(other, result))
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


@lowers("masked_fill")
def masked_fill(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Where(mask, value, x)`` in ``x``'s dtype. A held number is converted here as torch converts
    a scalar (refused when a finite value overflows the dtype); a 0-d tensor (held or wired) is
    converted in the graph by ``Cast`` (truncation to integers, ``≠ 0`` to bool), without that range
    check, which needs its value (the catalog allows this where the value is not read at build)."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        from trama.catalog._elementwise_checks import fill_scalar

        dtype = _x_dtype(g)
        work = compute_dtype(dtype)
        mask = _condition(g, inputs, "mask")
        if "value" in inputs or g.has_tensor("value"):
            if "value" in inputs:
                info = g.input_info("value")
                source = info.dtype
                value = inputs["value"]
            else:
                info = g.tensor_info("value")
                source = info.dtype
                value = g.tensor("value")
            if info.rank != 0 or source is None:
                raise LoweringError(f"masked_fill: value must be a 0-d tensor, got {info.rank} dimensions")
            fill = _truth(g, value, source) if dtype == "bool" else g.cast(value, dtype, source)
            fill = g.cast(fill, work, dtype)
            known: float | None = None
        else:
            number = g.setting("value")
            try:
                converted = fill_scalar(number, numpy_dtype(dtype))
            except ValueError as error:
                raise LoweringError(f"masked_fill: {error}") from None
            fill = g.const(converted.astype(numpy_dtype(work)))
            known = float(converted.astype(np.float64)) if is_float(dtype) else 0
        y = _select(g, mask, fill, g.cast(inputs["x"], work, dtype), work, known)
        return {"y": g.cast(y, dtype, work)}

    return Lowering(node, parameters, emit)


def _number_operand(value: bool | int | float) -> Operand:
    kind = type(value)
    return Operand(None, {bool: "bool", int: "int64", float: "float32"}[kind], 0, value, kind)


@lowers("clamp")
def clamp(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Min(Max(x, min), max)`` on the promotion of ``x`` and the bounds given (onnxruntime's
    ``Max`` and ``Min`` propagate NaN from either side, as torch does)."""
    settings = catalog_settings(node, parameters)
    wired: tuple[str, ...] = settings["wired"]
    numbers = {name: settings[name] for name in ("min", "max") if settings[name] is not None}

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x = operand(g, inputs, "x")
        bounds = {name: _number_operand(value) for name, value in numbers.items()}
        bounds.update({name: operand(g, inputs, name) for name in wired})
        result = promoted(x, *bounds.values())
        if result == "bool":
            raise LoweringError("clamp of bools is refused, as torch refuses it")
        work = compute_dtype(result)
        y = _converted(g, x, result, work)
        if is_float(work) and not wired and numbers == {"min": 0}:
            # max(x, 0): Relu, which onnxruntime fuses into a convolution or a matrix product
            # before it, and which keeps NaN and −0.0 as torch does
            return {"y": g.cast(g.op1("Relu", [y]), result, work)}
        if "min" in bounds:
            y = g.op1("Max", [y, _converted(g, bounds["min"], result, work)])
        if "max" in bounds:
            y = g.op1("Min", [y, _converted(g, bounds["max"], result, work)])
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)


@lowers("minimum", "maximum")
def extremum(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``Min``/``Max`` on the promotion (NaN propagates from either side); bools: ``And``/``Or``."""
    catalog_settings(node, parameters)
    kind, logical_kind = ("Min", "And") if node.op == "minimum" else ("Max", "Or")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        x, other = operand(g, inputs, "x"), operand(g, inputs, "other")
        result = promoted(x, other)
        if result == "bool":
            return {"y": g.op1(logical_kind, [_converted(g, x, result, result), _converted(g, other, result, result)])}
        work = compute_dtype(result)
        y = g.op1(kind, [_converted(g, x, result, work), _converted(g, other, result, work)])
        return {"y": g.cast(y, result, work)}

    return Lowering(node, parameters, emit)
