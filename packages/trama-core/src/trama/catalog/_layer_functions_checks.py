"""The settings checks of :mod:`trama.catalog.layer_functions`, and the shape rules its kernels share.

The function forms' weights are ports, so a node holds no tensor whose shape could be checked when
it is loaded: the checks here hold what the settings alone decide (``"same"`` padding needs every
stride 1, an output padding below the stride or the dilation, which running-statistic ports
``batch_norm`` may have, that ``embedding``'s ``max_norm`` is null), and the rest, what ties the
weights' shapes to ``x`` and to the settings, is a set of plain functions on shapes that every
framework's kernels call when the op runs (:func:`conv_geometry`, :func:`transposed_geometry`,
:func:`per_channel`, :func:`weight_norm_axes`…). Like :mod:`trama.catalog._geometry`'s, they raise ``ValueError`` with a
message about the shapes alone; kernels re-raise it as their framework's error naming the node.

The module variants (``Conv3d``, ``ConvTranspose1d``, ``BatchNorm3d``) hold their weights in slots
and reuse the layers' checks, which are written for any number of spatial dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trama.catalog import _layer_checks
from trama.catalog._layer_checks import ConvPadding
from trama.catalog._reader import Checker, Flag, Integer, IntList, Number, Reader, Rule

__all__ = [
    "CHECKERS",
    "ConvGeometry",
    "conv_geometry",
    "dense_weights",
    "matching_dtypes",
    "per_channel",
    "transposed_geometry",
    "weight_norm_axes",
]


# --- Shape rules the kernels share ----------------------------------------------------------------


def _shape(shape: Sequence[int]) -> list[int]:
    return [int(size) for size in shape]


def matching_dtypes(x: Any, *, named: str = "x", **others: Any) -> None:
    """torch refuses a weight of another dtype than ``x`` (whose port is ``named``): so does the
    catalog (``others`` by port, ``None`` for an unconnected one; each value has a ``dtype``)."""
    for name, value in others.items():
        if value is not None and value.dtype != x.dtype:
            raise ValueError(f"{name} has dtype {value.dtype} but {named} has {x.dtype}; torch refuses a mix")


def dense_weights(x_shape: Sequence[int], weight_shape: Sequence[int], bias_shape: Sequence[int] | None) -> int:
    """``linear``: ``x`` ``[*, in]``, ``weight`` ``[out, in]``, ``bias`` ``[out]``; returns ``out``."""
    if len(weight_shape) != 2:
        raise ValueError(f"weight must be [out_features, in_features], got shape {_shape(weight_shape)}")
    out, features = weight_shape
    if not x_shape or x_shape[-1] != features:
        raise ValueError(f"x has shape {_shape(x_shape)}, whose last dimension should be {features} (weight's)")
    if bias_shape is not None and tuple(bias_shape) != (out,):
        raise ValueError(f"bias has shape {_shape(bias_shape)}, expected [{out}] (weight's out_features)")
    return int(out)


def per_channel(name: str, shape: Sequence[int] | None, expected: Sequence[int]) -> None:
    """A normalization's vector port (``weight``, ``running_mean``…) has the expected shape, if connected."""
    if shape is not None and tuple(shape) != tuple(expected):
        raise ValueError(f"{name} has shape {_shape(shape)}, expected {_shape(expected)}")


@dataclass(frozen=True, slots=True)
class ConvGeometry:
    """A function-form convolution's geometry once the weight is known: whether ``x`` is batched,
    the kernel extents, the ``(before, after)`` zero padding per spatial dimension (``"same"`` and
    ``"valid"`` resolved), and the channel counts."""

    batched: bool
    kernel: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    in_channels: int
    out_channels: int


def _layout(x_shape: Sequence[int], dims: int) -> tuple[bool, int]:
    if len(x_shape) not in (dims + 1, dims + 2):
        raise ValueError(f"x should have {dims + 1} or {dims + 2} dimensions, got shape {_shape(x_shape)}")
    batched = len(x_shape) == dims + 2
    return batched, int(x_shape[1] if batched else x_shape[0])


def conv_geometry(
    x_shape: Sequence[int],
    weight_shape: Sequence[int],
    bias_shape: Sequence[int] | None,
    *,
    dims: int,
    padding: tuple[int, ...] | str,
    stride: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> ConvGeometry:
    """``conv1d``/``conv2d``/``conv3d``: ``weight`` is ``[C_out, C_in / groups, *kernel]``,
    ``groups`` divides both channel counts, ``bias`` is ``[C_out]``, and every output size is
    positive. ``padding`` is the checked setting (ints, ``"valid"`` or ``"same"``)."""
    batched, channels = _layout(x_shape, dims)
    if len(weight_shape) != dims + 2:
        raise ValueError(
            f"weight must have {dims + 2} dimensions, [C_out, C_in / groups, *kernel], got {_shape(weight_shape)}"
        )
    out, per_group, *kernel = (int(size) for size in weight_shape)
    if out % groups:
        raise ValueError(f"groups = {groups} must divide the weight's {out} output channels")
    if per_group * groups != channels:
        raise ValueError(
            f"x has {channels} channels, but weight {_shape(weight_shape)} with groups = {groups} expects "
            f"{per_group * groups}"
        )
    if bias_shape is not None and tuple(bias_shape) != (out,):
        raise ValueError(f"bias has shape {_shape(bias_shape)}, expected [{out}]")
    if padding == "valid":
        pads = tuple((0, 0) for _ in kernel)
    elif padding == "same":
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        pads = tuple((t // 2, t - t // 2) for t in totals)
    else:
        pads = tuple((int(p), int(p)) for p in padding)
    sizes = x_shape[len(x_shape) - dims :]
    for d, (size, k, dl, (lo, hi)) in enumerate(zip(sizes, kernel, dilation, pads, strict=True)):
        if size + lo + hi < dl * (k - 1) + 1:
            raise ValueError(
                f"x of shape {_shape(x_shape)} padded to {size + lo + hi} along spatial dimension {d} is smaller "
                f"than the kernel's extent {dl * (k - 1) + 1}"
            )
    return ConvGeometry(batched, tuple(kernel), pads, channels, out)


def transposed_geometry(
    x_shape: Sequence[int],
    weight_shape: Sequence[int],
    bias_shape: Sequence[int] | None,
    *,
    dims: int,
    stride: Sequence[int],
    padding: Sequence[int],
    output_padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> ConvGeometry:
    """``conv_transpose1d``/``2d``: ``weight`` is ``[C_in, C_out / groups, *kernel]``, ``groups``
    divides ``C_in``, ``bias`` is ``[C_out]``, and every output size is positive. ``pads`` of the
    result is ``padding`` on both sides (what the catalog's formula removes from ``y``)."""
    batched, channels = _layout(x_shape, dims)
    if len(weight_shape) != dims + 2:
        raise ValueError(
            f"weight must have {dims + 2} dimensions, [C_in, C_out / groups, *kernel], got {_shape(weight_shape)}"
        )
    rows, out_per_group, *kernel = (int(size) for size in weight_shape)
    if rows != channels:
        raise ValueError(f"x has {channels} channels, but weight {_shape(weight_shape)} expects {rows}")
    if channels % groups:
        raise ValueError(f"groups = {groups} must divide the {channels} input channels")
    out = out_per_group * groups
    if bias_shape is not None and tuple(bias_shape) != (out,):
        raise ValueError(f"bias has shape {_shape(bias_shape)}, expected [{out}]")
    sizes = x_shape[len(x_shape) - dims :]
    result = [
        (size - 1) * s - 2 * p + dl * (k - 1) + e + 1
        for size, s, p, dl, k, e in zip(sizes, stride, padding, dilation, kernel, output_padding, strict=True)
    ]
    if min(result) <= 0:
        raise ValueError(f"the output size {result} for x of shape {_shape(x_shape)} is not positive")
    return ConvGeometry(batched, tuple(kernel), tuple((int(p), int(p)) for p in padding), channels, out)


def weight_norm_axes(v_shape: Sequence[int], g_shape: Sequence[int], dim: int) -> tuple[int, ...]:
    """``weight_norm``: the axes of ``v`` its norm sums over (all of them for ``dim`` −1, all but
    ``dim`` otherwise, a negative ``dim`` counted from the end), once ``v`` and ``g`` fit. ``v`` has
    a dimension, ``dim`` lies in ``[−rank, rank)``, ``v.shape[dim]`` is not 0 (torch stops on
    it), and ``g`` is the norm's shape (one element for −1), the one shape on which
    torch's fused kernel (``g`` read flat) and its broadcasting path agree."""
    rank = len(v_shape)
    if rank == 0:
        raise ValueError("v must have at least one dimension, got a 0-d tensor (torch refuses it)")
    if dim == -1:
        if len(g_shape) > rank or any(size != 1 for size in g_shape):
            raise ValueError(
                f"with dim = -1 (the norm of the whole tensor) g must be one element of rank at most {rank}, "
                f"got shape {_shape(g_shape)}"
            )
        return tuple(range(rank))
    if not -rank <= dim < rank:
        raise ValueError(
            f"dim = {dim} is out of range for v of shape {_shape(v_shape)} (expected -1 or [{-rank}, {rank}))"
        )
    axis = dim % rank
    if v_shape[axis] == 0:
        raise ValueError(
            f"v of shape {_shape(v_shape)} is empty along dim = {dim}, which torch cannot normalize "
            "(it stops with a floating-point exception or a reshape error)"
        )
    expected = [int(size) if d == axis else 1 for d, size in enumerate(v_shape)]
    if _shape(g_shape) != expected:
        raise ValueError(
            f"g has shape {_shape(g_shape)}, expected {expected} (v's norm over every dimension but {dim})"
        )
    return tuple(d for d in range(rank) if d != axis)


# --- The checks -----------------------------------------------------------------------------------


def _same_needs_unit_strides(reader: Reader) -> None:
    stride = reader.values["stride"]
    if reader.values["padding"] == "same" and any(s != 1 for s in stride):
        raise reader.error(f'padding "same" needs every stride to be 1, got {list(stride)}')


def _conv(dims: int) -> Checker:
    ones = [1] * dims
    rules: dict[str, Rule] = {
        "stride": IntList(dims, minimum=1, default=ones, window=True),
        "padding": ConvPadding(dims),
        "dilation": IntList(dims, minimum=1, default=ones, window=True),
        "groups": Integer(minimum=1, default=1),
    }
    return Checker(rules, (_same_needs_unit_strides,))


def _conv_transpose(dims: int) -> Checker:
    ones, zeros = [1] * dims, [0] * dims
    rules: dict[str, Rule] = {
        "stride": IntList(dims, minimum=1, default=ones, window=True),
        "padding": IntList(dims, minimum=0, default=zeros, window=True),
        "output_padding": IntList(dims, minimum=0, default=zeros, window=True),
        "groups": Integer(minimum=1, default=1),
        "dilation": IntList(dims, minimum=1, default=ones, window=True),
    }
    return Checker(rules, (_layer_checks._output_padding,))


def _statistics(reader: Reader) -> None:
    """``training`` false reads both running statistics; ``training`` true reads neither (torch
    would update them in place)."""
    wired = [port for port in ("running_mean", "running_var") if port in reader.node.inputs]
    if reader.values["training"]:
        if wired:
            raise reader.error(
                f"training is true, yet {' and '.join(wired)} are connected: torch would update them in place, "
                "which a document cannot record (export the model in evaluation mode)"
            )
    elif len(wired) != 2:
        raise reader.error(
            "training is false, so running_mean and running_var must both be connected "
            "(torch: running_mean must be defined in evaluation mode)"
        )


def _no_max_norm(reader: Reader) -> None:
    max_norm = reader.values["max_norm"]
    if max_norm is not None:
        raise reader.error(
            f"max_norm must be null, got {max_norm}: torch would rescale the table's rows in place, a mutation "
            "a document cannot record (the module Embedding records max_norm)"
        )


def _probability(reader: Reader) -> None:
    p = reader.values["p"]
    if not 0.0 <= p <= 1.0:
        raise reader.error(f"p must lie in [0, 1], got {p}")


_NORMALIZED_SHAPE = IntList(minimum=1, non_empty=True)

#: Every op of the family's checker, by op name.
CHECKERS: dict[str, Checker] = {
    "linear": Checker(),
    "bilinear": Checker(),
    "addmm": Checker({"beta": Number(default=1, exact=True), "alpha": Number(default=1, exact=True)}),
    "conv1d": _conv(1),
    "conv2d": _conv(2),
    "conv3d": _conv(3),
    "conv_transpose1d": _conv_transpose(1),
    "conv_transpose2d": _conv_transpose(2),
    "batch_norm": Checker(
        {"training": Flag(default=False), "momentum": Number(default=0.1), "eps": Number(default=1e-5)},
        (_statistics,),
    ),
    "layer_norm": Checker({"normalized_shape": _NORMALIZED_SHAPE, "eps": Number(default=1e-5)}),
    "group_norm": Checker({"num_groups": Integer(minimum=1), "eps": Number(default=1e-5)}),
    "rms_norm": Checker({"normalized_shape": _NORMALIZED_SHAPE, "eps": Number(nullable=True, default=None)}),
    "embedding": Checker(
        {
            "padding_idx": Integer(minimum=None, nullable=True, default=None),
            "max_norm": Number(nullable=True, default=None),
            "norm_type": Number(default=2.0),
            "scale_grad_by_freq": Flag(default=False),
            "sparse": Flag(default=False),
        },
        (_no_max_norm,),
    ),
    "dropout": Checker({"p": Number(default=0.5), "training": Flag(default=True)}, (_probability,)),
    # dim's range depends on v's rank, known when the op runs (weight_norm_axes).
    "weight_norm": Checker({"dim": Integer(minimum=None, default=0)}),
    "Conv3d": _layer_checks._conv(3),
    "ConvTranspose1d": Checker(
        _layer_checks._geometry(1, transposed=True),
        (_layer_checks._output_padding, _layer_checks._grouped_channels, _layer_checks._transposed_weights),
    ),
    "BatchNorm3d": _layer_checks._batch_norm(),
}
