"""Conformance cases of the catalog's layer_functions ops (merged into ``conformance_cases.CASES``).

The function forms take their weights on ports, so every case draws where each weight comes from:
a ``constant`` node (what a capture writes for a model's parameter) or a model input (a weight
computed at run time, as ConvNeXt's and timm's layers may hand over), and whether each optional
port (``bias``, γ, β) is connected at all. Settings and shapes follow the module cases of
``conformance_cases.py`` (whose helpers this module cannot import: that module imports this one),
with the same conditioning: float32 standard normal values, weights scaled by 1/√fan-in, variances
away from 0, at least two values per normalized group.

``padding="same"`` is drawn only where each dimension's total padding ``dilation·(k − 1)`` is
even: otherwise torch warns that it copies the input (a ``UserWarning`` about its own performance,
which the suite's ``filterwarnings = error`` would turn into a failure); the uneven split is
covered by the unit tests of every framework.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from conformance_support import Case, Tolerance
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn

__all__ = ["CASES", "TOLERANCES"]

Draw: TypeAlias = DrawFn
Shape: TypeAlias = tuple[int, ...]


# --- Values and placement -------------------------------------------------------------------------


def _rng(draw: Draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _floats(gen: np.random.Generator, shape: Shape, scale: float = 1.0) -> np.ndarray:
    return np.asarray(gen.standard_normal(shape) * scale, dtype=np.float32)


def _weight(gen: np.random.Generator, shape: Shape, fan_in: int) -> np.ndarray:
    return _floats(gen, shape, 1.0 / max(fan_in, 1) ** 0.5)


def _near_one(gen: np.random.Generator, shape: Shape) -> np.ndarray:
    return (1 + _floats(gen, shape, 0.3)).astype(np.float32)


def _lead(draw: Draw, max_rank: int = 2) -> Shape:
    return tuple(draw(st.lists(st.integers(1, 3), max_size=max_rank)))


def _ints(draw: Draw, count: int, low: int, high: int) -> list[int]:
    return [draw(st.integers(low, high)) for _ in range(count)]


def _case(
    draw: Draw, op: str, inputs: dict[str, Any], weights: dict[str, Any | None], slots: dict[str, Any] | None = None
) -> Case:
    """A case whose ``weights`` (by port; ``None``: unconnected) each come from a ``constant`` node
    or a model input, as drawn."""
    constants: dict[str, Any] = {}
    for port, value in weights.items():
        if value is None:
            continue
        if draw(st.booleans()):
            constants[port] = value
        else:
            inputs[port] = value
    return Case(op, inputs, slots or {}, constants=constants)


def _maybe(draw: Draw, value: Any) -> Any | None:
    """An optional port's value, or ``None`` (unconnected) one time in three."""
    return None if draw(st.integers(0, 2)) == 0 else value


def _optional(draw: Draw, slots: dict[str, Any], name: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        slots[name] = draw(strategy)


# --- Dense maps -----------------------------------------------------------------------------------


@st.composite
def linear(draw: Draw) -> Case:
    gen = _rng(draw)
    n_in, n_out = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    x = _floats(gen, (*_lead(draw), n_in))
    weights = {"weight": _weight(gen, (n_out, n_in), n_in), "bias": _maybe(draw, _weight(gen, (n_out,), n_in))}
    return _case(draw, "linear", {"x": x}, weights)


@st.composite
def bilinear(draw: Draw) -> Case:
    gen = _rng(draw)
    n1, n2, n_out = (draw(st.integers(1, 4)) for _ in range(3))
    lead = _lead(draw)
    inputs = {"input1": _floats(gen, (*lead, n1)), "input2": _floats(gen, (*lead, n2))}
    weights = {"weight": _weight(gen, (n_out, n1, n2), n1), "bias": _maybe(draw, _weight(gen, (n_out,), n1))}
    return _case(draw, "bilinear", inputs, weights)


@st.composite
def addmm(draw: Draw) -> Case:
    """Every broadcast form of ``input`` (a bias row, a column, a scalar, the whole matrix), the
    scale factors (ints and floats), and ``beta`` 0 with NaN in ``input``, which must not show."""
    gen = _rng(draw)
    n, m, p = draw(st.integers(1, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
    shape = draw(st.sampled_from([(p,), (n, p), (1, p), (n, 1), ()]))
    addend = _floats(gen, shape)
    slots: dict[str, Any] = {}
    _optional(draw, slots, "beta", st.sampled_from([0, 1, 0.5, -2.0, 3]))
    _optional(draw, slots, "alpha", st.sampled_from([1, 0.5, -1.5, 2]))
    if slots.get("beta") == 0 and addend.size:
        addend.flat[0] = np.nan
    inputs = {"mat1": _floats(gen, (n, m)), "mat2": _weight(gen, (m, p), m)}
    return _case(draw, "addmm", inputs, {"input": addend}, slots)


# --- Convolutions ---------------------------------------------------------------------------------


def _conv_shapes(
    draw: Draw, spatial: int, *, modes: bool
) -> tuple[dict[str, Any], list[int], list[int], list[int], int, int, int, list[tuple[int, int]], list[int]]:
    """Settings of a convolution (``modes``: also ``padding_mode``), and what the case needs:
    kernel, stride, dilation, groups, channels in and out, the padding per side, input sizes."""
    groups = draw(st.integers(1, 3))
    c_in, c_out = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel, dilation = _ints(draw, spatial, 1, 3), _ints(draw, spatial, 1, 2)
    even = all(d * (k - 1) % 2 == 0 for k, d in zip(kernel, dilation, strict=True))
    kinds = ["list", "list", "valid", *(["same"] if even else [])]
    kind = draw(st.sampled_from(kinds))
    stride = [1] * spatial if kind == "same" else _ints(draw, spatial, 1, 2)
    padding: Any
    if kind == "list":
        padding = _ints(draw, spatial, 0, 2)
        pads = [(p, p) for p in padding]
    elif kind == "valid":
        padding, pads = "valid", [(0, 0)] * spatial
    else:
        padding = "same"
        pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation, strict=True)]
    sizes = []
    for (low, high), k, d in zip(pads, kernel, dilation, strict=True):
        least = max(d * (k - 1) + 1 - low - high, max(low, high) + 1, 1)
        sizes.append(draw(st.integers(least, least + (2 if spatial == 3 else 3))))
    slots: dict[str, Any] = {}
    if stride != [1] * spatial or draw(st.booleans()):
        slots["stride"] = stride
    if kind != "list" or padding != [0] * spatial or draw(st.booleans()):
        slots["padding"] = padding
    if dilation != [1] * spatial or draw(st.booleans()):
        slots["dilation"] = dilation
    if groups != 1 or draw(st.booleans()):
        slots["groups"] = groups
    if modes:
        mode = draw(st.sampled_from(["zeros", "zeros", "reflect", "replicate", "circular"]))
        if mode != "zeros" or draw(st.booleans()):
            slots["padding_mode"] = mode
    return slots, kernel, stride, dilation, groups, c_in, c_out, pads, sizes


def conv_function(spatial: int) -> st.SearchStrategy[Case]:
    """``conv1d``/``conv2d``/``conv3d``: groups, strides, dilations, every padding form, batched or
    not, the weights from constants or inputs, with or without bias."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        slots, kernel, _, _, groups, c_in, c_out, _, sizes = _conv_shapes(draw, spatial, modes=False)
        fan_in = c_in // groups * int(np.prod(kernel))
        batch = draw(st.sampled_from([(), (1,), (2,)]))
        weights = {
            "weight": _weight(gen, (c_out, c_in // groups, *kernel), fan_in),
            "bias": _maybe(draw, _weight(gen, (c_out,), fan_in)),
        }
        return _case(draw, f"conv{spatial}d", {"x": _floats(gen, (*batch, c_in, *sizes))}, weights, slots)

    return strategy()


@st.composite
def conv3d_module(draw: Draw) -> Case:
    """``Conv3d``: the module's slots, every padding form and mode."""
    gen = _rng(draw)
    slots, kernel, _, _, groups, c_in, c_out, _, sizes = _conv_shapes(draw, 3, modes=True)
    fan_in = c_in // groups * int(np.prod(kernel))
    slots.update(
        in_channels=c_in,
        out_channels=c_out,
        kernel_size=kernel,
        weight=_weight(gen, (c_out, c_in // groups, *kernel), fan_in),
    )
    choice = draw(st.sampled_from(["present", "null", "absent"]))
    if choice != "absent":
        slots["bias"] = _weight(gen, (c_out,), fan_in) if choice == "present" else None
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    return Case("Conv3d", {"x": _floats(gen, (*batch, c_in, *sizes))}, slots)


def _transposed_shapes(draw: Draw, spatial: int) -> tuple[dict[str, Any], list[int], int, int, int, list[int]]:
    groups = draw(st.integers(1, 2))
    c_in, c_out = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel, stride = _ints(draw, spatial, 1, 3), _ints(draw, spatial, 1, 2)
    dilation, padding = _ints(draw, spatial, 1, 2), _ints(draw, spatial, 0, 1)
    output_padding = [draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation, strict=True)]
    sizes = []
    for d in range(spatial):
        least = 1
        while (least - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel[d] - 1) + output_padding[d] + 1 < 1:
            least += 1
        sizes.append(draw(st.integers(least, least + 2)))
    slots: dict[str, Any] = {}
    for name, value, neutral in (
        ("stride", stride, 1),
        ("padding", padding, 0),
        ("output_padding", output_padding, 0),
        ("dilation", dilation, 1),
    ):
        if value != [neutral] * spatial or draw(st.booleans()):
            slots[name] = value
    if groups != 1 or draw(st.booleans()):
        slots["groups"] = groups
    return slots, kernel, groups, c_in, c_out, sizes


def conv_transpose_function(spatial: int) -> st.SearchStrategy[Case]:
    """``conv_transpose1d``/``2d``: strides, paddings, output paddings below stride or dilation,
    dilations and groups, with input sizes whose output has at least one position."""

    @st.composite
    def strategy(draw: Draw) -> Case:
        gen = _rng(draw)
        slots, kernel, groups, c_in, c_out, sizes = _transposed_shapes(draw, spatial)
        weights = {
            "weight": _weight(gen, (c_in, c_out // groups, *kernel), c_in),
            "bias": _maybe(draw, _weight(gen, (c_out,), c_in)),
        }
        batch = draw(st.sampled_from([(), (1,), (2,)]))
        x = _floats(gen, (*batch, c_in, *sizes))
        return _case(draw, f"conv_transpose{spatial}d", {"x": x}, weights, slots)

    return strategy()


@st.composite
def conv_transpose1d_module(draw: Draw) -> Case:
    gen = _rng(draw)
    slots, kernel, groups, c_in, c_out, sizes = _transposed_shapes(draw, 1)
    slots.update(
        in_channels=c_in,
        out_channels=c_out,
        kernel_size=kernel,
        weight=_weight(gen, (c_in, c_out // groups, *kernel), c_in),
    )
    if draw(st.booleans()):
        slots["padding_mode"] = "zeros"
    if draw(st.booleans()):
        slots["bias"] = _weight(gen, (c_out,), c_in)
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    return Case("ConvTranspose1d", {"x": _floats(gen, (*batch, c_in, *sizes))}, slots)


# --- Normalization --------------------------------------------------------------------------------


@st.composite
def batch_norm(draw: Draw) -> Case:
    """Running statistics on ports (``training`` false), or the batch's (``training`` true, over at
    least two values per channel); ranks 2 to 5; γ and β each connected or not."""
    gen = _rng(draw)
    channels = draw(st.integers(1, 4))
    training = draw(st.booleans())
    spatial = _ints(draw, draw(st.integers(0, 3)), 1, 3)
    n = draw(st.integers(2 if training and not spatial else 1, 3))
    if training and n * int(np.prod(spatial)) < 2:
        spatial = [*spatial[:-1], 2]
    slots: dict[str, Any] = {}
    if training or draw(st.booleans()):
        slots["training"] = training
    _optional(draw, slots, "momentum", st.floats(0.01, 0.5))
    _optional(draw, slots, "eps", st.floats(1e-5, 1e-2))
    weights: dict[str, Any] = {"weight": _maybe(draw, _near_one(gen, (channels,)))}
    weights["bias"] = _maybe(draw, _floats(gen, (channels,), 0.3))
    if not training:
        weights["running_mean"] = _floats(gen, (channels,), 0.5)
        weights["running_var"] = gen.uniform(0.5, 2.0, channels).astype(np.float32)
    return _case(draw, "batch_norm", {"x": _floats(gen, (n, channels, *spatial))}, weights, slots)


@st.composite
def batch_norm3d(draw: Draw) -> Case:
    """``BatchNorm3d``: running statistics, or none (the batch's), affine or not."""
    gen = _rng(draw)
    channels = draw(st.integers(1, 3))
    track = draw(st.booleans())
    slots: dict[str, Any] = {"num_features": channels}
    _optional(draw, slots, "eps", st.floats(1e-5, 1e-2))
    _optional(draw, slots, "momentum", st.none() | st.floats(0.01, 0.5))
    affine = draw(st.booleans())
    if not affine or draw(st.booleans()):
        slots["affine"] = affine
    if affine:
        slots["weight"], slots["bias"] = _near_one(gen, (channels,)), _floats(gen, (channels,), 0.3)
    if not track or draw(st.booleans()):
        slots["track_running_stats"] = track
    if track:
        slots["running_mean"] = _floats(gen, (channels,), 0.5)
        slots["running_var"] = gen.uniform(0.5, 2.0, channels).astype(np.float32)
        slots["num_batches_tracked"] = np.array(draw(st.integers(0, 100)), dtype=np.int64)
    shape = (draw(st.integers(1 if track else 2, 2)), channels, *_ints(draw, 3, 1, 3))
    return Case("BatchNorm3d", {"x": _floats(gen, shape)}, slots)


def _normalized(draw: Draw) -> tuple[Shape, Shape]:
    normalized = tuple(_ints(draw, draw(st.integers(1, 2)), 1, 5))
    return (*_lead(draw), *normalized), normalized


@st.composite
def layer_norm(draw: Draw) -> Case:
    gen = _rng(draw)
    shape, normalized = _normalized(draw)
    slots: dict[str, Any] = {"normalized_shape": list(normalized)}
    _optional(draw, slots, "eps", st.floats(1e-6, 1e-2))
    weights = {"weight": _maybe(draw, _near_one(gen, normalized)), "bias": _maybe(draw, _floats(gen, normalized, 0.3))}
    return _case(draw, "layer_norm", {"x": _floats(gen, shape, 2.0)}, weights, slots)


@st.composite
def rms_norm(draw: Draw) -> Case:
    gen = _rng(draw)
    shape, normalized = _normalized(draw)
    slots: dict[str, Any] = {"normalized_shape": list(normalized)}
    _optional(draw, slots, "eps", st.none() | st.floats(1e-6, 1e-2))
    weights = {"weight": _maybe(draw, _near_one(gen, normalized))}
    return _case(draw, "rms_norm", {"x": _floats(gen, shape, 2.0)}, weights, slots)


@st.composite
def group_norm(draw: Draw) -> Case:
    gen = _rng(draw)
    groups = draw(st.integers(1, 3))
    channels = groups * draw(st.integers(1, 2))
    slots: dict[str, Any] = {"num_groups": groups}
    _optional(draw, slots, "eps", st.floats(1e-6, 1e-2))
    rest: Shape = tuple(_ints(draw, draw(st.integers(0, 2)), 1, 3))
    if channels // groups * int(np.prod(rest)) < 2:  # one value per group has variance 0
        rest = (*rest, 2)
    weights = {
        "weight": _maybe(draw, _near_one(gen, (channels,))),
        "bias": _maybe(draw, _floats(gen, (channels,), 0.3)),
    }
    x = _floats(gen, (draw(st.integers(1, 2)), channels, *rest), 2.0)
    return _case(draw, "group_norm", {"x": x}, weights, slots)


# --- Embedding and dropout ------------------------------------------------------------------------


@st.composite
def embedding(draw: Draw) -> Case:
    """int32 or int64 indices of any shape (empty and 0-d included), the gradient-only slots now
    and then, ``padding_idx`` negative or not."""
    gen = _rng(draw)
    rows, columns = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    slots: dict[str, Any] = {}
    _optional(draw, slots, "padding_idx", st.none() | st.integers(-rows, rows - 1))
    _optional(draw, slots, "max_norm", st.none())
    _optional(draw, slots, "norm_type", st.sampled_from([1.0, 2.0]))
    _optional(draw, slots, "scale_grad_by_freq", st.booleans())
    _optional(draw, slots, "sparse", st.booleans())
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    index = gen.integers(0, rows, size=shape).astype(draw(st.sampled_from(["int32", "int64"])))
    return _case(draw, "embedding", {"input": index}, {"weight": _floats(gen, (rows, columns))}, slots)


@st.composite
def dropout(draw: Draw) -> Case:
    gen = _rng(draw)
    slots: dict[str, Any] = {}
    _optional(draw, slots, "p", st.floats(0, 1))
    _optional(draw, slots, "training", st.booleans())
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    return Case("dropout", {"x": _floats(gen, shape)}, slots)


# --- Weight reparametrization ---------------------------------------------------------------------


@st.composite
def weight_norm(draw: Draw) -> Case:
    """``v`` of rank 1 to 4, ``dim`` −1 (the whole tensor) or any dimension counted either way, ``g``
    the norm's shape (for −1: 0-d or all ones), empty dimensions other than ``dim`` now and then."""
    gen = _rng(draw)
    rank = draw(st.integers(1, 4))
    dim = draw(st.sampled_from([-1, *range(-rank, rank)]))
    axis = None if dim == -1 else dim % rank
    shape = tuple(draw(st.integers(1 if d == axis else 0, 3)) for d in range(rank))
    if dim == -1:
        g_shape: Shape = (1,) * draw(st.integers(0, rank))
    else:
        g_shape = tuple(size if d == axis else 1 for d, size in enumerate(shape))
    slots: dict[str, Any] = {}
    if dim != 0 or draw(st.booleans()):
        slots["dim"] = dim
    weights = {"v": _floats(gen, shape), "g": _floats(gen, g_shape)}
    return _case(draw, "weight_norm", {}, weights, slots)


#: A strategy for every op of the family, by name.
CASES: dict[str, st.SearchStrategy[Case]] = {
    "linear": linear(),
    "bilinear": bilinear(),
    "addmm": addmm(),
    "conv1d": conv_function(1),
    "conv2d": conv_function(2),
    "conv3d": conv_function(3),
    "conv_transpose1d": conv_transpose_function(1),
    "conv_transpose2d": conv_transpose_function(2),
    "batch_norm": batch_norm(),
    "layer_norm": layer_norm(),
    "group_norm": group_norm(),
    "rms_norm": rms_norm(),
    "embedding": embedding(),
    "dropout": dropout(),
    "weight_norm": weight_norm(),
    "Conv3d": conv3d_module(),
    "ConvTranspose1d": conv_transpose1d_module(),
    "BatchNorm3d": batch_norm3d(),
}

#: Documented tolerance exceptions of the family's ops (each says why).
TOLERANCES: dict[str, Tolerance] = {}
