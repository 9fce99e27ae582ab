"""Lowerings of the activations, module and function forms alike: ``ReLU``, ``GELU``, ``SiLU``,
``Sigmoid``, ``Tanh``, ``Softmax``, ``LogSoftmax``, ``Softmin``, ``LeakyReLU``, ``Softplus``,
``ELU``, ``SELU``, ``CELU``, ``Hardswish``, ``Hardsigmoid``, ``ReLU6``, ``Hardtanh``, ``Mish``,
``PReLU``, ``GLU``, ``LogSigmoid``, ``Softsign``, ``Tanhshrink``, ``Hardshrink``, ``Softshrink``
and ``Threshold``.

Each keeps ``x``'s dtype and computes float16 and bfloat16 in float32 (the catalog's rule).
Where onnxruntime fuses an ONNX op into the convolution or matrix product before it
(``FusedConv``, its NCHWc convolutions, ``FusedGemm``) and computes the catalog's values, that op
is used: a float ``ReLU`` is ``Relu``, ``ReLU6`` and ``Hardtanh`` are ``Clip`` (onnxruntime 1.31
keeps NaN in both, fused or not, and −0.0 as torch does; an integer ``x`` takes ``Max(x, 0)``).
``GELU`` is written as the pattern onnxruntime fuses into one ``Gelu`` kernel (``x / √2`` rather
than ``x · √½``: the fused kernel computes the latter, which is what torch computes). Every other
activation is written with elementary ops (``Where``, ``Max``, ``Min``, ``Exp``, ``Log``, ...) following the catalog's
formula rather than with ONNX's own activation ops (``LeakyRelu``, ``Elu``, ``Selu``,
``HardSigmoid``, ``Softplus``, ...), whose NaN, infinity and rounding behaviour is not the
catalog's (``Softplus`` has no ``beta`` nor ``threshold``, ``HardSigmoid`` multiplies by a
rounded 1/6). ``expm1`` and ``log1p``, which ONNX lacks, are evaluated without cancellation
(:func:`_expm1`, :func:`_log1p`). The settings a catalog op compares ``x`` with are rounded to the
dtype ``x`` is computed in (``Hardshrink``'s ``lambd`` to ``x``'s own dtype first), as the
numpy reference rounds them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from trama.format import Node, Parameter, numpy_dtype
from trama_onnx._common import axis, compute_dtype, const_like, is_float, same_dtype_unary
from trama_onnx._registry import lowers
from trama_onnx.lowering import Emitter, Lowering, LoweringError, catalog_settings

__all__: list[str] = []


def _elementwise(node: Node, parameters: Mapping[str, Parameter], body: Any) -> Lowering:
    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = g.input_info("x").dtype or "float32"
        return {"y": same_dtype_unary(g, inputs["x"], dtype, lambda value, work: body(g, value, work))}

    return Lowering(node, parameters, emit)


@lowers("ReLU", "relu")
def relu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    catalog_settings(node, parameters)
    return _elementwise(node, parameters, relu_of)


def relu_of(g: Emitter, x: str, dtype: str) -> str:
    """``max(x, 0)`` of ``x`` of ``dtype`` (a dtype onnxruntime computes in): ``Relu`` for floats,
    which onnxruntime fuses into a convolution or a matrix product before it, and which keeps NaN
    and −0.0 (as torch does); ``Max(x, 0)`` for integers."""
    if is_float(dtype):
        return g.op1("Relu", [x])
    return g.op1("Max", [x, const_like(g, 0, dtype)])


@lowers("GELU", "gelu")
def gelu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    approximate = catalog_settings(node, parameters).text("approximate")

    def body(g: Emitter, x: str, dtype: str) -> str:
        half = g.op1("Mul", [x, const_like(g, 0.5, dtype)])
        if approximate == "tanh":
            cube = g.op1("Mul", [g.op1("Mul", [x, x]), x])
            inner = g.op1("Add", [x, g.op1("Mul", [cube, const_like(g, 0.044715, dtype)])])
            inner = g.op1("Mul", [inner, const_like(g, math.sqrt(2 / math.pi), dtype)])
            gate = g.op1("Tanh", [inner])
        else:
            # erf(x / √2), as onnxruntime's Gelu fusion matches it (its fused kernel, and torch,
            # compute x · √½; unfused, the quotient may differ from that product by 1 ulp).
            gate = g.op1("Erf", [g.op1("Div", [x, const_like(g, math.sqrt(2), dtype)])])
        return g.op1("Mul", [half, g.op1("Add", [gate, const_like(g, 1, dtype)])])

    return _elementwise(node, parameters, body)


@lowers("SiLU", "silu")
def silu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    catalog_settings(node, parameters)
    return _elementwise(node, parameters, lambda g, x, dtype: g.op1("Mul", [x, g.op1("Sigmoid", [x])]))


@lowers("Sigmoid", "sigmoid")
def sigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    catalog_settings(node, parameters)
    return _elementwise(node, parameters, lambda g, x, dtype: g.op1("Sigmoid", [x]))


@lowers("Tanh", "tanh")
def tanh(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    catalog_settings(node, parameters)
    return _elementwise(node, parameters, lambda g, x, dtype: g.op1("Tanh", [x]))


def _normalized(node: Node, parameters: Mapping[str, Parameter], op_type: str, *, negate: bool = False) -> Lowering:
    """``op_type`` (``Softmax`` or ``LogSoftmax``) of ``x`` (``−x`` with ``negate``) along ``dim``;
    ``null`` is torch's legacy choice (0 for 0, 1 or 3 dimensions, else 1)."""
    dim = catalog_settings(node, parameters).optional_integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        rank = info.rank
        chosen = dim if dim is not None else (0 if rank in (0, 1, 3) else 1)
        where = axis(chosen, rank)

        def body(x: str, work: str) -> str:
            if negate:
                x = g.op1("Neg", [x])
            if rank == 0:  # a 0-d x: softmax over one element
                one = g.const(np.asarray([0], np.int64))
                return g.op1("Squeeze", [g.op1(op_type, [g.op1("Unsqueeze", [x, one])], {"axis": 0}), one])
            return g.op1(op_type, [x], {"axis": where})

        return {"y": same_dtype_unary(g, inputs["x"], info.dtype or "float32", body)}

    return Lowering(node, parameters, emit)


@lowers("Softmax", "softmax")
def softmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """Along ``dim``; ``null`` is torch's legacy choice (0 for 0, 1 or 3 dimensions, else 1)."""
    return _normalized(node, parameters, "Softmax")


@lowers("LogSoftmax", "log_softmax")
def log_softmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x − m − log Σ exp(x − m)`` along ``dim`` (ONNX's ``LogSoftmax``, which subtracts the maximum)."""
    return _normalized(node, parameters, "LogSoftmax")


@lowers("Softmin", "softmin")
def softmin(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``softmax(−x)`` along ``dim``."""
    return _normalized(node, parameters, "Softmax", negate=True)


# --- The activations of opset 2, and the float-only ones --------------------------------------


def _floating(node: Node, parameters: Mapping[str, Parameter], body: Any) -> Lowering:
    """An elementwise activation of a floating ``x`` (an integer one is refused, as the catalog
    refuses it): ``body(g, x, work, dtype)`` computes on ``x`` cast to ``work``."""

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        dtype = g.input_info("x").dtype or "float32"
        if not is_float(dtype):
            raise LoweringError(f"{g.node.op}: x must be a floating-point tensor, got dtype {dtype}")
        return {"y": same_dtype_unary(g, inputs["x"], dtype, lambda value, work: body(g, value, work, dtype))}

    return Lowering(node, parameters, emit)


def _rounded(value: float, dtype: str) -> float:
    """A setting as the kernel holds it: a number of ``dtype`` (see the numpy reference)."""
    return float(np.asarray(value, dtype=np.float64).astype(numpy_dtype(dtype)))


def _expm1(g: Emitter, x: str, dtype: str) -> str:
    """``exp(x) − 1`` without cancellation near 0 (ONNX has no ``Expm1``): with ``u = exp(x)``,
    Kahan's ``(u − 1) · x / log(u)`` for ``|x| < 1`` (``x`` itself where ``u`` rounds to 1), and
    ``u − 1`` elsewhere (so that ±inf and NaN give what ``exp`` gives)."""
    u = g.op1("Exp", [x])
    one = const_like(g, 1, dtype)
    minus = g.op1("Sub", [u, one])
    kahan = g.op1("Div", [g.op1("Mul", [minus, x]), g.op1("Log", [u])])
    near = g.op1("Where", [g.op1("Equal", [u, one]), x, kahan])
    small = g.op1("Less", [g.op1("Abs", [x]), one])
    return g.op1("Where", [small, near, minus])


def _log1p(g: Emitter, u: str, dtype: str) -> str:
    """``log(1 + u)`` for ``u ≥ 0`` without the loss of a small ``u`` (ONNX has no ``Log1p``):
    Goldberg's ``log(w) · u / (w − 1)`` with ``w = 1 + u``, ``u`` itself where ``w`` rounds to 1,
    ``log(w)`` for an infinite ``u``."""
    one = const_like(g, 1, dtype)
    w = g.op1("Add", [u, one])
    log_w = g.op1("Log", [w])
    exact = g.op1("Div", [g.op1("Mul", [log_w, u]), g.op1("Sub", [w, one])])
    exact = g.op1("Where", [g.op1("IsInf", [u]), log_w, exact])
    return g.op1("Where", [g.op1("Equal", [w, one]), u, exact])


def _softplus(g: Emitter, z: str, dtype: str) -> str:
    """``log(1 + exp(z))`` without overflow: ``max(z, 0) + log1p(exp(−|z|))``."""
    tail = _log1p(g, g.op1("Exp", [g.op1("Neg", [g.op1("Abs", [z])])]), dtype)
    return g.op1("Add", [g.op1("Max", [z, const_like(g, 0, dtype)]), tail])


def _clamp(g: Emitter, x: str, low: str, high: str) -> str:
    """``min(max(x, low), high)`` of a float ``x``, ``low ≤ high``: ONNX's ``Clip``, which
    onnxruntime fuses into a convolution before it, and which keeps NaN there and on its own, and
    −0.0 where ``low`` is 0, as torch does (onnxruntime 1.31, float32 and float64)."""
    return g.op1("Clip", [x, low, high])


@lowers("LeakyReLU", "leaky_relu")
def leaky_relu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x`` where ``x ≥ 0``, else ``negative_slope · x``."""
    slope = catalog_settings(node, parameters).number("negative_slope")

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        negative = g.op1("Mul", [x, const_like(g, slope, work)])
        return g.op1("Where", [g.op1("GreaterOrEqual", [x, const_like(g, 0, work)]), x, negative])

    return _floating(node, parameters, body)


@lowers("Softplus", "softplus")
def softplus(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``log(1 + exp(βx)) / β``, or ``x`` where ``βx > threshold``."""
    settings = catalog_settings(node, parameters)
    beta, limit = settings.number("beta"), settings.number("threshold")

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        z = g.op1("Mul", [x, const_like(g, beta, work)])
        smooth = g.op1("Div", [_softplus(g, z, work), const_like(g, beta, work)])
        return g.op1("Where", [g.op1("Greater", [z, const_like(g, limit, work)]), x, smooth])

    return _floating(node, parameters, body)


def _elu_like(g: Emitter, x: str, work: str, alpha: float, divide: bool = False) -> str:
    """``x`` where ``x > 0``, else ``alpha · expm1(x)`` (``expm1(x / alpha)`` with ``divide``)."""
    inner = g.op1("Div", [x, const_like(g, alpha, work)]) if divide else x
    negative = g.op1("Mul", [const_like(g, alpha, work), _expm1(g, inner, work)])
    return g.op1("Where", [g.op1("Greater", [x, const_like(g, 0, work)]), x, negative])


@lowers("ELU", "elu")
def elu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x`` where ``x > 0``, else ``α(exp(x) − 1)``."""
    alpha = catalog_settings(node, parameters).number("alpha")
    return _floating(node, parameters, lambda g, x, work, dtype: _elu_like(g, x, work, alpha))


@lowers("CELU", "celu")
def celu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x`` where ``x > 0``, else ``α(exp(x / α) − 1)`` (α ≠ 0 is checked by the core)."""
    alpha = catalog_settings(node, parameters).number("alpha")
    return _floating(node, parameters, lambda g, x, work, dtype: _elu_like(g, x, work, alpha, divide=True))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@lowers("SELU", "selu")
def selu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``scale · x`` where ``x > 0``, else ``scale · α · (exp(x) − 1)``, torch's constants."""
    catalog_settings(node, parameters)

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        return g.op1("Mul", [const_like(g, _SELU_SCALE, work), _elu_like(g, x, work, _SELU_ALPHA)])

    return _floating(node, parameters, body)


def _hard_gate(g: Emitter, x: str, work: str) -> str:
    """``min(max(x + 3, 0), 6)``."""
    shifted = g.op1("Add", [x, const_like(g, 3, work)])
    return _clamp(g, shifted, const_like(g, 0, work), const_like(g, 6, work))


@lowers("Hardswish", "hardswish")
def hardswish(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x · min(max(x + 3, 0), 6) / 6`` (``−inf`` gives ``−inf · 0``, NaN, as in the formula)."""
    catalog_settings(node, parameters)

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        return g.op1("Div", [g.op1("Mul", [x, _hard_gate(g, x, work)]), const_like(g, 6, work)])

    return _floating(node, parameters, body)


@lowers("Hardsigmoid", "hardsigmoid")
def hardsigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``min(max(x + 3, 0), 6) / 6``."""
    catalog_settings(node, parameters)
    return _floating(
        node, parameters, lambda g, x, work, dtype: g.op1("Div", [_hard_gate(g, x, work), const_like(g, 6, work)])
    )


def _bounded(node: Node, parameters: Mapping[str, Parameter], low: float, high: float) -> Lowering:
    """``min(max(x, low), high)``, the bounds rounded to the dtype ``x`` is computed in."""

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        return _clamp(g, x, const_like(g, _rounded(low, work), work), const_like(g, _rounded(high, work), work))

    return _floating(node, parameters, body)


@lowers("ReLU6", "relu6")
def relu6(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``min(max(x, 0), 6)``."""
    catalog_settings(node, parameters)
    return _bounded(node, parameters, 0.0, 6.0)


@lowers("Hardtanh", "hardtanh")
def hardtanh(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``min(max(x, min_val), max_val)`` (the order of the bounds is checked by the core)."""
    settings = catalog_settings(node, parameters)
    return _bounded(node, parameters, settings.number("min_val"), settings.number("max_val"))


@lowers("Mish", "mish")
def mish(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x · tanh(softplus(x))``; ``−inf`` gives ``−inf · 0``, NaN, as in torch."""
    catalog_settings(node, parameters)
    return _floating(
        node, parameters, lambda g, x, work, dtype: g.op1("Mul", [x, g.op1("Tanh", [_softplus(g, x, work)])])
    )


def _prelu(g: Emitter, x: str, weight: str, rank: int, work: str) -> str:
    """``x`` where ``x > 0``, else ``w · x``, the weight (1 value or one per channel) reshaped to
    ``[-1, 1, …]`` along dimension 1 (a 0-d shape below 2 dimensions: one channel)."""
    shape = [-1] + [1] * (rank - 2) if rank >= 2 else []
    w = g.op1("Reshape", [weight, g.const(np.asarray(shape, np.int64))])
    negative = g.op1("Mul", [w, x])
    return g.op1("Where", [g.op1("Greater", [x, const_like(g, 0, work)]), x, negative])


def _check_channels(g: Emitter, count: int | str | None, shape: tuple[int | str | None, ...]) -> None:
    """Refuse a weight count other than 1 or the channel count, where both are known."""
    channels = shape[1] if len(shape) >= 2 else 1
    if isinstance(count, int) and isinstance(channels, int) and count not in (1, channels):
        raise LoweringError(
            f"{g.node.op}: the weight holds {count} values; it must hold 1 or one per channel ({channels})"
        )


@lowers("PReLU")
def prelu_module(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The module: its ``weight`` slot ``[num_parameters]``, used in ``x``'s dtype."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        if not is_float(dtype):
            raise LoweringError(f"{g.node.op}: x must be a floating-point tensor, got dtype {dtype}")
        weight_info = g.tensor_info("weight")
        if weight_info.rank > 1:
            raise LoweringError(f"{g.node.op}: the weight must have 1 dimension, got {weight_info.rank}")
        _check_channels(g, weight_info.shape[0] if weight_info.rank else 1, info.shape)
        work = compute_dtype(dtype)
        # rounded to x's dtype first (the catalog's "used in x's dtype"), then computed in ``work``
        weight = g.cast(g.cast(g.tensor("weight"), dtype, weight_info.dtype), work, dtype)
        return {"y": same_dtype_unary(g, inputs["x"], dtype, lambda x, work: _prelu(g, x, weight, info.rank, work))}

    return Lowering(node, parameters, emit)


@lowers("prelu")
def prelu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """The function: the weight on its port, 0-d or 1-d, of ``x``'s dtype."""
    catalog_settings(node, parameters)

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info, weight_info = g.input_info("x"), g.input_info("weight")
        dtype = info.dtype or "float32"
        if not is_float(dtype):
            raise LoweringError(f"{g.node.op}: x must be a floating-point tensor, got dtype {dtype}")
        if weight_info.dtype != dtype:
            raise LoweringError(f"{g.node.op}: weight has dtype {weight_info.dtype}, but x has {dtype}")
        if weight_info.rank > 1:
            raise LoweringError(f"{g.node.op}: the weight must have 0 or 1 dimensions, got {weight_info.rank}")
        _check_channels(g, weight_info.shape[0] if weight_info.rank else 1, info.shape)
        work = compute_dtype(dtype)
        weight = g.cast(inputs["weight"], work, dtype)
        return {"y": same_dtype_unary(g, inputs["x"], dtype, lambda x, work: _prelu(g, x, weight, info.rank, work))}

    return Lowering(node, parameters, emit)


@lowers("GLU", "glu")
def glu(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``a · σ(b)``, ``a`` and ``b`` the halves of ``x`` along ``dim`` (two ``Slice``s at half the
    size, read from ``x``'s shape, so that an empty ``dim`` gives an empty ``y``)."""
    dim = catalog_settings(node, parameters).integer("dim")

    def emit(g: Emitter, inputs: Mapping[str, str]) -> dict[str, str]:
        info = g.input_info("x")
        dtype = info.dtype or "float32"
        if not is_float(dtype):
            raise LoweringError(f"{g.node.op}: x must be a floating-point tensor, got dtype {dtype}")
        if info.rank == 0:
            raise LoweringError(f"{g.node.op}: x is 0-d, which has no dimension to halve")
        where = axis(dim, info.rank)
        size = info.shape[where]
        if isinstance(size, int) and size % 2:
            raise LoweringError(f"{g.node.op}: x has size {size} along dim {dim}, which must be even")

        def body(x: str, work: str) -> str:
            axes = g.const(np.asarray([where], np.int64))
            half = g.op1("Div", [g.shape(x, where, where + 1), g.const(np.asarray([2], np.int64))])
            start = g.const(np.asarray([0], np.int64))
            end = g.const(np.asarray([np.iinfo(np.int64).max], np.int64))
            a = g.op1("Slice", [x, start, half, axes])
            b = g.op1("Slice", [x, half, end, axes])
            return g.op1("Mul", [a, g.op1("Sigmoid", [b])])

        return {"y": same_dtype_unary(g, inputs["x"], dtype, body)}

    return Lowering(node, parameters, emit)


@lowers("LogSigmoid", "logsigmoid")
def logsigmoid(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``log σ(x) = min(x, 0) − log1p(exp(−|x|))``: no overflow, no ``log`` of a rounded 0."""
    catalog_settings(node, parameters)

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        tail = _log1p(g, g.op1("Exp", [g.op1("Neg", [g.op1("Abs", [x])])]), work)
        return g.op1("Sub", [g.op1("Min", [x, const_like(g, 0, work)]), tail])

    return _floating(node, parameters, body)


@lowers("Softsign", "softsign")
def softsign(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x / (1 + |x|)`` (``±inf`` gives NaN, as in the formula)."""
    catalog_settings(node, parameters)

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        return g.op1("Div", [x, g.op1("Add", [g.op1("Abs", [x]), const_like(g, 1, work)])])

    return _floating(node, parameters, body)


@lowers("Tanhshrink", "tanhshrink")
def tanhshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x − tanh(x)``."""
    catalog_settings(node, parameters)
    return _floating(node, parameters, lambda g, x, work, dtype: g.op1("Sub", [x, g.op1("Tanh", [x])]))


@lowers("Hardshrink", "hardshrink")
def hardshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """0 where ``−lambd ≤ x ≤ lambd``, else ``x``; ``lambd`` rounded to ``x``'s own dtype. Not
    ONNX's ``Shrink`` (``bias`` 0), which is the same formula but which onnxruntime (1.31) computes
    otherwise: NaN gives 0 there (the catalog keeps it), a −0.0 kept by a negative ``lambd`` turns
    into +0.0, and a float64 ``x`` is rounded to float32."""
    lambd = catalog_settings(node, parameters).number("lambd")

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        bound = _rounded(lambd, dtype)
        inside = g.op1(
            "And",
            [
                g.op1("GreaterOrEqual", [x, const_like(g, -bound, work)]),
                g.op1("LessOrEqual", [x, const_like(g, bound, work)]),
            ],
        )
        return g.op1("Where", [inside, const_like(g, 0, work), x])

    return _floating(node, parameters, body)


@lowers("Softshrink", "softshrink")
def softshrink(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``x ∓ lambd`` beyond ``±lambd``, else ``x · 0`` (a signed zero; NaN stays NaN)."""
    lambd = catalog_settings(node, parameters).number("lambd")

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        bound = const_like(g, _rounded(lambd, work), work)
        below = g.op1("Neg", [bound])
        zero = g.op1("Mul", [x, const_like(g, 0, work)])
        inner = g.op1("Where", [g.op1("Less", [x, below]), g.op1("Add", [x, bound]), zero])
        return g.op1("Where", [g.op1("Greater", [x, bound]), g.op1("Sub", [x, bound]), inner])

    return _floating(node, parameters, body)


@lowers("Threshold", "threshold")
def threshold(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Lowering:
    """``value`` where ``x ≤ threshold``, else ``x`` (NaN, never ``≤``, stays NaN)."""
    settings = catalog_settings(node, parameters)
    limit, value = settings.number("threshold"), settings.number("value")

    def body(g: Emitter, x: str, work: str, dtype: str) -> str:
        below = g.op1("LessOrEqual", [x, const_like(g, _rounded(limit, work), work)])
        return g.op1("Where", [below, const_like(g, _rounded(value, work), work), x])

    return _floating(node, parameters, body)
