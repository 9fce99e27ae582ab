"""numpy kernels for the catalog's fixed layers: dense and bilinear maps, convolutions, pooling,
normalization, embedding, dropout and shape helpers (``docs/ops.md``, section *Layers*).

These are the reference the other frameworks are tested against, so each kernel follows the
catalog's formula as literally as vectorised numpy allows, and computes in the dtype of its input
(float32 in, float32 out), as torch does; parameters of another dtype are cast to it.

Every factory reads and checks its node's slots once, when the kernel is built, and raises
:class:`trama.RegistryError` naming the node for a configuration the catalog does not allow or
parameters that contradict each other (a weight whose shape disagrees with ``in_features``). A
kernel raises ``ValueError`` or ``TypeError`` for an input that does not fit it (wrong rank,
channel count or dtype), naming the op and the node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from trama import Node, Parameter, RegistryError
from trama.kernels import Kernel
from trama_numpy._registry import implements, optional_array, required_array, setting

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm1d",
    "batch_norm2d",
    "bilinear",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "dropout",
    "embedding",
    "flatten",
    "group_norm",
    "identity",
    "layer_norm",
    "linear",
    "max_pool2d",
    "rms_norm",
]

Array = npt.NDArray[Any]

#: torch's padding modes and the ``numpy.pad`` modes that compute the same values.
_PAD_MODES: dict[str, Literal["constant", "reflect", "edge", "wrap"]] = {
    "zeros": "constant",
    "reflect": "reflect",
    "replicate": "edge",
    "circular": "wrap",
}


# --- Reading slots --------------------------------------------------------------------------


class _Slots:
    """A node's slots, read with the catalog's defaults and checked: every problem becomes a
    :class:`RegistryError` that names the op, the slot and the node, raised at build time."""

    __slots__ = ("node", "parameters")

    def __init__(self, node: Node, parameters: Mapping[str, Parameter]) -> None:
        self.node = node
        self.parameters = parameters

    def error(self, message: str) -> RegistryError:
        return RegistryError(f"{self.node.op}: {message}", node_id=self.node.id)

    def raw(self, slot: str, default: Any, required: bool) -> Any:
        """The slot's value as stored (a tensor as nested lists), or ``default``."""
        if required and slot not in self.parameters:
            raise self.error(f"the required slot {slot!r} is missing")
        value = setting(self.parameters, slot, default)
        return value.tolist() if isinstance(value, np.ndarray) else value

    def integer(self, slot: str, default: int | None = None, *, minimum: int = 0) -> int:
        value = self.raw(slot, default, default is None)
        if not _is_int(value) or value < minimum:
            raise self.error(f"{slot} must be an int ≥ {minimum}, got {value!r}")
        return int(value)

    def optional_integer(self, slot: str, *, minimum: int = 0) -> int | None:
        value = self.raw(slot, None, False)
        if value is not None and (not _is_int(value) or value < minimum):
            raise self.error(f"{slot} must be null or an int ≥ {minimum}, got {value!r}")
        return None if value is None else int(value)

    def integers(
        self, slot: str, count: int, default: Sequence[int] | None = None, *, minimum: int = 0
    ) -> tuple[int, ...]:
        value = self.raw(slot, default, default is None)
        if (
            not isinstance(value, (list, tuple))
            or len(value) != count
            or not all(_is_int(v) and v >= minimum for v in value)
        ):
            raise self.error(f"{slot} must be a list of {count} ints ≥ {minimum}, got {value!r}")
        return tuple(int(v) for v in value)

    def number(self, slot: str, default: float | None) -> float:
        value = self.raw(slot, default, default is None)
        if not _is_number(value):
            raise self.error(f"{slot} must be a number, got {value!r}")
        return float(value)

    def optional_number(self, slot: str) -> float | None:
        value = self.raw(slot, None, False)
        if value is not None and not _is_number(value):
            raise self.error(f"{slot} must be null or a number, got {value!r}")
        return None if value is None else float(value)

    def flag(self, slot: str, default: bool) -> bool:
        value = self.raw(slot, default, False)
        if not isinstance(value, bool):
            raise self.error(f"{slot} must be a bool, got {value!r}")
        return value

    def choice(self, slot: str, default: str, choices: Sequence[str]) -> str:
        value = self.raw(slot, default, False)
        if value not in choices:
            raise self.error(f"{slot} must be one of {', '.join(map(repr, choices))}, got {value!r}")
        return str(value)

    def array(self, slot: str, shape: Sequence[int], what: str) -> Array:
        """A required tensor slot, whose shape must be ``shape`` (``what`` spells it in slot
        names for the message)."""
        if slot not in self.parameters or optional_array(self.parameters, slot) is None:
            raise self.error(f"the required tensor {slot!r} is missing")
        return self._shaped(slot, required_array(self.parameters, slot), shape, what)

    def optional(self, slot: str, shape: Sequence[int], what: str) -> Array | None:
        value = optional_array(self.parameters, slot)
        return None if value is None else self._shaped(slot, value, shape, what)

    def _shaped(self, slot: str, value: Array, shape: Sequence[int], what: str) -> Array:
        if value.shape != tuple(shape):
            raise self.error(f"{slot} has shape {list(value.shape)}, but {what} is {list(shape)}")
        return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --- What every kernel shares -----------------------------------------------------------------


class _Kernel:
    """Base of this module's kernels: knows its node, to name it when an input does not fit."""

    __slots__ = ("where",)

    def __init__(self, node: Node) -> None:
        self.where = f"{node.op} (node {node.id!r})"

    def floating(self, inputs: Mapping[str, Any], port: str = "x") -> Array:
        """The value on ``port`` as an array, which must hold floating-point numbers (torch refuses
        integer inputs to these layers; numpy would silently compute in integers)."""
        array = np.asarray(inputs[port])
        if array.dtype.kind != "f":
            raise TypeError(f"{self.where}: {port} must be a floating-point array, got dtype {array.dtype}")
        return array

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{self.where}: {message}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} for {self.where}>"


def _like(parameter: Array, x: Array) -> Array:
    """A parameter in the input's dtype (no copy when it already is)."""
    return parameter.astype(x.dtype, copy=False)


# --- Dense maps -----------------------------------------------------------------------------


class _Linear(_Kernel):
    __slots__ = ("bias", "in_features", "weight_t")

    def __init__(self, node: Node, weight: Array, bias: Array | None) -> None:
        super().__init__(node)
        self.in_features = weight.shape[1]
        # A transposed view, not a copy: BLAS takes the transpose as a flag, and on the machines we
        # measured the view ran faster than a contiguous [in, out] copy (185 vs 201 us at 512x512).
        self.weight_t = weight.T
        self.bias = bias

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise self.fail(f"x has shape {list(x.shape)}, whose last dimension should be {self.in_features}")
        y = x @ _like(self.weight_t, x)
        if self.bias is not None:
            y += _like(self.bias, x)
        return {"y": y}


@implements("Linear")
def linear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = x · weightᵀ + bias`` over the last dimension."""
    slots = _Slots(node, parameters)
    shape = (slots.integer("out_features"), slots.integer("in_features"))
    weight = slots.array("weight", shape, "[out_features, in_features]")
    return _Linear(node, weight, slots.optional("bias", shape[:1], "[out_features]"))


class _Bilinear(_Kernel):
    __slots__ = ("bias", "weight")

    def __init__(self, node: Node, weight: Array, bias: Array | None) -> None:
        super().__init__(node)
        self.weight = weight
        self.bias = bias

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x1, x2 = self.floating(inputs, "input1"), self.floating(inputs, "input2")
        _, in1, in2 = self.weight.shape
        if x1.ndim == 0 or x2.ndim == 0 or x1.shape[-1] != in1 or x2.shape[-1] != in2:
            raise self.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} should end in {in1} and {in2}")
        if x1.shape[:-1] != x2.shape[:-1]:
            raise self.fail(f"input1 {list(x1.shape)} and input2 {list(x2.shape)} differ in their leading dimensions")
        weight = _like(self.weight, x1)
        # Two contractions instead of one three-operand einsum: input1 with the weight first (a
        # GEMM, [*, out, in2]), then that with input2 along in2.
        partial = np.tensordot(x1, weight, axes=([-1], [1]))
        y = np.einsum("...oj,...j->...o", partial, x2)
        if self.bias is not None:
            y += _like(self.bias, x1)
        return {"y": y}


@implements("Bilinear")
def bilinear(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y[…, o] = Σ_ij input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]``."""
    slots = _Slots(node, parameters)
    out = slots.integer("out_features")
    shape = (out, slots.integer("in1_features"), slots.integer("in2_features"))
    weight = slots.array("weight", shape, "[out_features, in1_features, in2_features]")
    return _Bilinear(node, weight, slots.optional("bias", (out,), "[out_features]"))


# --- Convolutions ---------------------------------------------------------------------------


def _gemm_weight(weight: Array, groups: int) -> Array:
    """A convolution weight ``[O, C_g, *K]`` as one matrix per group, ``[G, C_g·∏K, O_g]``:
    the right-hand side of the im2col product in :func:`_correlate`."""
    out = weight.shape[0]
    per_group = weight.reshape(groups, out // groups, -1)  # [G, O_g, C_g·∏K]
    return np.ascontiguousarray(per_group.transpose(0, 2, 1))


def _correlate(
    padded: Array,
    weight: Array,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Array:
    """Grouped cross-correlation of an already padded, batched ``[N, C, *P]`` input with a
    weight in :func:`_gemm_weight`'s form; returns ``[N, O, *out]``.

    This is im2col: every output position's receptive field is laid out as one row, so that the
    whole convolution becomes a single batched matrix product (one GEMM per group) and no Python
    code runs per output pixel. ``sliding_window_view`` gives every window of the padded input as
    a strided *view*, ``[N, C, *(P − span + 1), *span]`` with ``span = dilation·(k − 1) + 1``;
    slicing its window axes with step ``dilation`` keeps the kernel taps and slicing its
    position axes with step ``stride`` keeps the output positions, still without copying. The
    only copy is the final reshape into rows ``[G, N·∏out, C_g·∏K]``, whose column order (channel,
    then kernel position, C order) is the order of ``weight.reshape(O, -1)``'s columns, so the
    product is exactly the catalog's ``Σ_c Σ_k p[n, g·C_g + c, q·stride + k·dilation] ·
    weight[o, c, k]``.
    """
    dims = len(kernel)
    n, channels = padded.shape[:2]
    spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
    sizes = padded.shape[2:]
    if any(size < span for size, span in zip(sizes, spans, strict=True)):
        raise ValueError(
            f"the padded input's spatial size {list(sizes)} is smaller than the kernel's extent {list(spans)}"
        )
    windows = sliding_window_view(padded, spans, axis=tuple(range(2, 2 + dims)))
    every = slice(None)
    taps = (every, every, *(slice(None, None, s) for s in stride), *(slice(None, None, d) for d in dilation))
    windows = windows[taps]  # [N, C, *out, *K]
    out = windows.shape[2 : 2 + dims]
    per_group = channels // groups
    # [N, G, C_g, *out, *K] -> [G, N, *out, C_g, *K]: rows are (sample, position), columns (c, k).
    split = windows.reshape(n, groups, per_group, *out, *kernel)
    order = (1, 0, *range(3, 3 + dims), 2, *range(3 + dims, 3 + 2 * dims))
    rows = split.transpose(order).reshape(groups, n * math.prod(out), per_group * math.prod(kernel))
    product = rows @ weight  # [G, N·∏out, O_g]
    out_per_group = weight.shape[2]
    # [G, N, *out, O_g] -> [N, G, O_g, *out] -> [N, O, *out]
    y = product.reshape(groups, n, *out, out_per_group).transpose(1, 0, 2 + dims, *range(2, 2 + dims))
    return y.reshape(n, groups * out_per_group, *out)


class _Conv(_Kernel):
    __slots__ = ("bias", "dilation", "groups", "in_channels", "kernel", "mode", "pads", "stride", "weight")

    def __init__(
        self,
        node: Node,
        *,
        weight: Array,
        bias: Array | None,
        kernel: tuple[int, ...],
        stride: tuple[int, ...],
        pads: tuple[tuple[int, int], ...],
        dilation: tuple[int, ...],
        groups: int,
        mode: str,
    ) -> None:
        super().__init__(node)
        self.in_channels = weight.shape[1] * groups
        self.weight = _gemm_weight(weight, groups)
        self.bias = bias
        self.kernel, self.stride, self.pads, self.dilation = kernel, stride, pads, dilation
        self.groups = groups
        self.mode = mode

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        dims = len(self.kernel)
        batched = _batched(self, x, dims, self.in_channels)
        padded = self._pad(batched)
        try:
            y = _correlate(padded, _like(self.weight, x), self.kernel, self.stride, self.dilation, self.groups)
        except ValueError as exc:
            raise self.fail(str(exc)) from None
        if self.bias is not None:
            y += _like(self.bias, x).reshape(-1, *([1] * dims))
        return {"y": y if batched is x else y[0]}

    def _pad(self, x: Array) -> Array:
        if not any(before or after for before, after in self.pads):
            return x
        sizes = x.shape[2:]
        for size, (before, after) in zip(sizes, self.pads, strict=True):
            # torch refuses these; numpy would reflect or wrap more than once instead.
            if self.mode == "reflect" and max(before, after) >= size:
                raise self.fail(
                    f"reflect padding of {max(before, after)} needs more than that many elements, got {size}"
                )
            if self.mode == "circular" and max(before, after) > size:
                raise self.fail(
                    f"circular padding of {max(before, after)} needs at least that many elements, got {size}"
                )
        return np.pad(x, ((0, 0), (0, 0), *self.pads), mode=_PAD_MODES[self.mode])


def _batched(kernel: _Kernel, x: Array, dims: int, channels: int) -> Array:
    """``x`` with its batch dimension: an unbatched ``[C, *S]`` input gains a leading 1."""
    if x.ndim not in (dims + 1, dims + 2):
        raise kernel.fail(f"x should have {dims + 1} or {dims + 2} dimensions, got shape {list(x.shape)}")
    batched = x if x.ndim == dims + 2 else x[np.newaxis]
    if batched.shape[1] != channels:
        raise kernel.fail(f"x has {batched.shape[1]} channels (shape {list(x.shape)}), expected {channels}")
    return batched


def _channels(slots: _Slots, groups: int) -> tuple[int, int]:
    in_channels, out_channels = slots.integer("in_channels", minimum=1), slots.integer("out_channels", minimum=1)
    if in_channels % groups or out_channels % groups:
        raise slots.error(
            f"groups = {groups} must divide in_channels = {in_channels} and out_channels = {out_channels}"
        )
    return in_channels, out_channels


def _conv(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter], dims: int) -> Kernel:
    """Conv1d and Conv2d: grouped, dilated, strided cross-correlation of a padded input."""
    slots = _Slots(node, parameters)
    kernel = slots.integers("kernel_size", dims, minimum=1)
    stride = slots.integers("stride", dims, [1] * dims, minimum=1)
    dilation = slots.integers("dilation", dims, [1] * dims, minimum=1)
    groups = slots.integer("groups", 1, minimum=1)
    mode = slots.choice("padding_mode", "zeros", tuple(_PAD_MODES))
    padding = slots.raw("padding", [0] * dims, False)
    if padding == "valid":
        pads = ((0, 0),) * dims
    elif padding == "same":
        if any(s != 1 for s in stride):
            raise slots.error(f'padding "same" needs every stride to be 1, got {list(stride)}')
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        pads = tuple((t // 2, t - t // 2) for t in totals)
    else:
        if isinstance(padding, str):
            raise slots.error(f'padding must be a list of {dims} ints, "valid" or "same", got {padding!r}')
        pads = tuple((p, p) for p in slots.integers("padding", dims, [0] * dims))
    in_channels, out_channels = _channels(slots, groups)
    shape = (out_channels, in_channels // groups, *kernel)
    weight = slots.array("weight", shape, "[out_channels, in_channels / groups, *kernel_size]")
    bias = slots.optional("bias", (out_channels,), "[out_channels]")
    return _Conv(
        node,
        weight=weight,
        bias=bias,
        kernel=kernel,
        stride=stride,
        pads=pads,
        dilation=dilation,
        groups=groups,
        mode=mode,
    )


@implements("Conv1d")
def conv1d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Cross-correlation over the last dimension of ``[N, C, L]`` or ``[C, L]``."""
    return _conv(node, children=children, parameters=parameters, dims=1)


@implements("Conv2d")
def conv2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Cross-correlation over the last two dimensions of ``[N, C, H, W]`` or ``[C, H, W]``."""
    return _conv(node, children=children, parameters=parameters, dims=2)


class _ConvTranspose(_Kernel):
    """The transposed convolution computed as an ordinary one, so that it shares im2col.

    Spreading each input element over a window of ``y`` (the catalog's definition) is the same
    as a stride-1 correlation of a *dilated* input with the spatially flipped kernel: insert
    ``stride − 1`` zeros between neighbouring input elements, pad each dimension by
    ``dilation·(k − 1) − padding`` at the start and that plus ``output_padding`` at the end (a
    negative amount crops), and correlate with ``weight`` flipped and its channel axes swapped
    within each group, keeping ``dilation``. Substituting ``a ↦ k − 1 − a`` shows that output
    ``i`` then collects exactly the terms with ``h·stride + a·dilation − padding = i``. The
    inserted zeros cost ``stride²`` times the arithmetic of a scatter, which a reference can
    afford for the sake of one well-tested code path.
    """

    __slots__ = ("bias", "dilation", "groups", "highs", "in_channels", "kernel", "lows", "stride", "weight")

    def __init__(
        self,
        node: Node,
        *,
        weight: Array,
        bias: Array | None,
        stride: tuple[int, ...],
        padding: tuple[int, ...],
        output_padding: tuple[int, ...],
        dilation: tuple[int, ...],
        groups: int,
    ) -> None:
        super().__init__(node)
        in_channels, out_per_group, *kernel = weight.shape
        per_group = in_channels // groups
        # [C_in, O_g, *K] = [G, C_g, O_g, *K] -> [G, O_g, C_g, *K], flipped -> [O, C_g, *K]
        swapped = weight.reshape(groups, per_group, out_per_group, *kernel).swapaxes(1, 2)
        flipped = np.flip(swapped, axis=tuple(range(3, 3 + len(kernel))))
        self.weight = _gemm_weight(flipped.reshape(groups * out_per_group, per_group, *kernel), groups)
        self.bias = bias
        self.in_channels = in_channels
        self.kernel = tuple(kernel)
        self.stride, self.dilation, self.groups = stride, dilation, groups
        self.lows = tuple(d * (k - 1) - p for k, d, p in zip(kernel, dilation, padding, strict=True))
        self.highs = tuple(low + extra for low, extra in zip(self.lows, output_padding, strict=True))

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        dims = len(self.kernel)
        batched = _batched(self, x, dims, self.in_channels)
        n, channels, *sizes = batched.shape
        every = slice(None)
        spread = np.zeros((n, channels, *((s - 1) * t + 1 for s, t in zip(sizes, self.stride, strict=True))), x.dtype)
        spread[(every, every, *(slice(None, None, t) for t in self.stride))] = batched
        # Pad by the positive amounts, then crop by the negative ones.
        pads = tuple((max(low, 0), max(high, 0)) for low, high in zip(self.lows, self.highs, strict=True))
        padded = np.pad(spread, ((0, 0), (0, 0), *pads))
        crop = tuple(
            slice(max(-low, 0), max(size - max(-high, 0), 0))
            for low, high, size in zip(self.lows, self.highs, padded.shape[2:], strict=True)
        )
        padded = padded[(every, every, *crop)]
        try:
            y = _correlate(padded, _like(self.weight, x), self.kernel, (1,) * dims, self.dilation, self.groups)
        except ValueError:
            raise self.fail(f"the output size for x of shape {list(x.shape)} is not positive") from None
        if self.bias is not None:
            y += _like(self.bias, x).reshape(-1, *([1] * dims))
        return {"y": y if batched is x else y[0]}


@implements("ConvTranspose2d")
def conv_transpose2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The transpose of Conv2d (see :class:`_ConvTranspose` for how it is computed)."""
    slots = _Slots(node, parameters)
    kernel = slots.integers("kernel_size", 2, minimum=1)
    stride = slots.integers("stride", 2, [1, 1], minimum=1)
    padding = slots.integers("padding", 2, [0, 0])
    output_padding = slots.integers("output_padding", 2, [0, 0])
    dilation = slots.integers("dilation", 2, [1, 1], minimum=1)
    groups = slots.integer("groups", 1, minimum=1)
    slots.choice("padding_mode", "zeros", ("zeros",))
    for d in range(2):
        if output_padding[d] >= max(stride[d], dilation[d]):
            raise slots.error(
                f"output_padding[{d}] = {output_padding[d]} must be smaller than stride[{d}] = {stride[d]} "
                f"or dilation[{d}] = {dilation[d]}"
            )
    in_channels, out_channels = _channels(slots, groups)
    shape = (in_channels, out_channels // groups, *kernel)
    weight = slots.array("weight", shape, "[in_channels, out_channels / groups, *kernel_size]")
    bias = slots.optional("bias", (out_channels,), "[out_channels]")
    return _ConvTranspose(
        node,
        weight=weight,
        bias=bias,
        stride=stride,
        padding=padding,
        output_padding=output_padding,
        dilation=dilation,
        groups=groups,
    )


# --- Pooling --------------------------------------------------------------------------------


def _pool_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """The catalog's (and torch's) output size of a pooled dimension; ≤ 0 when none fits."""
    room = size + 2 * padding - (dilation * (kernel - 1) + 1)
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:  # the last window starts in the padding
        out -= 1
    return out


class _Pool(_Kernel):
    """Windows of a 2-d pool, as a strided view of the padded input (as in :func:`_correlate`)."""

    __slots__ = ("ceil_mode", "dilation", "kernel", "padding", "stride")

    def __init__(self, node: Node, slots: _Slots, *, dilation: bool) -> None:
        super().__init__(node)
        self.kernel = slots.integers("kernel_size", 2, minimum=1)
        stride = slots.raw("stride", None, False)
        self.stride = self.kernel if stride is None else slots.integers("stride", 2, minimum=1)
        self.padding = slots.integers("padding", 2, [0, 0])
        self.dilation = slots.integers("dilation", 2, [1, 1], minimum=1) if dilation else (1, 1)
        self.ceil_mode = slots.flag("ceil_mode", False)
        for d in range(2):
            if 2 * self.padding[d] > self.kernel[d]:
                raise slots.error(
                    f"padding[{d}] = {self.padding[d]} must be at most half of kernel_size[{d}] = {self.kernel[d]}"
                )

    def windows(self, x: Array, fill: Any) -> tuple[Array, tuple[int, int]]:
        """Every window, ``[*, out_h, out_w, kernel_h, kernel_w]``, of ``x`` padded with ``fill``,
        and the output size. In ceil mode the last window may reach past the end padding; the
        input is padded (with ``fill``) as far as the windows reach."""
        if x.ndim not in (3, 4):
            raise self.fail(f"x should be [N, C, H, W] or [C, H, W], got shape {list(x.shape)}")
        sizes = x.shape[-2:]
        geometry = zip(sizes, self.kernel, self.stride, self.padding, self.dilation, strict=True)
        out = tuple(_pool_size(*g, self.ceil_mode) for g in geometry)
        if min(out) <= 0:
            raise self.fail(f"x of shape {list(x.shape)} is too small for the window: output size {list(out)}")
        spans = [d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation, strict=True)]
        ends = [
            max((o - 1) * s + span - size - p, 0)
            for o, s, span, size, p in zip(out, self.stride, spans, sizes, self.padding, strict=True)
        ]
        pads = [(0, 0)] * (x.ndim - 2) + [(p, e) for p, e in zip(self.padding, ends, strict=True)]
        padded = np.pad(x, pads, constant_values=fill)
        view = sliding_window_view(padded, spans, axis=(-2, -1))
        view = view[..., :: self.stride[0], :: self.stride[1], :: self.dilation[0], :: self.dilation[1]]
        return view[..., : out[0], : out[1], :, :], (out[0], out[1])


class _MaxPool(_Pool):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = np.asarray(inputs["x"])
        if x.dtype.kind == "f":
            fill: Any = -np.inf  # padding never wins (a NaN in the window still does, as in torch)
        elif x.dtype.kind in "iu":
            fill = np.iinfo(x.dtype).min
        else:
            raise TypeError(f"{self.where}: x must be a floating-point or integer array, got dtype {x.dtype}")
        windows, _ = self.windows(x, fill)
        return {"y": windows.max(axis=(-2, -1))}


@implements("MaxPool2d")
def max_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The largest element of each (dilated) window; padding acts as −∞."""
    return _MaxPool(node, _Slots(node, parameters), dilation=True)


class _AvgPool(_Pool):
    __slots__ = ("count_include_pad", "divisor_override")

    def __init__(self, node: Node, slots: _Slots) -> None:
        super().__init__(node, slots, dilation=False)
        self.count_include_pad = slots.flag("count_include_pad", True)
        self.divisor_override = slots.optional_integer("divisor_override", minimum=1)

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        windows, out = self.windows(x, 0)
        total = windows.sum(axis=(-2, -1))
        if self.divisor_override is not None:
            divisor: Array = np.asarray(self.divisor_override, x.dtype)
        else:
            counts = [self._counts(d, x.shape[-2 + d], out[d]) for d in range(2)]
            divisor = (counts[0][:, np.newaxis] * counts[1][np.newaxis, :]).astype(x.dtype)
        return {"y": total / divisor}

    def _counts(self, d: int, size: int, out: int) -> npt.NDArray[np.int64]:
        """Per output index along dimension ``d``: the catalog's ``e − s`` (window clipped to the
        end padding) with ``count_include_pad``, else the number of positions inside ``x``."""
        start = np.arange(out, dtype=np.int64) * self.stride[d] - self.padding[d]
        end = np.minimum(start + self.kernel[d], size + self.padding[d])
        if self.count_include_pad:
            return end - start
        return np.minimum(end, size) - np.maximum(start, 0)


@implements("AvgPool2d")
def avg_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The sum of each window's elements inside ``x``, over the catalog's divisor."""
    return _AvgPool(node, _Slots(node, parameters))


class _AdaptiveAvgPool(_Kernel):
    """Each output averages a window whose bounds depend on the input size, so the windows are
    not a strided view; instead each dimension gets a 0/1 *membership matrix* ``M[i, h]`` (input
    position h lies in output i's window), and ``M_H · x · M_Wᵀ`` sums every window in two matrix
    products. Dividing by the window sizes afterwards keeps torch's sum-then-divide order (no
    rounded ``1 / count`` weights), and overlapping or uneven windows need no special case."""

    __slots__ = ("output_size",)

    def __init__(self, node: Node, output_size: tuple[int | None, ...]) -> None:
        super().__init__(node)
        self.output_size = output_size

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim not in (3, 4):
            raise self.fail(f"x should be [N, C, H, W] or [C, H, W], got shape {list(x.shape)}")
        height, width = x.shape[-2:]
        rows, row_counts = _membership(height, self.output_size[0], x.dtype)
        cols, col_counts = _membership(width, self.output_size[1], x.dtype)
        total = rows @ x @ cols.T
        return {"y": total / (row_counts[:, np.newaxis] * col_counts[np.newaxis, :])}


def _membership(size: int, out: int | None, dtype: np.dtype[Any]) -> tuple[Array, Array]:
    """``M[i, j] = 1`` when input position j is in output i's window ``⌊i·S/O⌋ … ⌈(i+1)·S/O⌉ − 1``,
    and each window's size, both in ``dtype``."""
    out = size if out is None else out
    index = np.arange(out)
    start = index * size // out
    end = -(-(index + 1) * size // out)
    position = np.arange(size)
    member = (position >= start[:, np.newaxis]) & (position < end[:, np.newaxis])
    return member.astype(dtype), (end - start).astype(dtype)


@implements("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Means over windows chosen to give ``output_size`` (a ``null`` entry keeps that size)."""
    slots = _Slots(node, parameters)
    value = slots.raw("output_size", None, True)
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(v is None or (_is_int(v) and v >= 1) for v in value)
    ):
        raise slots.error(f"output_size must be a list of 2 entries, each an int ≥ 1 or null, got {value!r}")
    return _AdaptiveAvgPool(node, tuple(value))


# --- Normalization --------------------------------------------------------------------------


def _affine(
    slots: _Slots, flag: str, shape: Sequence[int], what: str, *, bias_optional: bool
) -> tuple[Array | None, Array | None]:
    """γ and β of a normalization, checked against the flag that says whether they exist.

    The slots are the truth (the catalog's convention) and the flag must agree with them; only
    β may be absent while the flag is true where torch has ``bias=False`` (``bias_optional``).
    """
    enabled = slots.flag(flag, True)
    weight = slots.optional("weight", shape, what)
    bias = slots.optional("bias", shape, what)
    if not enabled and (weight is not None or bias is not None):
        raise slots.error(f"{flag} is false, yet the node has {'weight' if weight is not None else 'bias'}")
    if enabled and weight is None:
        raise slots.error(f"{flag} is true, yet the node has no weight")
    if enabled and bias is None and not bias_optional:
        raise slots.error(f"{flag} is true, yet the node has no bias")
    return weight, bias


def _normalize(x: Array, mean: Array, var: Array, eps: float) -> Array:
    """``(x − μ) / √(σ² + eps)``, with the square root and the division done once per statistic
    rather than once per element."""
    return (x - mean) * (1 / np.sqrt(var + eps))


class _BatchNorm(_Kernel):
    __slots__ = ("bias", "channels", "dims", "eps", "mean", "var", "weight")

    def __init__(
        self,
        node: Node,
        *,
        channels: int,
        dims: tuple[int, ...],
        eps: float,
        weight: Array | None,
        bias: Array | None,
        mean: Array | None,
        var: Array | None,
    ) -> None:
        super().__init__(node)
        self.channels, self.dims, self.eps = channels, dims, eps
        self.weight, self.bias, self.mean, self.var = weight, bias, mean, var

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim not in self.dims:
            raise self.fail(f"x should have {' or '.join(map(str, self.dims))} dimensions, got shape {list(x.shape)}")
        if x.shape[1] != self.channels:
            raise self.fail(f"x has {x.shape[1]} channels (shape {list(x.shape)}), expected {self.channels}")
        shape = (1, -1, *([1] * (x.ndim - 2)))  # a per-channel vector, broadcast along dimension 1
        if self.mean is not None and self.var is not None:
            mean, var = _like(self.mean, x).reshape(shape), _like(self.var, x).reshape(shape)
        else:  # no running statistics: the batch's, biased, over every dimension but the channel
            axes = (0, *range(2, x.ndim))
            mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
        y = _normalize(x, mean, var, self.eps)
        if self.weight is not None:
            y = y * _like(self.weight, x).reshape(shape)
        if self.bias is not None:
            y = y + _like(self.bias, x).reshape(shape)
        return {"y": y}


def _batch_norm(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter], dims: tuple[int, ...]
) -> Kernel:
    """BatchNorm1d/2d in eval mode: normalized by the running statistics when the node has them,
    else (a module built with ``track_running_stats=False``) by the batch's.

    Which statistics are used follows the slots, as torch's eval-mode ``forward`` follows its
    buffers: a node whose ``track_running_stats`` is false but that still carries running
    statistics (a torch module whose flag was switched off after construction) uses them.
    """
    slots = _Slots(node, parameters)
    channels = slots.integer("num_features", minimum=1)
    eps = slots.number("eps", 1e-5)
    tracking = slots.flag("track_running_stats", True)
    weight, bias = _affine(slots, "affine", (channels,), "[num_features]", bias_optional=False)
    mean = slots.optional("running_mean", (channels,), "[num_features]")
    var = slots.optional("running_var", (channels,), "[num_features]")
    if (mean is None) != (var is None):
        raise slots.error("running_mean and running_var must be both present or both absent")
    if tracking and mean is None:
        raise slots.error("track_running_stats is true, yet the node has no running_mean and running_var")
    return _BatchNorm(node, channels=channels, dims=dims, eps=eps, weight=weight, bias=bias, mean=mean, var=var)


@implements("BatchNorm1d")
def batch_norm1d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Per-channel normalization of ``[N, C]`` or ``[N, C, L]``."""
    return _batch_norm(node, children=children, parameters=parameters, dims=(2, 3))


@implements("BatchNorm2d")
def batch_norm2d(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Per-channel normalization of ``[N, C, H, W]``."""
    return _batch_norm(node, children=children, parameters=parameters, dims=(4,))


class _TrailingNorm(_Kernel):
    """Shared by LayerNorm and RMSNorm: statistics over the trailing ``normalized_shape``."""

    __slots__ = ("axes", "bias", "eps", "shape", "weight")

    def __init__(
        self, node: Node, shape: tuple[int, ...], eps: float | None, weight: Array | None, bias: Array | None
    ) -> None:
        super().__init__(node)
        self.shape, self.eps, self.weight, self.bias = shape, eps, weight, bias
        self.axes = tuple(range(-len(shape), 0))

    def checked(self, inputs: Mapping[str, Any]) -> Array:
        x = self.floating(inputs)
        if x.ndim < len(self.shape) or x.shape[x.ndim - len(self.shape) :] != self.shape:
            raise self.fail(f"x of shape {list(x.shape)} does not end in normalized_shape {list(self.shape)}")
        return x

    def affine(self, y: Array, x: Array) -> dict[str, Array]:
        if self.weight is not None:
            y = y * _like(self.weight, x)
        if self.bias is not None:
            y = y + _like(self.bias, x)
        return {"y": y}


class _LayerNorm(_TrailingNorm):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.checked(inputs)
        mean, var = x.mean(axis=self.axes, keepdims=True), x.var(axis=self.axes, keepdims=True)
        assert self.eps is not None  # LayerNorm's eps is never null
        return self.affine(_normalize(x, mean, var, self.eps), x)


def _normalized_shape(slots: _Slots) -> tuple[int, ...]:
    value = slots.raw("normalized_shape", None, True)
    if not isinstance(value, (list, tuple)) or not value or not all(_is_int(v) and v >= 1 for v in value):
        raise slots.error(f"normalized_shape must be a non-empty list of ints ≥ 1, got {value!r}")
    return tuple(int(v) for v in value)


@implements("LayerNorm")
def layer_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Normalization over the trailing ``normalized_shape`` by its mean and biased variance."""
    slots = _Slots(node, parameters)
    shape = _normalized_shape(slots)
    eps = slots.number("eps", 1e-5)
    weight, bias = _affine(slots, "elementwise_affine", shape, "normalized_shape", bias_optional=True)
    return _LayerNorm(node, shape, eps, weight, bias)


class _RMSNorm(_TrailingNorm):
    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.checked(inputs)
        eps = np.finfo(x.dtype).eps if self.eps is None else self.eps  # null: the dtype's epsilon
        mean_square = np.mean(x * x, axis=self.axes, keepdims=True)
        return self.affine(x * (1 / np.sqrt(mean_square + eps)), x)


@implements("RMSNorm")
def rms_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``x / √(mean(x²) + eps) · weight`` over the trailing ``normalized_shape``."""
    slots = _Slots(node, parameters)
    shape = _normalized_shape(slots)
    eps = slots.optional_number("eps")
    enabled = slots.flag("elementwise_affine", True)
    weight = slots.optional("weight", shape, "normalized_shape")
    if enabled != (weight is not None):
        raise slots.error(
            f"elementwise_affine is {str(enabled).lower()}, yet weight is {'absent' if enabled else 'present'}"
        )
    return _RMSNorm(node, shape, eps, weight, None)


class _GroupNorm(_Kernel):
    __slots__ = ("bias", "channels", "eps", "groups", "weight")

    def __init__(
        self, node: Node, channels: int, groups: int, eps: float, weight: Array | None, bias: Array | None
    ) -> None:
        super().__init__(node)
        self.channels, self.groups, self.eps, self.weight, self.bias = channels, groups, eps, weight, bias

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = self.floating(inputs)
        if x.ndim < 2 or x.shape[1] != self.channels:
            raise self.fail(f"x should be [N, {self.channels}, *], got shape {list(x.shape)}")
        # [N, G, C/G · ∏*]: a group's channels are consecutive, so each row is one (n, g) group.
        grouped = x.reshape(x.shape[0], self.groups, self.channels // self.groups * math.prod(x.shape[2:]))
        mean, var = grouped.mean(axis=-1, keepdims=True), grouped.var(axis=-1, keepdims=True)
        y = _normalize(grouped, mean, var, self.eps).reshape(x.shape)
        shape = (-1, *([1] * (x.ndim - 2)))  # per channel, broadcast over N and *
        if self.weight is not None:
            y = y * _like(self.weight, x).reshape(shape)
        if self.bias is not None:
            y = y + _like(self.bias, x).reshape(shape)
        return {"y": y}


@implements("GroupNorm")
def group_norm(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Normalization of each sample's groups of consecutive channels."""
    slots = _Slots(node, parameters)
    groups = slots.integer("num_groups", minimum=1)
    channels = slots.integer("num_channels", minimum=1)
    if channels % groups:
        raise slots.error(f"num_groups = {groups} must divide num_channels = {channels}")
    eps = slots.number("eps", 1e-5)
    weight, bias = _affine(slots, "affine", (channels,), "[num_channels]", bias_optional=False)
    return _GroupNorm(node, channels, groups, eps, weight, bias)


# --- Embedding, dropout and shape helpers ---------------------------------------------------


class _Embedding(_Kernel):
    __slots__ = ("max_norm", "norm_type", "weight")

    def __init__(self, node: Node, weight: Array, max_norm: float | None, norm_type: float) -> None:
        super().__init__(node)
        self.weight, self.max_norm, self.norm_type = weight, max_norm, norm_type

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = np.asarray(inputs["x"])
        if x.dtype.kind not in "iu":
            raise TypeError(f"{self.where}: x must be an integer array, got dtype {x.dtype}")
        rows = self.weight.shape[0]
        if x.size and (x.min() < 0 or x.max() >= rows):  # numpy would wrap negative indices
            raise self.fail(f"indices must lie in [0, {rows}), got values from {x.min()} to {x.max()}")
        y = self.weight[x]
        if self.max_norm is not None:
            y = self._renormed(y)
        return {"y": y}

    def _renormed(self, y: Array) -> Array:
        """Rows whose norm exceeds ``max_norm`` scaled by ``max_norm / (norm + 1e-7)``, as
        torch's ``embedding_renorm_``: the norm in the weight's dtype, the factor in double
        precision and rounded to that dtype once."""
        assert self.max_norm is not None
        norm = np.linalg.norm(y, ord=self.norm_type, axis=-1, keepdims=True)
        factor = (self.max_norm / (norm.astype(np.float64) + 1e-7)).astype(y.dtype)
        return np.where(norm > self.max_norm, y * factor, y)


@implements("Embedding")
def embedding(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = weight[x]``; ``padding_idx``, ``scale_grad_by_freq`` and ``sparse`` only affect
    training, but ``padding_idx`` is still checked, as torch checks it."""
    slots = _Slots(node, parameters)
    rows = slots.integer("num_embeddings", minimum=1)
    weight = slots.array("weight", (rows, slots.integer("embedding_dim")), "[num_embeddings, embedding_dim]")
    padding_idx = slots.optional_integer("padding_idx")
    if padding_idx is not None and padding_idx >= rows:
        raise slots.error(f"padding_idx = {padding_idx} must be below num_embeddings = {rows}")
    max_norm = slots.optional_number("max_norm")
    norm_type = slots.number("norm_type", 2.0)
    slots.flag("scale_grad_by_freq", False)
    slots.flag("sparse", False)
    return _Embedding(node, weight, max_norm, norm_type)


class _Pass(_Kernel):
    """``y = x``: the value itself, not a copy (values in a trama graph are never modified)."""

    __slots__ = ()

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": inputs["x"]}


@implements("Dropout")
def dropout(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """The identity (the catalog specifies eval mode); ``p`` is still checked."""
    slots = _Slots(node, parameters)
    p = slots.number("p", 0.5)
    if not 0.0 <= p <= 1.0:
        raise slots.error(f"p must lie in [0, 1], got {p}")
    return _Pass(node)


@implements("Identity")
def identity(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """``y = x``; like ``torch.nn.Identity``, any slots are ignored."""
    return _Pass(node)


class _Flatten(_Kernel):
    __slots__ = ("end", "start")

    def __init__(self, node: Node, start: int, end: int) -> None:
        super().__init__(node)
        self.start, self.end = start, end

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Array]:
        x = np.asarray(inputs["x"])
        rank = max(x.ndim, 1)  # torch treats a 0-d tensor as 1-d here: flattening gives [1]
        start = self.start + rank if self.start < 0 else self.start
        end = self.end + rank if self.end < 0 else self.end
        if not (0 <= start < rank and 0 <= end < rank):
            raise self.fail(f"start_dim {self.start} or end_dim {self.end} is out of range for shape {list(x.shape)}")
        if start > end:
            raise self.fail(f"start_dim {self.start} comes after end_dim {self.end} for shape {list(x.shape)}")
        shape = x.shape or (1,)
        return {"y": x.reshape(*shape[:start], math.prod(shape[start : end + 1]), *shape[end + 1 :])}


@implements("Flatten")
def flatten(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Kernel:
    """Dimensions ``start_dim … end_dim`` merged into one, in C order."""
    slots = _Slots(node, parameters)
    start, end = _signed(slots, "start_dim", 1), _signed(slots, "end_dim", -1)
    if start >= 0 and end >= 0 and start > end:
        raise slots.error(f"start_dim = {start} comes after end_dim = {end}")
    return _Flatten(node, start, end)


def _signed(slots: _Slots, slot: str, default: int) -> int:
    value = slots.raw(slot, default, False)
    if not _is_int(value):
        raise slots.error(f"{slot} must be an int, got {value!r}")
    return int(value)
