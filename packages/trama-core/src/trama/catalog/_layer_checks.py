"""The settings checks of the catalog's layers (:mod:`trama.catalog.layers`).

Rules are data, one per setting slot, with the catalog's defaults; the relations check what
ties settings together and to the tensors: ``groups`` divides both channel counts, ``"same"``
padding needs every stride 1, a weight has the shape its settings give it, the affine flags
agree with the presence of γ and β. A convolution's checked settings add ``pads``, its
``(before, after)`` padding per spatial dimension whatever form ``padding`` took, and a pool's
``stride`` is the kernel size where the document says ``null``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trama.catalog._geometry import PAD_MODES
from trama.catalog._limits import MAX_ELEMENTS, extent_problem
from trama.catalog._reader import (
    Checker,
    Choice,
    Flag,
    Integer,
    IntList,
    Number,
    Reader,
    Relation,
    RequiredList,
    Rule,
    is_int,
)

__all__ = ["CHECKERS", "bounded_output_size", "pool_rules", "pool_windows"]


# --- Dense maps ---------------------------------------------------------------------------


def _linear(reader: Reader) -> None:
    out, features = reader.values["out_features"], reader.values["in_features"]
    reader.tensor("weight", (out, features), "[out_features, in_features]")
    reader.optional_tensor("bias", (out,), "[out_features]")


def _bilinear(reader: Reader) -> None:
    values = reader.values
    out = values["out_features"]
    shape = (out, values["in1_features"], values["in2_features"])
    reader.tensor("weight", shape, "[out_features, in1_features, in2_features]")
    reader.optional_tensor("bias", (out,), "[out_features]")


# --- Convolutions -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConvPadding:
    """A convolution's ``padding``: ``dims`` ints ≥ 0, ``"valid"`` or ``"same"`` (kept as the
    string: :func:`_pads` resolves it once the strides are known)."""

    dims: int
    nullable: bool = False

    @property
    def default(self) -> list[int]:
        return [0] * self.dims

    def read(self, reader: Reader, slot: str) -> tuple[int, ...] | str:
        value = reader.raw(slot, self.default)
        if value in ("valid", "same"):
            return str(value)
        if isinstance(value, str):
            raise reader.error(f'{slot} must be a list of {self.dims} ints, "valid" or "same", got {value!r}')
        return tuple(IntList(self.dims, minimum=0, default=self.default, window=True).read(reader, slot) or ())

    def types(self) -> tuple[str, ...]:
        return ("list", "string")


def _pads(reader: Reader) -> None:
    """``pads``: ``"valid"`` is none, ``"same"`` (every stride 1) pads each dimension by
    ``t = dilation·(kernel − 1)``, ``t // 2`` before and the rest after."""
    values = reader.values
    padding, stride = values["padding"], values["stride"]
    if padding == "valid":
        pads = tuple((0, 0) for _ in stride)
    elif padding == "same":
        if any(s != 1 for s in stride):
            raise reader.error(f'padding "same" needs every stride to be 1, got {list(stride)}')
        totals = [d * (k - 1) for k, d in zip(values["kernel_size"], values["dilation"], strict=True)]
        pads = tuple((t // 2, t - t // 2) for t in totals)
    else:
        pads = tuple((p, p) for p in padding)
    values["pads"] = pads


def _grouped_channels(reader: Reader) -> None:
    groups, in_channels, out_channels = (reader.values[k] for k in ("groups", "in_channels", "out_channels"))
    if in_channels % groups or out_channels % groups:
        raise reader.error(
            f"groups = {groups} must divide in_channels = {in_channels} and out_channels = {out_channels}"
        )


def _conv_weights(reader: Reader) -> None:
    values = reader.values
    out_channels = values["out_channels"]
    shape = (out_channels, values["in_channels"] // values["groups"], *values["kernel_size"])
    reader.tensor("weight", shape, "[out_channels, in_channels / groups, *kernel_size]")
    reader.optional_tensor("bias", (out_channels,), "[out_channels]")


def _geometry(dims: int, *, transposed: bool) -> dict[str, Rule]:
    ones, zeros = [1] * dims, [0] * dims
    rules: dict[str, Rule] = {
        "in_channels": Integer(minimum=1),
        "out_channels": Integer(minimum=1),
        "kernel_size": IntList(dims, minimum=1, window=True),
        "stride": IntList(dims, minimum=1, default=ones, window=True),
        "padding": IntList(dims, minimum=0, default=zeros, window=True) if transposed else ConvPadding(dims),
    }
    if transposed:
        rules["output_padding"] = IntList(dims, minimum=0, default=zeros, window=True)
    rules["dilation"] = IntList(dims, minimum=1, default=ones, window=True)
    rules["groups"] = Integer(minimum=1, default=1)
    rules["padding_mode"] = Choice(("zeros",) if transposed else tuple(PAD_MODES), default="zeros")
    return rules


def _conv(dims: int) -> Checker:
    return Checker(_geometry(dims, transposed=False), (_pads, _grouped_channels, _conv_weights))


def _output_padding(reader: Reader) -> None:
    """torch's rule: an output padding smaller than the stride or the dilation."""
    values = reader.values
    for d, (extra, stride, dilation) in enumerate(
        zip(values["output_padding"], values["stride"], values["dilation"], strict=True)
    ):
        if extra >= max(stride, dilation):
            raise reader.error(
                f"output_padding[{d}] = {extra} must be smaller than stride[{d}] = {stride} "
                f"or dilation[{d}] = {dilation}"
            )


def _transposed_weights(reader: Reader) -> None:
    values = reader.values
    out_channels = values["out_channels"]
    shape = (values["in_channels"], out_channels // values["groups"], *values["kernel_size"])
    reader.tensor("weight", shape, "[in_channels, out_channels / groups, *kernel_size]")
    reader.optional_tensor("bias", (out_channels,), "[out_channels]")


# --- Pooling ------------------------------------------------------------------------------


def pool_rules(dims: int, *, dilation: bool) -> dict[str, Rule]:
    """The window settings of a ``dims``-d pool (``MaxPool2d``, and opset 2's 1-d and 3-d ones)."""
    rules: dict[str, Rule] = {
        "kernel_size": IntList(dims, minimum=1, window=True),
        "stride": IntList(dims, minimum=1, nullable=True, default=None, window=True),
        "padding": IntList(dims, minimum=0, default=[0] * dims, window=True),
    }
    if dilation:
        rules["dilation"] = IntList(dims, minimum=1, default=[1] * dims, window=True)
    rules["ceil_mode"] = Flag(default=False)
    return rules


def pool_windows(reader: Reader) -> None:
    """A ``null`` stride is the kernel size; padding is at most half the kernel, as torch says."""
    values = reader.values
    if values["stride"] is None:
        values["stride"] = values["kernel_size"]
    for d, (padding, kernel) in enumerate(zip(values["padding"], values["kernel_size"], strict=True)):
        if 2 * padding > kernel:
            raise reader.error(f"padding[{d}] = {padding} must be at most half of kernel_size[{d}] = {kernel}")


@dataclass(frozen=True, slots=True)
class OutputSize(RequiredList):
    """``AdaptiveAvgPool2d``'s ``output_size``: 2 entries, each an int ≥ 1 or ``null`` (that
    dimension keeps its input size)."""

    def read(self, reader: Reader, slot: str) -> tuple[int | None, ...]:
        value = reader.raw(slot)
        if (
            not isinstance(value, (list, tuple))
            or len(value) != 2
            or not all(v is None or (is_int(v) and v >= 1) for v in value)
        ):
            raise reader.error(f"{slot} must be a list of 2 entries, each an int ≥ 1 or null, got {value!r}")
        return tuple(None if v is None else int(v) for v in value)


def bounded_output_size(reader: Reader) -> None:
    """An adaptive pool's ``output_size`` holds at most 2**48 elements (``null``, the input's
    size, counts as 1): a pool computes every output position."""
    problem = extent_problem((size or 1 for size in reader.values["output_size"]), limit=MAX_ELEMENTS)
    if problem is not None:
        raise reader.error(f"output_size: {problem}")


# --- Normalization ------------------------------------------------------------------------


def _affine(flag: str, shape_of: str, what: str, *, bias_optional: bool) -> Relation:
    """γ and β of a normalization, held against the flag that says whether they exist.

    The slots are the truth (the catalog's convention) and the flag must agree with them; only
    β may be absent while the flag is true where torch has ``bias=False`` (``bias_optional``).
    """

    def check(reader: Reader) -> None:
        enabled = reader.values[flag]
        shape = _shape(reader.values[shape_of])
        weight = reader.optional_tensor("weight", shape, what)
        bias = reader.optional_tensor("bias", shape, what)
        if not enabled and (weight is not None or bias is not None):
            raise reader.error(f"{flag} is false, yet the node has {'weight' if weight is not None else 'bias'}")
        if enabled and weight is None:
            raise reader.error(f"{flag} is true, yet the node has no weight")
        if enabled and bias is None and not bias_optional:
            raise reader.error(f"{flag} is true, yet the node has no bias")

    return check


def _shape(value: int | Sequence[int]) -> tuple[int, ...]:
    """A per-channel shape from a channel count, or a normalized shape as it is."""
    return (value,) if isinstance(value, int) else tuple(value)


def _running_statistics(reader: Reader) -> None:
    """Both running statistics or neither; present whenever ``track_running_stats`` is true
    (a node may still carry them with the flag false: torch uses them then, as it does), and
    ``num_batches_tracked`` with them, as the spec says and torch's state needs (its shape is
    not checked and no kernel reads it: it matters in training only)."""
    channels = (reader.values["num_features"],)
    mean = reader.optional_tensor("running_mean", channels, "[num_features]")
    var = reader.optional_tensor("running_var", channels, "[num_features]")
    if (mean is None) != (var is None):
        raise reader.error("running_mean and running_var must be both present or both absent")
    if reader.values["track_running_stats"] and mean is None:
        raise reader.error("track_running_stats is true, yet the node has no running_mean and running_var")
    reader.flagged_tensor("num_batches_tracked", mean is not None, None, read=False)


def _batch_norm() -> Checker:
    rules: dict[str, Rule] = {
        "num_features": Integer(minimum=1),
        "eps": Number(default=1e-5),
        "momentum": Number(default=0.1, nullable=True),
        "affine": Flag(default=True),
        "track_running_stats": Flag(default=True),
    }
    return Checker(
        rules, (_affine("affine", "num_features", "[num_features]", bias_optional=False), _running_statistics)
    )


def _rms_weight(reader: Reader) -> None:
    enabled = reader.values["elementwise_affine"]
    weight = reader.optional_tensor("weight", reader.values["normalized_shape"], "normalized_shape")
    if enabled != (weight is not None):
        raise reader.error(
            f"elementwise_affine is {str(enabled).lower()}, yet weight is {'absent' if enabled else 'present'}"
        )


def _groups_divide_channels(reader: Reader) -> None:
    groups, channels = reader.values["num_groups"], reader.values["num_channels"]
    if channels % groups:
        raise reader.error(f"num_groups = {groups} must divide num_channels = {channels}")


_NORMALIZED_SHAPE = IntList(minimum=1, non_empty=True)


# --- Embedding, dropout and shape helpers -------------------------------------------------


def _embedding(reader: Reader) -> None:
    rows = reader.values["num_embeddings"]
    reader.tensor("weight", (rows, reader.values["embedding_dim"]), "[num_embeddings, embedding_dim]")
    padding_idx = reader.values["padding_idx"]
    if padding_idx is not None and padding_idx >= rows:
        raise reader.error(f"padding_idx = {padding_idx} must be below num_embeddings = {rows}")


def _probability(reader: Reader) -> None:
    p = reader.values["p"]
    if not 0.0 <= p <= 1.0:
        raise reader.error(f"p must lie in [0, 1], got {p}")


def _dims_in_order(reader: Reader) -> None:
    """Two non-negative dimensions must come in order; with a negative one that depends on the
    input's rank, which the kernel knows."""
    start, end = reader.values["start_dim"], reader.values["end_dim"]
    if start >= 0 and end >= 0 and start > end:
        raise reader.error(f"start_dim = {start} comes after end_dim = {end}")


_DENSE_OUT = Integer()

CHECKERS: dict[str, Checker] = {
    "Linear": Checker({"in_features": Integer(), "out_features": _DENSE_OUT}, (_linear,)),
    "Bilinear": Checker(
        {"in1_features": Integer(), "in2_features": Integer(), "out_features": _DENSE_OUT}, (_bilinear,)
    ),
    "Conv1d": _conv(1),
    "Conv2d": _conv(2),
    "ConvTranspose2d": Checker(
        _geometry(2, transposed=True), (_output_padding, _grouped_channels, _transposed_weights)
    ),
    "MaxPool2d": Checker(pool_rules(2, dilation=True), (pool_windows,)),
    "AvgPool2d": Checker(
        {
            **pool_rules(2, dilation=False),
            "count_include_pad": Flag(default=True),
            "divisor_override": Integer(minimum=1, nullable=True, default=None),
        },
        (pool_windows,),
    ),
    "AdaptiveAvgPool2d": Checker({"output_size": OutputSize()}, (bounded_output_size,)),
    "BatchNorm1d": _batch_norm(),
    "BatchNorm2d": _batch_norm(),
    "LayerNorm": Checker(
        {"normalized_shape": _NORMALIZED_SHAPE, "eps": Number(default=1e-5), "elementwise_affine": Flag(default=True)},
        (_affine("elementwise_affine", "normalized_shape", "normalized_shape", bias_optional=True),),
    ),
    "GroupNorm": Checker(
        {
            "num_groups": Integer(minimum=1),
            "num_channels": Integer(minimum=1),
            "eps": Number(default=1e-5),
            "affine": Flag(default=True),
        },
        (_groups_divide_channels, _affine("affine", "num_channels", "[num_channels]", bias_optional=True)),
    ),
    "RMSNorm": Checker(
        {
            "normalized_shape": _NORMALIZED_SHAPE,
            "eps": Number(nullable=True, default=None),
            "elementwise_affine": Flag(default=True),
        },
        (_rms_weight,),
    ),
    "Embedding": Checker(
        {
            "num_embeddings": Integer(minimum=1),
            "embedding_dim": Integer(),
            "padding_idx": Integer(nullable=True, default=None),
            "max_norm": Number(nullable=True, default=None),
            "norm_type": Number(default=2.0),
            "scale_grad_by_freq": Flag(default=False),
            "sparse": Flag(default=False),
        },
        (_embedding,),
    ),
    "Dropout": Checker({"p": Number(default=0.5)}, (_probability,)),
    "Identity": Checker(),
    "Flatten": Checker(
        {"start_dim": Integer(minimum=None, default=1), "end_dim": Integer(minimum=None, default=-1)},
        (_dims_in_order,),
    ),
}
