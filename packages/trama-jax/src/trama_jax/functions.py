"""JAX kernels for the catalog's tensor functions (``docs/ops.md``, section *Tensor functions*):
arithmetic, joining, reshaping, reductions, indexing, tuples and constants.

The catalog follows torch where JAX differs, and the differences are bridged here:

* **Type promotion** is torch's, not JAX's: the result dtype of every operation is decided by
  the core's :func:`trama.catalog.result_type` (``torch.result_type``, shared by every
  framework), and the operands are cast to it before JAX sees them, so JAX's own lattice never
  decides.
* **64-bit types** exist in JAX only in its x64 mode, which trama-jax never turns on (a global
  switch belongs to the program, not to a library). Without it a 64-bit result is computed in its
  32-bit counterpart (:func:`jax_dtype`): ``argmax`` gives int32, an integer ``sum`` int32.
* **Dimensions** wrap as torch wraps them: a 0-d tensor accepts the dimensions 0 and −1.
* **Indexing** applies integer items before tensor items, as torch does (:func:`_getitem`).

Everything about a value's shape and dtype is known while ``jax.jit`` traces, so every check
here runs once, at trace time, and costs nothing in the compiled program. A bad setting is
refused by the core's check (:func:`trama.catalog.check_settings`) with a
:class:`trama.RegistryError`, the same in every framework; an input that does not fit raises
:class:`trama.ExecutionError` naming the op and the node. What depends on values cannot be
checked under ``jit`` and is not: an integer division by zero gives what XLA gives (torch
raises), an index out of range is clamped by XLA where torch raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import EllipsisType
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np

from trama import Node, Parameter
from trama.catalog import check_settings, index_width, result_type, torch_index
from trama_jax._numerics import accumulation, product
from trama_jax._registry import implements
from trama_jax._slots import Site, held
from trama_jax.kernel import JaxKernel

__all__ = ["jax_dtype", "result_dtype", "wrap_dim"]

#: An operand of a binary op: an array (JAX or, for constants, numpy), or a Python number or bool
#: (torch's "wrapped number", which promotes more weakly than a tensor).
Operand: TypeAlias = "jax.Array | np.ndarray | bool | int | float"

_BOOL = np.dtype(np.bool_)
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)

Inputs = Mapping[str, Any]
Outputs = dict[str, Any]


# --- Dtypes ---------------------------------------------------------------------------------


def jax_dtype(dtype: Any) -> np.dtype[Any]:
    """The dtype JAX computes ``dtype`` in: itself, or its 32-bit counterpart outside x64 mode."""
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


def _is_number(value: Any) -> bool:
    """A Python number or bool, which promotes as a scalar (a numpy scalar is a 0-d tensor)."""
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def result_dtype(*operands: Operand) -> np.dtype[Any]:
    """``torch.result_type`` of the operands, as JAX computes it (see :func:`jax_dtype`)."""
    return jax_dtype(result_type(*operands))


def _is_floating(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.floating))


def _cast(operand: Operand, dtype: np.dtype[Any]) -> jax.Array:
    """An operand as a JAX array of ``dtype``."""
    return jnp.asarray(operand, dtype=dtype)


# --- Dimensions -----------------------------------------------------------------------------


def wrap_dim(dim: int, ndim: int, site: Site) -> int:
    """``dim`` (negative counts from the end) as an index in ``range(ndim)``, as torch wraps it:
    a 0-d tensor accepts 0 and −1, as if it had one dimension."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise site.fail(f"dim {dim} is out of range for a tensor of {ndim} dimensions")
    return dim % size


def _wrap_dims(dims: Sequence[int], ndim: int, site: Site) -> tuple[int, ...]:
    """Several dimensions wrapped; naming one twice is an error, as in torch."""
    wrapped = tuple(wrap_dim(d, ndim, site) for d in dims)
    if len(set(wrapped)) != len(wrapped):
        raise site.fail(f"dims {list(dims)} name a dimension twice")
    return wrapped


# --- Binary arithmetic ----------------------------------------------------------------------

_Formula = Callable[[Operand, Operand], jax.Array]


def _binary(
    node: Node, parameters: Mapping[str, Parameter], formula: Callable[[Site], _Formula], *, elementwise: bool = True
) -> JaxKernel:
    """A kernel for an op on ``x`` and ``other``, each from its port or from the constant slot of
    the same name, exactly one of the two (checked when the kernel is built). A tensor constant
    is a tensor slot, passed at call time like a weight (``x * self.scale`` may be trained); a
    number or bool is a setting and keeps its weak, Python-scalar promotion."""
    settings, site = check_settings(node, parameters), Site(node)
    compute = formula(site)

    def operand(name: str, tensors: Mapping[str, Any], inputs: Inputs) -> Operand:
        if name in settings.tensors:
            return jnp.asarray(tensors[name])
        if name in settings:  # a number or a bool, a table value (never a numpy scalar)
            value: bool | int | float = settings[name]
            return value
        return inputs[name] if _is_number(inputs[name]) else jnp.asarray(inputs[name])

    def apply(tensors: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x, other = operand("x", tensors, inputs), operand("other", tensors, inputs)
        if elementwise:
            try:
                jnp.broadcast_shapes(jnp.shape(x), jnp.shape(other))
            except ValueError:
                shapes = f"{list(jnp.shape(x))} and {list(jnp.shape(other))}"
                raise site.fail(f"operands of shapes {shapes} do not broadcast") from None
        return {"y": compute(x, other)}

    return JaxKernel(apply, settings.tensors)


def _scaled(b: jax.Array, alpha: float | int, site: Site) -> jax.Array:
    """``alpha · b`` in ``b``'s dtype; an integer result needs an integral ``alpha`` (JSON may
    write ``2.0`` for torch's ``2``; any other float is refused, as torch refuses it)."""
    if alpha == 1:
        return b
    if not _is_floating(b.dtype):
        if b.dtype == _BOOL or alpha != int(alpha):
            raise site.fail(f"alpha {alpha!r} cannot scale a {b.dtype} operand")
        alpha = int(alpha)
    return b * jnp.asarray(alpha, dtype=b.dtype)


def _is_bool(operand: Operand) -> bool:
    return isinstance(operand, bool) if _is_number(operand) else jnp.result_type(operand) == _BOOL


def _refuse_bool(site: Site, what: str, *operands: Operand) -> None:
    """torch refuses bools in these operations; so does the catalog."""
    if any(_is_bool(operand) for operand in operands):
        raise site.fail(f"{what} with a bool operand is not defined (torch refuses it too)")


@implements("add")
def add(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x + alpha · other``; on bools, ``+`` is logical or, as in torch."""
    alpha = check_settings(node, parameters)["alpha"]

    def formula(site: Site) -> _Formula:
        def compute(x: Operand, other: Operand) -> jax.Array:
            dtype = result_dtype(x, other)
            a, b = _cast(x, dtype), _scaled(_cast(other, dtype), alpha, site)
            return jnp.logical_or(a, b) if dtype == _BOOL else a + b

        return compute

    return _binary(node, parameters, formula)


@implements("sub")
def sub(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x − alpha · other``; any bool operand is refused, as torch refuses it."""
    alpha = check_settings(node, parameters)["alpha"]

    def formula(site: Site) -> _Formula:
        def compute(x: Operand, other: Operand) -> jax.Array:
            _refuse_bool(site, "subtraction", x, other)
            dtype = result_dtype(x, other)
            return _cast(x, dtype) - _scaled(_cast(other, dtype), alpha, site)

        return compute

    return _binary(node, parameters, formula)


@implements("mul")
def mul(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x · other``; on bools, logical and."""

    def formula(site: Site) -> _Formula:
        def compute(x: Operand, other: Operand) -> jax.Array:
            dtype = result_dtype(x, other)
            a, b = _cast(x, dtype), _cast(other, dtype)
            return jnp.logical_and(a, b) if dtype == _BOOL else a * b

        return compute

    return _binary(node, parameters, formula)


@implements("div")
def div(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x / other``: true division (integers give float32), or rounded toward zero (``"trunc"``)
    or −∞ (``"floor"``, Python's ``//``), which keep integer dtypes. ``lax.div`` is C's
    truncating integer division and ``floor_divide`` Python's, torch's two integer modes."""
    mode = check_settings(node, parameters)["rounding_mode"]

    def formula(site: Site) -> _Formula:
        def compute(x: Operand, other: Operand) -> jax.Array:
            dtype = result_dtype(x, other)
            if mode is None:
                dtype = dtype if _is_floating(dtype) else _FLOAT32
                return _cast(x, dtype) / _cast(other, dtype)
            if dtype == _BOOL:
                raise site.fail(f"{mode} division of bools is not defined (torch refuses it too)")
            a, b = _cast(x, dtype), _cast(other, dtype)
            if mode == "floor":
                return jnp.floor_divide(a, b)
            return jnp.trunc(a / b) if _is_floating(dtype) else jax.lax.div(*jnp.broadcast_arrays(a, b))

        return compute

    return _binary(node, parameters, formula)


@implements("pow")
def pow_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x ** other``. A Python-int exponent stays a Python int, so that JAX computes an exact
    repeated product (``x ** 2`` is ``x · x``, as torch computes it). Integer powers follow torch:
    a negative Python exponent is an error, and elementwise a negative exponent gives 1 for
    base 1, ±1 for base −1 (by parity) and 0 otherwise. Bools are refused, as torch does."""

    def formula(site: Site) -> _Formula:
        def compute(x: Operand, other: Operand) -> jax.Array:
            _refuse_bool(site, "pow", x, other)
            dtype = result_dtype(x, other)
            if isinstance(other, int) and (other >= 0 or _is_floating(dtype)):
                return jnp.power(_cast(x, dtype), other)
            if _is_floating(dtype):
                return jnp.power(_cast(x, dtype), _cast(other, dtype))
            if isinstance(other, int):
                raise site.fail("integers to negative integer powers are not allowed (as in torch)")
            base, exponent = jnp.broadcast_arrays(_cast(x, dtype), _cast(other, dtype))
            negative = exponent < 0
            power = jnp.power(base, jnp.where(negative, jnp.zeros((), dtype), exponent))
            odd = (exponent % 2) != 0
            one, zero = jnp.ones((), dtype), jnp.zeros((), dtype)
            reciprocal = jnp.where(base == 1, one, jnp.where(base == -1, jnp.where(odd, -one, one), zero))
            return jnp.where(negative, reciprocal, power)

        return compute

    return _binary(node, parameters, formula)


@implements("matmul")
def matmul(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The matrix product at the highest precision (no TF32 on a GPU), 16-bit floats accumulated
    in float32 and rounded once, as torch's CPU does. torch refuses operands of different
    dtypes, 0-d operands and bools, and so does this kernel."""

    def formula(site: Site) -> _Formula:
        def compute(x: Operand, other: Operand) -> jax.Array:
            if _is_number(x) or _is_number(other) or jnp.ndim(x) == 0 or jnp.ndim(other) == 0:
                raise site.fail("both operands must be tensors of at least one dimension")
            a, b = jnp.asarray(x), jnp.asarray(other)
            if a.dtype != b.dtype:
                raise site.fail(f"operands of dtypes {a.dtype} and {b.dtype} (torch requires one dtype)")
            if a.dtype == _BOOL:
                raise site.fail("matmul of bools is not defined (torch refuses it too)")
            try:
                return product(a, b)
            except (TypeError, ValueError):
                raise site.fail(f"operands of shapes {list(a.shape)} and {list(b.shape)} do not multiply") from None

        return compute

    return _binary(node, parameters, formula, elementwise=False)


@implements("neg")
def neg(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``−x``, in any dtype but bool (torch refuses it; unsigned integers wrap)."""
    site = Site(node)

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x = jnp.asarray(inputs["x"])
        _refuse_bool(site, "negation", x)
        return {"y": jnp.negative(x)}

    return JaxKernel(apply)


# --- Joining --------------------------------------------------------------------------------


def _numbered(inputs: Inputs, site: Site) -> list[jax.Array]:
    """The values of the ports ``x0``, ``x1``, … in numeric order (``x2`` before ``x10``); they
    must be numbered from 0 without gaps and be the only ports."""
    count = len(inputs)
    if count == 0 or set(inputs) != {f"x{k}" for k in range(count)}:
        raise site.fail(f"inputs must be the ports x0 … x{{n−1}}, got {sorted(inputs)}")
    return [jnp.asarray(inputs[f"x{k}"]) for k in range(count)]


@implements("concat")
def concat(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``torch.cat`` along ``dim``. As torch does, 1-D inputs of shape ``[0]`` are skipped
    whatever ``dim`` is (they still take part in the dtype)."""
    site, dim = Site(node), check_settings(node, parameters).integer("dim")

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        arrays = _numbered(inputs, site)
        dtype = result_dtype(*arrays)
        kept = [a for a in arrays if a.shape != (0,)]
        if not kept:
            return {"y": jnp.zeros((0,), dtype)}
        if any(a.ndim == 0 for a in kept):
            raise site.fail("0-d tensors cannot be concatenated (use stack)")
        axis = wrap_dim(dim, kept[0].ndim, site)
        try:
            return {"y": jnp.concatenate([a.astype(dtype) for a in kept], axis=axis)}
        except (TypeError, ValueError):
            raise site.fail(f"shapes {[list(a.shape) for a in kept]} do not join along dim {dim}") from None

    return JaxKernel(apply)


@implements("stack")
def stack(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``torch.stack``: inputs of one shape joined along a new dimension ``dim`` of ``y``."""
    site, dim = Site(node), check_settings(node, parameters).integer("dim")

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        arrays = _numbered(inputs, site)
        if len({a.shape for a in arrays}) != 1:
            raise site.fail(f"inputs must have one shape, got {[list(a.shape) for a in arrays]}")
        rank = arrays[0].ndim
        if not -(rank + 1) <= dim <= rank:
            raise site.fail(f"dim {dim} is out of range for stacking tensors of {rank} dimensions")
        dtype = result_dtype(*arrays)
        return {"y": jnp.stack([a.astype(dtype) for a in arrays], axis=dim % (rank + 1))}

    return JaxKernel(apply)


# --- Shapes ---------------------------------------------------------------------------------


def _unary(node: Node, compute: Callable[[jax.Array, Site], jax.Array]) -> JaxKernel:
    """A kernel applying ``compute`` to the array on ``x``."""
    site = Site(node)

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        return {"y": compute(jnp.asarray(inputs["x"]), site)}

    return JaxKernel(apply)


@implements("reshape")
def reshape(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x`` in C order with the sizes ``shape``; one −1 is inferred, 0 is a size of 0."""
    shape = list(check_settings(node, parameters).integers("shape"))

    def compute(x: jax.Array, site: Site) -> jax.Array:
        known = int(np.prod([s for s in shape if s != -1]))
        # with a −1, the known sizes must divide the element count (and be nonzero, or the −1
        # could be anything: torch refuses that too); without one, they must make it up
        fits = known != 0 and x.size % known == 0 if -1 in shape else x.size == known
        if not fits:
            raise site.fail(f"cannot reshape {list(x.shape)} into {shape}")
        return jnp.reshape(x, shape)

    return _unary(node, compute)


@implements("permute")
def permute(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Dimension i of ``y`` is dimension ``dims[i]`` of ``x``."""
    dims = list(check_settings(node, parameters).integers("dims"))

    def compute(x: jax.Array, site: Site) -> jax.Array:
        if x.ndim == 0 and dims in ([], [0], [-1]):
            return x  # torch lets a 0-d tensor be permuted by its one wrapped dimension
        if len(dims) != x.ndim:
            raise site.fail(f"dims {dims} do not permute {x.ndim} dimensions")
        return jnp.transpose(x, _wrap_dims(dims, x.ndim, site))

    return _unary(node, compute)


@implements("transpose")
def transpose(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Dimensions ``dim0`` and ``dim1`` swapped."""
    settings = check_settings(node, parameters)
    dim0, dim1 = settings.integer("dim0"), settings.integer("dim1")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        a, b = wrap_dim(dim0, x.ndim, site), wrap_dim(dim1, x.ndim, site)
        return x if x.ndim == 0 else jnp.swapaxes(x, a, b)

    return _unary(node, compute)


@implements("flatten")
def flatten(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Dimensions ``start_dim`` … ``end_dim`` merged into one; a 0-d ``x`` becomes ``[1]``."""
    settings = check_settings(node, parameters)
    start_dim, end_dim = settings.integer("start_dim"), settings.integer("end_dim")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        start, end = wrap_dim(start_dim, x.ndim, site), wrap_dim(end_dim, x.ndim, site)
        if start > end:
            raise site.fail(f"start_dim {start_dim} comes after end_dim {end_dim}")
        if x.ndim == 0:
            return x.reshape(1)
        merged = int(np.prod(x.shape[start : end + 1]))  # not −1: it cannot be inferred from 0 elements
        return x.reshape((*x.shape[:start], merged, *x.shape[end + 1 :]))

    return _unary(node, compute)


@implements("squeeze")
def squeeze(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Dimensions of size 1 removed: all of them, or those of ``dim`` that have size 1 (a named
    dimension of another size is kept, as in torch)."""
    dims: tuple[int, ...] | None = check_settings(node, parameters)["dim"]

    def compute(x: jax.Array, site: Site) -> jax.Array:
        if dims is None:
            return jnp.squeeze(x)
        axes = _wrap_dims(dims, x.ndim, site)
        return x if x.ndim == 0 else jnp.squeeze(x, axis=tuple(a for a in axes if x.shape[a] == 1))

    return _unary(node, compute)


@implements("unsqueeze")
def unsqueeze(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """A dimension of size 1 inserted at ``dim`` of ``y`` (−(r + 1) … r for ``x`` of r dims)."""
    dim = check_settings(node, parameters).integer("dim")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        if not -(x.ndim + 1) <= dim <= x.ndim:
            raise site.fail(f"dim {dim} is out of range for unsqueezing {x.ndim} dimensions")
        return jnp.expand_dims(x, dim % (x.ndim + 1))

    return _unary(node, compute)


# --- Reductions -----------------------------------------------------------------------------

_Reduce = Callable[[jax.Array, "tuple[int, ...] | None", bool, Site], jax.Array]


def _reduction(node: Node, parameters: Mapping[str, Parameter], reduce: _Reduce) -> JaxKernel:
    """A kernel reducing ``x`` over the ``dim`` slot (null: all) with ``keepdim``. A 0-d ``x``
    accepts the dimensions 0 and −1, as in torch, and reduces to itself."""
    settings = check_settings(node, parameters)
    dims: tuple[int, ...] | None = settings["dim"]
    keepdim = settings.flag("keepdim")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        axes = None if dims is None else _wrap_dims(dims, x.ndim, site)
        return reduce(x, None if x.ndim == 0 else axes, keepdim, site)

    return _unary(node, compute)


def _nonempty(x: jax.Array, axes: tuple[int, ...] | None, site: Site) -> None:
    """A maximum over nothing has no value: torch raises, and so does this kernel."""
    sizes = x.shape if axes is None else [x.shape[a] for a in axes]
    if 0 in sizes:
        raise site.fail(f"cannot reduce an empty dimension of a tensor of shape {list(x.shape)}")


@implements("mean")
def mean(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The mean over ``dim``, 16-bit floats accumulated in float32 and rounded once (torch's CPU);
    an empty reduction is 0/0 = NaN, as in torch. Integer inputs are refused, as torch does."""

    def reduce(x: jax.Array, axes: tuple[int, ...] | None, keepdim: bool, site: Site) -> jax.Array:
        if not _is_floating(x.dtype):
            raise site.fail(f"mean needs a floating-point x, got dtype {x.dtype}")
        return jnp.mean(x.astype(accumulation(x.dtype)), axis=axes, keepdims=keepdim).astype(x.dtype)

    return _reduction(node, parameters, reduce)


@implements("sum")
def sum_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The sum over ``dim``: floats keep their dtype (16-bit ones accumulated in float32), bools
    and integers are summed as int64 (int32 outside x64 mode), as in torch."""

    def reduce(x: jax.Array, axes: tuple[int, ...] | None, keepdim: bool, site: Site) -> jax.Array:
        if _is_floating(x.dtype):
            return jnp.sum(x.astype(accumulation(x.dtype)), axis=axes, keepdims=keepdim).astype(x.dtype)
        return jnp.sum(x, axis=axes, keepdims=keepdim, dtype=jax_dtype(_INT64))

    return _reduction(node, parameters, reduce)


@implements("max")
def max_(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The largest element over ``dim`` (``torch.amax``): a NaN wins, an empty dimension is an
    error."""

    def reduce(x: jax.Array, axes: tuple[int, ...] | None, keepdim: bool, site: Site) -> jax.Array:
        _nonempty(x, axes, site)
        return jnp.max(x, axis=axes, keepdims=keepdim)

    return _reduction(node, parameters, reduce)


@implements("argmax")
def argmax(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The index of the largest element along ``dim``: the first on ties, the first NaN if any.
    ``dim`` null indexes the flattened ``x``; with ``keepdim`` the index then has every dimension
    of ``x`` with size 1, as torch 2.x gives. The index is int64 (int32 outside x64 mode)."""
    settings = check_settings(node, parameters)
    dim, keepdim = settings.optional_integer("dim"), settings.flag("keepdim")

    def compute(x: jax.Array, site: Site) -> jax.Array:
        _nonempty(x, None, site)
        index_dtype = jax_dtype(_INT64)
        if dim is None:
            index = jnp.argmax(x.reshape(-1)).astype(index_dtype)
            return index.reshape((1,) * x.ndim) if keepdim else index
        axis = wrap_dim(dim, x.ndim, site)
        if x.ndim == 0:
            return jnp.zeros((), index_dtype)
        return jnp.argmax(x, axis=axis, keepdims=keepdim).astype(index_dtype)

    return _unary(node, compute)


# --- Indexing -------------------------------------------------------------------------------

#: An item of a parsed ``getitem`` index: an int, a slice, ``None`` (new axis), ``...``, the name
#: of an index port (``"i0"``), or, once resolved, an index tensor (numpy when it is a constant,
#: which a bool mask must be under ``jit``; JAX when it is computed).
_Item: TypeAlias = "int | slice | EllipsisType | str | np.ndarray | jax.Array | None"


def _is_tensor(item: Any) -> bool:
    return isinstance(item, (np.ndarray, jax.Array))


def _index_tensor(value: Any, site: Site) -> int | np.ndarray | jax.Array:
    """A value wired to an index port, as an index item. Bools are a mask, which must be known
    while tracing (its result's shape depends on its values); other integers are advanced
    indices, and a 0-d one is a plain position, as in torch. uint8 is refused: torch reads it as
    a deprecated mask, the catalog as integers. A Python list from a ``constant`` node works too."""
    if isinstance(value, jax.core.Tracer):
        if value.dtype == _BOOL:
            raise site.fail(
                "a bool mask must be a constant: under jax.jit its result's shape would depend on its values"
            )
        array: np.ndarray | jax.Array = value
    else:
        array = np.asarray(value)
        if array.size == 0 and not isinstance(value, (np.ndarray, jax.Array)):
            array = array.astype(_INT64)  # np.asarray([]) is float64
    if array.dtype == _BOOL:
        return array
    if array.dtype == np.uint8 or not jnp.issubdtype(array.dtype, jnp.integer):
        raise site.fail(f"an index tensor must hold bools or signed integers, got dtype {array.dtype}")
    if array.ndim == 0 and isinstance(array, np.ndarray):
        return int(array)
    return array


def _getitem(x: jax.Array, items: Sequence[_Item], site: Site) -> jax.Array:
    """``x[items]`` with torch's meaning, in two indexings (:func:`trama.catalog.torch_index`),
    because JAX places advanced dimensions by numpy's rule, which counts integers as advanced
    indices and torch does not. A 0-d integer tensor computed under ``jit`` acts as an int."""
    try:
        plan = torch_index(items, x.ndim)
    except IndexError as error:
        raise site.fail(str(error)) from None
    _check_positions(x, plan.expanded, site)
    first = x[plan.clamped(x.shape)]  # no slice bound beyond its dimension reaches XLA
    second = plan.second(first.ndim)
    return first if second is None else first[second]


def _check_positions(x: jax.Array, items: Sequence[_Item], site: Site) -> None:
    """Integer items out of range are errors, as in torch (XLA would clamp them silently); so
    are bool masks whose shape does not match the dimensions they cover."""
    dim = 0
    for item in items:
        if isinstance(item, int):
            size = x.shape[dim]
            if not -size <= item < size:
                raise site.fail(f"index {item} is out of range for dimension {dim} of size {size}")
        elif _is_tensor(item) and item.dtype == _BOOL and item.ndim:  # type: ignore[union-attr]
            covered = x.shape[dim : dim + item.ndim]  # type: ignore[union-attr]
            if tuple(covered) != tuple(item.shape):  # type: ignore[union-attr]
                raise site.fail(f"a mask of shape {list(item.shape)} does not match dimensions {list(covered)}")  # type: ignore[union-attr]
        dim += index_width(item)


@implements("getitem")
def getitem(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """``x[index]``, torch's indexing (see :func:`_getitem`); tensor items come from the ports
    ``i0``, ``i1``, …"""
    site, items = Site(node), check_settings(node, parameters)["index"]

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        resolved: list[_Item] = []
        for item in items:
            if isinstance(item, str):
                if item not in inputs:
                    raise site.fail(f"the index port {item!r} is not wired")
                resolved.append(_index_tensor(inputs[item], site))
            else:
                resolved.append(item)
        return {"y": _getitem(jnp.asarray(inputs["x"]), resolved, site)}

    return JaxKernel(apply)


# --- Tuples and constants -------------------------------------------------------------------


@implements("tuple_get")
def tuple_get(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """Element ``index`` of a tuple or list value (negative counts from the end)."""
    site, index = Site(node), check_settings(node, parameters).integer("index")

    def apply(held: Mapping[str, Any], inputs: Inputs) -> Outputs:
        x = inputs["x"]
        if not isinstance(x, (tuple, list)):
            raise site.fail(f"x must be a tuple or a list, got {type(x).__name__}")
        if not -len(x) <= index < len(x):
            raise site.fail(f"index {index} is out of range for {len(x)} elements")
        return {"y": x[index]}

    return JaxKernel(apply)


@implements("constant")
def constant(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxKernel:
    """The ``value`` slot. A tensor is a tensor slot, given at call time like a weight: a traced
    module's own parameter enters the wiring this way, and training must reach it. Anything else
    is the Python value it is (a number stays a number, so that it promotes as one)."""
    settings = check_settings(node, parameters)
    key = held(settings, "value")
    if key is not None:
        return JaxKernel(lambda tensors, inputs: {"y": tensors[key]}, settings.tensors)
    value = settings["value"]
    return JaxKernel(lambda tensors, inputs: {"y": value})
