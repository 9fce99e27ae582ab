"""Catalog opset 2: the function forms of the dense, convolution, normalization and embedding layers
(``linear``, ``conv2d``, ``batch_norm``, ``layer_norm``, ``embedding``…) as ``torch.nn.functional``
calls them, ``addmm``, ``weight_norm`` (the weight a weight-norm parametrization rebuilds), and the module
variants opset 1 lacked (``Conv3d``, ``ConvTranspose1d``, ``BatchNorm3d``).

A function form takes its weights as input ports, not slots: models call ``F.linear(x, self.w)``
with tensors they hold themselves (timm's norm layers, ConvNeXt's channels-first layer norm,
GPT-2's ``Conv1D``), and a document feeds those ports from ``constant`` nodes. Their shapes are
then only known when the op runs, so the shape relations the modules' checks hold at load time
(``groups`` divides the channels, ``weight`` is ``[out, in / groups, *kernel]``) are checked by
the kernels, with the same rules. The settings checks live in
:mod:`trama.catalog._layer_functions_checks`.
"""

from __future__ import annotations

import dataclasses

from trama.catalog import layers
from trama.catalog._build import hyper, op, weight
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["LAYERS", "SPECS"]

#: The opset that added this family's ops.
_SINCE = 2

#: The names docs give the spatial dimensions of a channels-first tensor with 1, 2 or 3 of them.
_SPATIAL = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}

_PORT_RULE = """
    The weights are input ports, not slots: a document feeds them from `constant` nodes (or from any
    other node), and an optional port left unconnected means torch's `None`. They must have `x`'s
    floating dtype (torch refuses a mix), and their shapes are checked against `x` and the slots
    when the op runs, an error naming the node where they do not fit.
    """


def _ints(dims: int) -> str:
    return f"{dims} int{'s' if dims > 1 else ''}"


def _eps(default: float | None = 1e-5, what: str = "the variance") -> ParameterSchema:
    return hyper("eps", "float", f"Added to {what} before the square root, for stability.", default)


# --- Dense maps ---------------------------------------------------------------------------------

_LINEAR = op(
    "linear",
    (
        """
        `y = x · weightᵀ + bias`, as `torch.nn.functional.linear`: `x` is `[*, in_features]` (at
        least one dimension; `*` any number of leading ones), `weight` is
        `[out_features, in_features]` and `bias` `[out_features]`;
        `y[…, o] = Σ_i x[…, i] · weight[o, i] + bias[o]`, of shape `[*, out_features]`. Without
        `bias` that term is 0. torch's 1-d `weight` (a dot product) is refused: write `matmul`.
        """,
        _PORT_RULE,
    ),
    inputs=("x", "weight"),
    optional_inputs=("bias",),
    since=_SINCE,
)

_BILINEAR = op(
    "bilinear",
    (
        """
        A bilinear form of two inputs, as `torch.nn.functional.bilinear`: `input1` is
        `[*, in1_features]`, `input2` `[*, in2_features]` with the same leading dimensions,
        `weight` `[out_features, in1_features, in2_features]` and `bias` `[out_features]`;
        `y[…, o] = Σ_i Σ_j input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]`, of shape
        `[*, out_features]`. Without `bias` that term is 0.
        """,
        _PORT_RULE,
    ),
    inputs=("input1", "input2", "weight"),
    optional_inputs=("bias",),
    since=_SINCE,
)

_ADDMM = op(
    "addmm",
    """
    `y = beta · input + alpha · (mat1 @ mat2)`, as `torch.addmm`: `mat1` is `[n, m]`, `mat2`
    `[m, p]`, and `input` broadcasts to `[n, p]` (a bias `[p]`, a row, a column, a scalar or a
    whole matrix); `y` is `[n, p]`. All three have one floating dtype (torch refuses a mix).
    With `beta` 0, `input` is ignored: its NaNs and infinities do not reach `y`, as in torch.
    Note the layout: GPT-2's `Conv1D` computes `addmm(bias, x, weight)` with `weight`
    `[in, out]`, the transpose of `linear`'s.
    """,
    inputs=("input", "mat1", "mat2"),
    parameters=(
        hyper("beta", "float", "The factor of `input` (an int in torch is the same number).", 1),
        hyper("alpha", "float", "The factor of the product.", 1),
    ),
    since=_SINCE,
)


# --- Convolutions -------------------------------------------------------------------------------


def _spatial(dims: int) -> tuple[str, str]:
    names = _SPATIAL[dims]
    return ", ".join(names), ", ".join(f"{axis}′" for axis in names)


def _correlation(*, kernel: str, padding: str) -> str:
    """The formula of a convolution: its padding step and its output, for a doc."""
    return f"""
        1. Padding. {padding}
        2. Groups. With `G = groups`, `C_g = C_in / G` and `O_g = C_out / G`, output channel `o`
           belongs to group `g = o // O_g` and reads input channels `g·C_g … g·C_g + C_g − 1`.
        3. Output. With `p` the padded input, for every output position `q` (one index per spatial
           dimension, arithmetic per dimension):
           `y[n, o, q] = bias[o] + Σ_(c < C_g) Σ_k p[n, g·C_g + c, q·stride + k·dilation] · weight[o, c, k]`,
           `k` running over the kernel positions. Without `bias` that term is 0. Dimension d of `y`
           has size `⌊(P_d − dilation[d]·({kernel} − 1) − 1) / stride[d]⌋ + 1`, `P_d` being the
           padded size; it must be at least 1.
        """


_SAME_PADDING = """`"valid"` means no padding. `"same"` (only with every stride 1) pads
           dimension d by `t = dilation[d]·(k_d − 1)` elements, `t // 2` at the start and the rest at
           the end, so that `y` keeps `x`'s spatial size."""


def _conv_function(dims: int) -> OpSpec:
    name = f"conv{dims}d"
    spatial, spatial_out = _spatial(dims)
    extent = "the last dimension" if dims == 1 else f"the last {dims} dimensions"
    kernel = ", ".join(f"k_{d}" for d in range(dims))
    n = _ints(dims)
    return op(
        name,
        (
            f"""
            Cross-correlation of `x` with `weight` over {extent}, as `torch.nn.functional.{name}`.
            `x` is `[N, C_in, {spatial}]`, or unbatched `[C_in, {spatial}]` (then `y` has no `N`
            either); `weight` is `[C_out, C_in / groups, {kernel}]`, its last sizes being the kernel
            extents `k_d`; `bias` is `[C_out]`. `groups` divides `C_in` and `C_out`. `y` is
            `[N, C_out, {spatial_out}]`. This is `Conv{dims}d` with `padding_mode` `"zeros"` and its
            weights as ports.
            """,
            _correlation(
                kernel="k_d",
                padding=f"Each spatial dimension d gets `padding[d]` zeros at both ends. {_SAME_PADDING}",
            ),
            _PORT_RULE,
        ),
        inputs=("x", "weight"),
        optional_inputs=("bias",),
        parameters=(
            hyper("stride", "list", f"Step between windows: {n}.", [1] * dims),
            hyper(
                "padding",
                ("list", "string"),
                f'Zeros added at each end of each spatial dimension: {n}, or `"valid"` or `"same"`.',
                [0] * dims,
            ),
            hyper("dilation", "list", f"Spacing between kernel elements: {n}.", [1] * dims),
            hyper("groups", "int", "Number of channel groups; divides both channel counts.", 1),
        ),
        since=_SINCE,
    )


_MODE_PADDING = """Each spatial dimension d gets `padding[d]` elements at both ends, valued by
           `padding_mode`: `"zeros"`; `"reflect"`, mirrored without repeating the edge element;
           `"replicate"`, the edge element repeated; `"circular"`, wrapped around."""


def _conv_module(dims: int) -> OpSpec:
    name = f"Conv{dims}d"
    spatial, spatial_out = _spatial(dims)
    kernel = ", ".join(f"kernel_size[{d}]" for d in range(dims))
    return op(
        name,
        (
            f"""
            Cross-correlation of `x` with `weight` over the last {dims} dimensions, as `torch.nn.{name}`.
            `x` is `[N, in_channels, {spatial}]`, or unbatched `[in_channels, {spatial}]` (then `y` has
            no `N` either); `y` is `[N, out_channels, {spatial_out}]`. Below, `C_in` is `in_channels`,
            `C_out` `out_channels` and `k_d` `kernel_size[d]`.
            """,
            _correlation(kernel="kernel_size[d]", padding=f"{_MODE_PADDING} {_SAME_PADDING}"),
        ),
        parameters=(
            *layers._geometry(dims),
            weight("weight", f"`[out_channels, in_channels / groups, {kernel}]`."),
            weight("bias", "`[out_channels]`. Absent: no bias.", optional=True),
        ),
        since=_SINCE,
    )


def _transposed(dims: int, *, torch_name: str, c_in: str, c_out: str, kernel: str) -> str:
    spatial, _ = _spatial(dims)
    first = _SPATIAL[dims][0]
    extent = f"dilation[0]·({kernel.format(0)} − 1)"
    sizes = f"`{first}′ = ({first} − 1)·stride[0] − 2·padding[0] + {extent} + output_padding[0] + 1`"
    if dims > 1:
        sizes += " and likewise for the other dimensions, with their index"
    return f"""
        The transpose of a convolution (its gradient with respect to its input), as `{torch_name}`.
        `x` is `[N, {c_in}, {spatial}]` or unbatched `[{c_in}, {spatial}]`; `y` is `[N, {c_out}, …]`
        with {sizes}; every size must be at least 1.

        With `C_g = {c_in} / groups` and `O_g = {c_out} / groups`, every input element is spread
        over a window of `y`: `y[n, g·O_g + o, i] = bias[g·O_g + o] + Σ x[n, g·C_g + c, h] ·
        weight[g·C_g + c, o, a]`, summed over `c < C_g` and every input position `h` and kernel
        position `a` with `h·stride + a·dilation − padding = i` (arithmetic per spatial dimension).
        Positions no input element reaches (the `output_padding` ones among them) hold the bias
        alone. `output_padding[d]` is smaller than `stride[d]` or `dilation[d]`.
        """


def _transposed_slots(dims: int) -> tuple[ParameterSchema, ...]:
    ones, zeros, n = [1] * dims, [0] * dims, _ints(dims)
    return (
        hyper("stride", "list", f"Step between the windows of `y`: {n}.", ones),
        hyper("padding", "list", f"Implicit zero padding removed from each end of `y`'s dimensions: {n}.", zeros),
        hyper("output_padding", "list", f"Extra elements at the end of `y`'s dimensions: {n}.", zeros),
        hyper("groups", "int", "Number of channel groups; divides both channel counts.", 1),
        hyper("dilation", "list", f"Spacing between kernel elements: {n}.", ones),
    )


def _conv_transpose_function(dims: int) -> OpSpec:
    name = f"conv_transpose{dims}d"
    kernel = ", ".join(f"k_{d}" for d in range(dims))
    return op(
        name,
        (
            _transposed(dims, torch_name=f"torch.nn.functional.{name}", c_in="C_in", c_out="C_out", kernel="k_{}"),
            f"""
            `weight` is `[C_in, C_out / groups, {kernel}]` (the kernel extents `k_d` are its last
            sizes) and `bias` `[C_out]`; `groups` divides `C_in`, and `C_out` is
            `groups · weight.shape[1]`. The slots come in torch's order (`groups` before
            `dilation`). torch's module argument `output_size` has no slot: an exporter resolves it
            into `output_padding`.
            """,
            _PORT_RULE,
        ),
        inputs=("x", "weight"),
        optional_inputs=("bias",),
        parameters=_transposed_slots(dims),
        since=_SINCE,
    )


def _conv_transpose_module(dims: int) -> OpSpec:
    name = f"ConvTranspose{dims}d"
    kernel = ", ".join(f"kernel_size[{d}]" for d in range(dims))
    return op(
        name,
        (
            _transposed(
                dims, torch_name=f"torch.nn.{name}", c_in="in_channels", c_out="out_channels", kernel="kernel_size[{}]"
            ),
            """
            torch's `output_size` argument to `forward` has no slot: an exporter resolves it into
            `output_padding`.
            """,
        ),
        parameters=(
            *layers._geometry(dims, transposed=True),
            weight("weight", f"`[in_channels, out_channels / groups, {kernel}]`."),
            weight("bias", "`[out_channels]`. Absent: no bias.", optional=True),
        ),
        since=_SINCE,
    )


# --- Normalization ------------------------------------------------------------------------------

_BATCH_NORM = op(
    "batch_norm",
    (
        """
        Normalizes each channel (dimension 1) of `x`, as `torch.nn.functional.batch_norm`: `x` is
        `[N, C, *]` (at least 2 dimensions) and `y` has its shape;
        `y = (x − μ[c]) / √(σ²[c] + eps) · weight[c] + bias[c]`, `weight` and `bias` `[C]` (absent:
        1 and 0). Which statistics μ and σ² are depends on `training`:

        * `training` false: the ports `running_mean` and `running_var`, `[C]`, which must both be
          connected (torch: "running_mean must be defined in evaluation mode").
        * `training` true: the batch's, the mean and the biased variance over every dimension but
          the channel, which needs more than one value per channel (torch refuses one). The
          running-statistic ports must then be unconnected: given them, torch would also update
          them in place (`running = (1 − momentum)·running + momentum·batch_stat`), a mutation a
          document cannot record. This is how torch's and timm's norm layers call it for a layer
          built without running statistics.

        `momentum` weighs that update only and never changes `y`.
        """,
        _PORT_RULE,
    ),
    eval_mode="""
    As the slots say: `training` is the call's argument, not the module's mode, and only `training`
    false reads running statistics. A norm layer in evaluation mode passes false when it has them.
    """,
    optional_inputs=("running_mean", "running_var", "weight", "bias"),
    parameters=(
        hyper("training", "bool", "Whether the batch's statistics are used (see above).", False),
        hyper("momentum", "float", "Weight of the batch statistic in torch's running update (no effect on `y`).", 0.1),
        _eps(),
    ),
    since=_SINCE,
)

_LAYER_NORM = op(
    "layer_norm",
    (
        """
        Normalizes over the last `D = len(normalized_shape)` dimensions, which must equal
        `normalized_shape`, as `torch.nn.functional.layer_norm`. For each index of the leading
        dimensions, μ and σ² are the mean and the biased variance over those D dimensions, and
        `y = (x − μ) / √(σ² + eps) · weight + bias`, `weight` and `bias` of shape
        `normalized_shape` (absent: 1 and 0), broadcast over the leading dimensions.
        """,
        _PORT_RULE,
    ),
    optional_inputs=("weight", "bias"),
    parameters=(
        hyper("normalized_shape", "list", "The sizes of the normalized trailing dimensions (ints)."),
        _eps(),
    ),
    since=_SINCE,
)

_GROUP_NORM = op(
    "group_norm",
    (
        """
        Normalizes groups of channels, as `torch.nn.functional.group_norm`. `x` is `[N, C, *]`
        with C divisible by `num_groups`; group g holds channels `g·C/G … (g + 1)·C/G − 1`. For
        each sample n and group g, μ and σ² are the mean and the biased variance over the group's
        channels and all of `*`, and `y[n, c, …] = (x[n, c, …] − μ) / √(σ² + eps) · weight[c] +
        bias[c]`, `weight` and `bias` `[C]` (absent: 1 and 0).
        """,
        _PORT_RULE,
    ),
    optional_inputs=("weight", "bias"),
    parameters=(hyper("num_groups", "int", "G, the number of groups."), _eps()),
    since=_SINCE,
)

_RMS_NORM = op(
    "rms_norm",
    (
        """
        Root-mean-square normalization over the last `D = len(normalized_shape)` dimensions, as
        `torch.nn.functional.rms_norm`: `y = x / √(mean(x²) + eps) · weight`, the mean taken over
        those D dimensions for each index of the leading ones, `weight` of shape
        `normalized_shape` (absent: 1). `eps` null means the machine epsilon of the dtype the norm
        is computed in (`x`'s own, float32 for float16 and bfloat16; 2⁻²³ for float32), as for
        `RMSNorm`.
        """,
        _PORT_RULE,
    ),
    optional_inputs=("weight",),
    parameters=(
        hyper("normalized_shape", "list", "The sizes of the normalized trailing dimensions (ints)."),
        hyper("eps", "float", "Added to the mean square.", None),
    ),
    since=_SINCE,
)


# --- Embedding and dropout ----------------------------------------------------------------------

_EMBEDDING = op(
    "embedding",
    (
        """
        A table lookup, as `torch.nn.functional.embedding`: `input` is an integer tensor (int32 or
        int64) of any shape with values in `[0, R)` for `weight` `[R, D]`, and `y = weight[input]`,
        of shape `[*input.shape, D]` and `weight`'s dtype.

        `padding_idx`, `scale_grad_by_freq` and `sparse` affect gradients only; `padding_idx` must
        still lie in `[−R, R)`, as torch requires. `max_norm` must be null: torch would rescale the
        looked-up rows of `weight` in place, a mutation of the table that a document cannot record
        (the module `Embedding` records the rescaled rows as its value); `norm_type` belongs to it
        and has no effect while it is null.
        """,
        """
        `weight` is an input port, not a slot: a document feeds it from a `constant` node (or from
        any other node), and its shape is checked when the op runs, an error naming the node where
        it does not fit. So is an index out of range, where a runtime can see the indices (JAX
        under `jit` cannot, and gives a row of NaN there, as for `Embedding`).
        """,
    ),
    inputs=("input", "weight"),
    parameters=(
        hyper("padding_idx", "int", "A row that receives no gradient (negative counts from the end).", None),
        hyper("max_norm", "float", "Must be null (see above).", None),
        hyper("norm_type", "float", "The p of the p-norm for `max_norm`.", 2.0),
        hyper("scale_grad_by_freq", "bool", "Training only.", False),
        hyper("sparse", "bool", "Training only.", False),
    ),
    since=_SINCE,
)

_DROPOUT = op(
    "dropout",
    """
    Random zeroing for regularization, as `torch.nn.functional.dropout`: with `training` true, each
    element is zeroed with probability `p` and the others are scaled by `1 / (1 − p)`; with
    `training` false, `y = x`.
    """,
    eval_mode="""
    The identity, `y = x`, whatever `training` says, as for the module `Dropout`: the catalog
    computes a model's evaluation, which has no random zeroing. `p` must still lie in [0, 1].
    """,
    parameters=(
        hyper("p", "float", "Probability of zeroing an element, in [0, 1].", 0.5),
        hyper("training", "bool", "Whether torch zeroes elements (training only; see the eval mode).", True),
    ),
    since=_SINCE,
)

# --- Weight reparametrization -------------------------------------------------------------------

_WEIGHT_NORM = op(
    "weight_norm",
    (
        """
        A weight rebuilt from its direction `v` and its magnitude `g`, as `torch._weight_norm(v, g,
        dim)`, what `torch.nn.utils.parametrizations.weight_norm` (and the older
        `torch.nn.utils.weight_norm`) compute before every use of the weight (Wav2Vec2's positional
        convolution): `y = v · (g / ‖v‖)`, of `v`'s shape and dtype, `‖v‖` being the 2-norm
        `√(Σ v²)` over every dimension of `v` except `dim`, that one kept (with size 1 elsewhere).
        So each slice `v[…, i, …]` along `dim` is scaled to the norm `g[…, i, …]` (a negative `g`
        flips it).

        * `dim` in `[0, rank)`: `g` has `v`'s rank, `v.shape[dim]` along `dim` and 1 elsewhere (the
          shape of the norm, which is what the parametrization stores in `original0`).
        * `dim` −1 is not the last dimension: it means the norm of the whole tensor, as torch's
          `norm_except_dim` reads it (the parametrization's `dim=None`); `g` is then one element,
          0-d (what torch stores) or of `v`'s rank or less with every size 1.
        * Any other negative `dim` in `[−rank, −1)` counts from the end (`dim + rank`), as torch
          does; `dim` beyond `[−rank, rank)` is an error, as in torch.

        `v` has at least one dimension (torch refuses a 0-d `v`), and for a `dim` other than −1
        `v.shape[dim]` is not 0 (torch divides by it and stops the process with a floating-point
        exception, or fails to reshape); other empty dimensions give an empty `y`. `v` and `g` have
        one floating dtype (torch's fused kernel refuses a mix). torch never checks `g`'s shape:
        for `dim` 0 and the last dimension its fused kernel reads `g` as a flat vector of
        `v.shape[dim]` elements, for the others it broadcasts `g` against `v` (which may enlarge
        `y`); the catalog requires the shape above, on which the two agree, and refuses others.

        A slice whose norm is 0 (all zeros) gives NaN throughout (`0 · (g / 0)` is `0 · ±∞` or
        `0 · NaN`), as torch does; NaN and infinities in `v` follow IEEE arithmetic the same way
        (an infinite element makes its slice's norm infinite: its finite elements become 0, the
        infinite one NaN). The squares are summed as they are, without rescaling: where they
        overflow the dtype, the norm is infinite and the slice becomes 0s, as in torch.
        """,
        """
        `v` and `g` are input ports, not slots: a document feeds them from `constant` nodes (a
        captured model's `parametrizations.weight.original1` and `original0`) or from any other
        node, and their shapes are checked when the op runs, an error naming the node where they
        do not fit.
        """,
    ),
    inputs=("v", "g"),
    parameters=(
        hyper(
            "dim",
            "int",
            "The dimension the norm keeps; −1: the norm of the whole tensor (not the last dimension).",
            0,
        ),
    ),
    since=_SINCE,
)

#: Function ops of this family (category ``layer_functions``).
SPECS: tuple[OpSpec, ...] = (
    _LINEAR,
    _BILINEAR,
    _ADDMM,
    _conv_function(1),
    _conv_function(2),
    _conv_function(3),
    _conv_transpose_function(1),
    _conv_transpose_function(2),
    _BATCH_NORM,
    _LAYER_NORM,
    _GROUP_NORM,
    _RMS_NORM,
    _EMBEDDING,
    _DROPOUT,
    _WEIGHT_NORM,
)

#: Module ops of this family, printed with the layers.
LAYERS: tuple[OpSpec, ...] = (
    _conv_module(3),
    _conv_transpose_module(1),
    dataclasses.replace(layers._batch_norm("BatchNorm3d", "`[N, C, D, H, W]`"), since=_SINCE),
)
