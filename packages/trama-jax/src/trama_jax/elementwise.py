"""JAX kernels of the catalog's elementwise ops (:mod:`trama.catalog.elementwise`): unary math,
comparisons, logic, ``where``, ``masked_fill``, ``clamp``, ``minimum``/``maximum`` and ``to``.

As in :mod:`trama_jax.functions`, torch's rules are applied before JAX sees anything: result
dtypes come from the core's :func:`trama.catalog.result_type` (JAX's own promotion never
decides), Python numbers are converted to the promoted dtype by numpy, so that an integer wraps
as torch wraps it (``uint8 == -1`` compares with 255), and every check runs while ``jax.jit``
traces. 16-bit floats are computed in float32 and rounded once, as torch computes them on the
CPU; integer and bool inputs of the transcendental ops give float32.

Without JAX's x64 mode (which trama-jax never turns on) 64-bit types are their 32-bit
counterparts: int64 results are int32 and ``to("float64")`` gives float32 (the catalog's
documented exception). A fill value wired to ``masked_fill``'s ``value`` port is a traced value,
so it is converted without torch's range check; one held by the slot is checked when the kernel
is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trama import Node, Parameter
from trama.catalog import check_settings, result_type
from trama.catalog._elementwise_checks import fill_scalar
from trama.catalog._promotion import is_floating
from trama.format import numpy_dtype
from trama_jax._registry import implements
from trama_jax._slots import Site
from trama_jax.functions import Operand, _binary, _is_number, jax_dtype, result_dtype
from trama_jax.kernel import JaxKernel

#: Nothing by name: each factory is reached through the registry (``@implements``).
__all__: list[str] = []

Inputs = Mapping[str, Any]
Outputs = dict[str, Any]
_Formula = Callable[[jax.Array], jax.Array]

_BOOL = np.dtype(np.bool_)
_FLOAT32 = np.dtype(np.float32)


def _cast(operand: Operand, dtype: np.dtype[Any]) -> jax.Array:
    """An operand converted to ``dtype`` (JAX's form of it): a Python number by numpy first, so
    that an integer wraps to a narrower type as torch wraps it (JAX would refuse it)."""
    target = jax_dtype(dtype)
    if _is_number(operand) or isinstance(operand, np.ndarray):
        with np.errstate(all="ignore"):
            return jnp.asarray(np.asarray(operand).astype(target))
    return jnp.asarray(operand).astype(target)


def _broadcast(site: Site, *values: Any) -> tuple[int, ...]:
    """The broadcast shape of the values, or an error naming the node."""
    try:
        return tuple(jnp.broadcast_shapes(*(jnp.shape(value) for value in values)))
    except ValueError:
        shapes = " and ".join(str(list(jnp.shape(value))) for value in values)
        raise site.fail(f"operands of shapes {shapes} do not broadcast") from None


def _plain(apply: Callable[[Site, Inputs], Outputs]) -> Callable[..., JaxKernel]:
    """A factory for an op without settings or tensor slots: ``apply(site, inputs)``."""

    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
        site = Site(node)
        return JaxKernel(lambda tensors, inputs: apply(site, inputs))

    return factory


def _refuse_bool(site: Site, x: jax.Array) -> None:
    if x.dtype == _BOOL:
        raise site.fail("x must be a number tensor, not bool (torch refuses it too)")


# --- Unary math -----------------------------------------------------------------------------

_FLOAT_FORMULAS: dict[str, _Formula] = {
    "exp": jnp.exp,
    "log": jnp.log,
    "log1p": jnp.log1p,
    "expm1": jnp.expm1,
    "sqrt": jnp.sqrt,
    "rsqrt": jax.lax.rsqrt,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "erf": jax.lax.erf,
    "reciprocal": jnp.reciprocal,
}


def _float_factory(formula: _Formula) -> Callable[..., JaxKernel]:
    def apply(site: Site, inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        dtype = x.dtype if is_floating(x.dtype) else _FLOAT32
        work = jnp.float64 if dtype == np.float64 else jnp.float32
        return {"y": formula(x.astype(work)).astype(dtype)}

    return _plain(apply)


for _name, _formula in _FLOAT_FORMULAS.items():
    implements(_name)(_float_factory(_formula))


def _abs(site: Site, inputs: Inputs) -> Outputs:
    """``|x|`` in the dtype of ``x``."""
    x = jnp.asarray(inputs["x"])
    _refuse_bool(site, x)
    return {"y": jnp.abs(x)}


implements("abs")(_plain(_abs))


def _integral(formula: _Formula) -> Callable[..., JaxKernel]:
    """``floor``/``ceil``/``round`` to an integer: exact in a float dtype; integers as they are."""

    def apply(site: Site, inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        _refuse_bool(site, x)
        return {"y": formula(x) if is_floating(x.dtype) else x}

    return _plain(apply)


implements("floor")(_integral(jnp.floor))
implements("ceil")(_integral(jnp.ceil))


@implements("round")
def round_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Half-to-even rounding; with ``decimals``, torch's scaling in float32 (float64 for float64)."""
    site = Site(node)
    decimals = check_settings(node, parameters).integer("decimals")

    def apply(tensors: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        _refuse_bool(site, x)
        if decimals == 0:
            return {"y": jnp.round(x) if is_floating(x.dtype) else x}
        if not is_floating(x.dtype):
            raise site.fail(f"rounding to {decimals} decimals needs a floating x, got dtype {x.dtype}")
        work = jnp.float64 if x.dtype == np.float64 else jnp.float32
        power = jnp.asarray(10.0 ** abs(decimals), dtype=work)
        value = x.astype(work)
        rounded = jnp.round(value * power) / power if decimals > 0 else jnp.round(value / power) * power
        return {"y": rounded.astype(x.dtype)}

    return JaxKernel(apply)


def _sign(site: Site, inputs: Inputs) -> Outputs:
    """−1, 0 or 1 in the dtype of ``x``; NaN gives 0, as in torch (``jnp.sign`` gives NaN)."""
    x = jnp.asarray(inputs["x"])
    if x.dtype == _BOOL:
        return {"y": x}
    return {"y": ((x > 0).astype(jnp.int8) - (x < 0).astype(jnp.int8)).astype(x.dtype)}


implements("sign")(_plain(_sign))


def _square(site: Site, inputs: Inputs) -> Outputs:
    """``x · x``; bools give int64 (int32 in JAX), as torch's ``x ** 2``."""
    x = jnp.asarray(inputs["x"])
    if x.dtype == _BOOL:
        return {"y": x.astype(jax_dtype(np.int64))}
    if x.dtype in (jnp.float16, jnp.bfloat16):
        wide = x.astype(jnp.float32)
        return {"y": (wide * wide).astype(x.dtype)}
    return {"y": x * x}


implements("square")(_plain(_square))


# --- Comparisons and logic ------------------------------------------------------------------

_COMPARISONS: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "eq": jnp.equal,
    "ne": jnp.not_equal,
    "lt": jnp.less,
    "le": jnp.less_equal,
    "gt": jnp.greater,
    "ge": jnp.greater_equal,
}


def _comparison_factory(relation: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[..., JaxKernel]:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
        def formula(site: Site) -> Callable[[Operand, Operand], jax.Array]:
            def compute(x: Operand, other: Operand) -> jax.Array:
                dtype = result_type(x, other)
                return relation(_cast(x, dtype), _cast(other, dtype))

            return compute

        return _binary(node, parameters, formula)

    return factory


for _name, _relation in _COMPARISONS.items():
    implements(_name)(_comparison_factory(_relation))

_LOGICAL: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "logical_and": jnp.logical_and,
    "logical_or": jnp.logical_or,
    "logical_xor": jnp.logical_xor,
}


def _logical_factory(function: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[..., JaxKernel]:
    def apply(site: Site, inputs: Inputs) -> Outputs:
        x, other = jnp.asarray(inputs["x"]), jnp.asarray(inputs["other"])
        _broadcast(site, x, other)
        return {"y": function(x != 0, other != 0)}

    return _plain(apply)


for _name, _function in _LOGICAL.items():
    implements(_name)(_logical_factory(_function))


def _logical_not(site: Site, inputs: Inputs) -> Outputs:
    """``x == 0`` (a NaN is true, so its negation is false)."""
    return {"y": jnp.asarray(inputs["x"]) == 0}


implements("logical_not")(_plain(_logical_not))

_BITWISE: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "bitwise_and": jnp.bitwise_and,
    "bitwise_or": jnp.bitwise_or,
    "bitwise_xor": jnp.bitwise_xor,
}


def _bitwise_factory(function: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[..., JaxKernel]:
    def factory(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
        def formula(site: Site) -> Callable[[Operand, Operand], jax.Array]:
            def compute(x: Operand, other: Operand) -> jax.Array:
                dtype = result_type(x, other)
                if is_floating(dtype):
                    raise site.fail(f"bitwise operations need bool or integer operands, got {dtype}")
                return function(_cast(x, dtype), _cast(other, dtype))

            return compute

        return _binary(node, parameters, formula)

    return factory


for _name, _function in _BITWISE.items():
    implements(_name)(_bitwise_factory(_function))


def _bitwise_not(site: Site, inputs: Inputs) -> Outputs:
    """``~x``: the complement of an integer, logical not of a bool; floats are refused."""
    x = jnp.asarray(inputs["x"])
    if is_floating(x.dtype):
        raise site.fail(f"bitwise not needs a bool or integer x, got {x.dtype}")
    return {"y": jnp.invert(x)}


implements("bitwise_not")(_plain(_bitwise_not))


# --- Selection ------------------------------------------------------------------------------


def _operand_reader(
    node: Node, parameters: Mapping[str, Parameter], names: tuple[str, ...]
) -> tuple[tuple[str, ...], Callable[[str, Mapping[str, Any], Inputs], Operand]]:
    """The tensor slots of the operands ``names`` and how to read each operand at call time:
    a held tensor from ``tensors`` (a slot, like a weight), a held number from the settings, a
    wired one from ``inputs``."""
    settings = check_settings(node, parameters)

    def read(name: str, tensors: Mapping[str, Any], inputs: Inputs) -> Operand:
        if name in settings.tensors:
            return jnp.asarray(tensors[name])
        if name in settings:
            value: bool | int | float = settings[name]
            return value
        return inputs[name] if _is_number(inputs[name]) else jnp.asarray(inputs[name])

    return settings.tensors, read


def _bool_tensor(site: Site, value: Any, port: str) -> jax.Array:
    array = jnp.asarray(value)
    if array.dtype != _BOOL:
        raise site.fail(f"{port} must be a bool tensor, got dtype {array.dtype}")
    return array


@implements("where")
def where(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` where ``condition``, else ``other``, both converted to their promotion."""
    site = Site(node)
    slots, read = _operand_reader(node, parameters, ("x", "other"))

    def apply(tensors: Mapping[str, Any], inputs: Inputs) -> Outputs:
        condition = _bool_tensor(site, inputs["condition"], "condition")
        x, other = read("x", tensors, inputs), read("other", tensors, inputs)
        _broadcast(site, condition, x, other)
        dtype = result_type(x, other)
        return {"y": jnp.where(condition, _cast(x, dtype), _cast(other, dtype))}

    return JaxKernel(apply, slots)


@implements("masked_fill")
def masked_fill(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` with ``value`` where ``mask``, in the dtype of ``x``, of the broadcast shape. A held
    number is range-checked as torch checks it; a tensor value is converted by XLA."""
    site = Site(node)
    settings = check_settings(node, parameters)
    number = settings.get("value", None)

    def apply(tensors: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        mask = _bool_tensor(site, inputs["mask"], "mask")
        shape = _broadcast(site, x, mask)
        if number is not None:
            try:
                fill = jnp.asarray(fill_scalar(number, jax_dtype(x.dtype)))
            except ValueError as error:
                raise site.fail(str(error)) from None
        else:
            value = jnp.asarray(tensors["value"] if "value" in settings.tensors else inputs["value"])
            if value.ndim != 0:
                raise site.fail(f"value must be 0-d (as torch requires), got shape {list(value.shape)}")
            fill = value.astype(x.dtype) if x.dtype != _BOOL else value != 0
        return {"y": jnp.broadcast_to(jnp.where(mask, fill, x), shape)}

    return JaxKernel(apply, settings.tensors)


@implements("clamp")
def clamp(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``min(max(x, min), max)`` in the promotion of ``x`` and the bounds; NaN propagates."""
    site = Site(node)
    settings = check_settings(node, parameters)
    wired: tuple[str, ...] = settings["wired"]
    numbers = {name: settings[name] for name in ("min", "max") if settings[name] is not None}

    def apply(tensors: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        bounds: dict[str, Operand] = {**numbers, **{name: jnp.asarray(inputs[name]) for name in wired}}
        _broadcast(site, x, *bounds.values())
        dtype = result_type(x, *bounds.values())
        if dtype == _BOOL:
            raise site.fail("clamp of bools is not defined (torch refuses it too)")
        y = _cast(x, dtype)
        if "min" in bounds:
            y = jnp.maximum(y, _cast(bounds["min"], dtype))
        if "max" in bounds:
            y = jnp.minimum(y, _cast(bounds["max"], dtype))
        return {"y": y}

    return JaxKernel(apply)


def _extremum(function: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[..., JaxKernel]:
    """``minimum``/``maximum`` in the promoted dtype; ``jnp.minimum`` propagates NaN, as torch."""

    def apply(site: Site, inputs: Inputs) -> Outputs:
        x, other = jnp.asarray(inputs["x"]), jnp.asarray(inputs["other"])
        _broadcast(site, x, other)
        dtype = result_dtype(x, other)
        return {"y": function(x.astype(dtype), other.astype(dtype))}

    return _plain(apply)


implements("minimum")(_extremum(jnp.minimum))
implements("maximum")(_extremum(jnp.maximum))


# --- Casts ----------------------------------------------------------------------------------


@implements("to")
def to(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` as ``dtype`` (its 32-bit counterpart for a 64-bit one): XLA's conversions, which are
    torch's on the cases the catalog defines (float to integer truncates toward zero, integers
    keep their low bits, anything to bool is ``≠ 0``)."""
    dtype = jax_dtype(numpy_dtype(check_settings(node, parameters).text("dtype")))

    def apply(tensors: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        if dtype == _BOOL:
            return {"y": x != 0}
        return {"y": x.astype(dtype)}

    return JaxKernel(apply)
