"""Layers with a fixed computation: dense and bilinear maps, convolutions, pooling,
normalization, embedding, dropout and shape helpers (the ``torch.nn`` classes of those names).

Convolutions, pools and the normalizations come in families that share their slots and most of
their prose, so each family is written once as a function of what varies (the number of spatial
dimensions, the input layouts); the specs are the calls.
"""

from __future__ import annotations

from trama.catalog._build import buffer, hyper, op, prose, weight
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["SPECS"]

#: The names docs give the spatial dimensions of a channels-first tensor with 1 or 2 of them.
_SPATIAL = {1: ("L",), 2: ("H", "W")}


#: Slots that dense layers share: the output width and its optional bias.
_OUT_FEATURES = hyper("out_features", "int", "Size of `y`'s last dimension.")
_BIAS = weight("bias", "`[out_features]`. Absent: no bias.", optional=True)


def _eps(default: float = 1e-5) -> ParameterSchema:
    return hyper("eps", "float", "Added to the variance before the square root, for stability.", default)


def _affine(shape: str, flag: str, *, bias_flag: bool = False) -> tuple[ParameterSchema, ParameterSchema]:
    """The optional per-feature scale and shift of a normalization (absent: 1 and 0).

    ``bias_flag``: torch's constructor also has ``bias=False``, which drops the shift alone.
    """
    also = " or torch's `bias=False`" if bias_flag else ""
    return (
        weight("weight", f"γ, `{shape}`. Absent when `{flag}` is false (then γ = 1).", optional=True),
        weight("bias", f"β, `{shape}`. Absent when `{flag}` is false{also} (then β = 0).", optional=True),
    )


def _geometry(dims: int, *, transposed: bool = False) -> tuple[ParameterSchema, ...]:
    """The hyper-parameters of a convolution with ``dims`` spatial dimensions."""
    ones, zeros = [1] * dims, [0] * dims
    n = f"{dims} int{'s' if dims > 1 else ''}"
    padding = (
        hyper("padding", "list", f"Implicit zero padding removed from each end of `y`'s dimensions: {n}.", zeros)
        if transposed
        else hyper(
            "padding",
            ("list", "string"),
            f'Elements added at each end of each spatial dimension: {n}, or `"valid"` or `"same"`.',
            zeros,
        )
    )
    slots = [
        hyper("in_channels", "int", "Channels of `x` (dimension 1, or 0 when unbatched)."),
        hyper("out_channels", "int", "Channels of `y`."),
        hyper("kernel_size", "list", f"Kernel extent per spatial dimension: {n}."),
        hyper("stride", "list", f"Step between windows: {n}.", ones),
        padding,
    ]
    if transposed:
        slots.append(hyper("output_padding", "list", f"Extra elements at the end of `y`'s dimensions: {n}.", zeros))
    modes = '`"zeros"` only' if transposed else '`"zeros"`, `"reflect"`, `"replicate"` or `"circular"`'
    slots += [
        hyper("dilation", "list", f"Spacing between kernel elements: {n}.", ones),
        hyper("groups", "int", "Number of channel groups; divides both channel counts.", 1),
        hyper("padding_mode", "string", f"Values of the padding: {modes}.", "zeros"),
    ]
    return tuple(slots)


def _conv(name: str, dims: int) -> OpSpec:
    spatial = ", ".join(_SPATIAL[dims])
    spatial_out = ", ".join(f"{axis}′" for axis in _SPATIAL[dims])
    extent = "the last dimension" if dims == 1 else f"the last {dims} dimensions"
    kernel = ", ".join(f"kernel_size[{d}]" for d in range(dims))
    return op(
        name,
        f"""
        Cross-correlation of `x` with `weight` over {extent}, as `torch.nn.{name}`.
        `x` is `[N, in_channels, {spatial}]`, or unbatched `[in_channels, {spatial}]` (then `y` has no
        `N` either); `y` is `[N, out_channels, {spatial_out}]`.

        1. Padding. Each spatial dimension d gets `padding[d]` elements at both ends, valued by
           `padding_mode`: `"zeros"`; `"reflect"`, mirrored without repeating the edge element;
           `"replicate"`, the edge element repeated; `"circular"`, wrapped around. `"valid"` means no
           padding. `"same"` (only with every stride 1) pads dimension d by
           `t = dilation[d]·(kernel_size[d] − 1)` elements, `t // 2` at the start and the rest at the
           end, so that `y` keeps `x`'s spatial size.
        2. Groups. With `G = groups`, `C_g = in_channels / G` and `O_g = out_channels / G`, output
           channel `o` belongs to group `g = o // O_g` and reads input channels `g·C_g … g·C_g + C_g − 1`.
        3. Output. With `p` the padded input, for every output position `q` (one index per spatial
           dimension, arithmetic per dimension):
           `y[n, o, q] = bias[o] + Σ_(c < C_g) Σ_k p[n, g·C_g + c, q·stride + k·dilation] · weight[o, c, k]`,
           `k` running over the kernel positions. Without `bias` that term is 0. Dimension d of `y`
           has size `⌊(P_d − dilation[d]·(kernel_size[d] − 1) − 1) / stride[d]⌋ + 1`, `P_d` being the
           padded size.
        """,
        parameters=(
            *_geometry(dims),
            weight("weight", f"`[out_channels, in_channels / groups, {kernel}]`."),
            weight("bias", "`[out_channels]`. Absent: no bias.", optional=True),
        ),
    )


def _windows(*, dilation: bool) -> str:
    """How pooling windows are laid out, for the pools' docs."""
    step = " + a·dilation[d]" if dilation else " + a"
    span = "(dilation[d]·(kernel_size[d] − 1) + 1)" if dilation else "kernel_size[d]"
    return prose(
        f"""
        Windows: along spatial dimension d of size S, output index `i` covers the input positions
        `i·stride[d] − padding[d]{step}` for `a < kernel_size[d]`. That dimension of `y` has size
        `⌊(S + 2·padding[d] − {span}) / stride[d]⌋ + 1`, rounded up instead of down when
        `ceil_mode` is true; in ceil mode a last window that would start in the end padding
        (`(size − 1)·stride[d] ≥ S + padding[d]`) is dropped. `padding[d]` is at most
        `kernel_size[d] / 2`. `x` is `[N, C, H, W]` or `[C, H, W]`; `y` keeps `N` and `C`.
        """
    )


def _pool_slots(*, dilation: bool) -> tuple[ParameterSchema, ...]:
    slots = [
        hyper("kernel_size", "list", "Window extent: 2 ints."),
        hyper("stride", "list", "Step between windows: 2 ints; `null` means `kernel_size`.", None),
        hyper("padding", "list", "Implicit padding at both ends: 2 ints.", [0, 0]),
    ]
    if dilation:
        slots.append(hyper("dilation", "list", "Spacing between window elements: 2 ints.", [1, 1]))
    slots.append(hyper("ceil_mode", "bool", "Round output sizes up instead of down.", False))
    return tuple(slots)


def _batch_norm(name: str, layouts: str) -> OpSpec:
    return op(
        name,
        f"""
        Normalizes each channel (dimension 1) of `x`, as `torch.nn.{name}`; `x` is {layouts}, and
        `y` has its shape. With statistics μ and σ² per channel c,
        `y = (x − μ[c]) / √(σ²[c] + eps) · weight[c] + bias[c]`.
        """,
        eval_mode="""
        μ and σ² are `running_mean` and `running_var`. Only a module built without running
        statistics (`track_running_stats` false, slots absent) uses the batch's statistics: the
        mean and biased variance over every dimension but the channel. In training the batch's
        statistics are used, and torch updates the running ones by
        `running = (1 − momentum)·running + momentum·batch_stat` (with the unbiased variance;
        `momentum` null: the cumulative average over `num_batches_tracked` batches).
        """,
        parameters=(
            hyper("num_features", "int", "C, the number of channels."),
            _eps(),
            hyper(
                "momentum",
                ("float", "null"),
                "Weight of the batch statistic in the running average (training only).",
                0.1,
            ),
            hyper("affine", "bool", "Whether `weight` and `bias` exist.", True),
            hyper("track_running_stats", "bool", "Whether the running statistics exist.", True),
            *_affine("[C]", "affine"),
            buffer("running_mean", "`[C]`. Present when `track_running_stats` is true."),
            buffer("running_var", "`[C]`. Present when `track_running_stats` is true."),
            buffer("num_batches_tracked", "0-d int64: batches seen in training. Present with the running statistics."),
        ),
    )


_LINEAR = op(
    "Linear",
    """
    `y = x · weightᵀ + bias`, as `torch.nn.Linear`: for `x` of shape `[*, in_features]` (`*` any
    number of leading dimensions, none included), `y[…, o] = Σ_i x[…, i] · weight[o, i] + bias[o]`,
    of shape `[*, out_features]`. Without `bias` that term is 0.
    """,
    parameters=(
        hyper("in_features", "int", "Size of `x`'s last dimension."),
        _OUT_FEATURES,
        weight("weight", "`[out_features, in_features]`."),
        _BIAS,
    ),
)

_BILINEAR = op(
    "Bilinear",
    """
    A bilinear form of two inputs, as `torch.nn.Bilinear`: `input1` is `[*, in1_features]`,
    `input2` is `[*, in2_features]` with the same leading dimensions, and
    `y[…, o] = Σ_i Σ_j input1[…, i] · weight[o, i, j] · input2[…, j] + bias[o]`, of shape
    `[*, out_features]`. Without `bias` that term is 0.
    """,
    inputs=("input1", "input2"),
    parameters=(
        hyper("in1_features", "int", "Size of `input1`'s last dimension."),
        hyper("in2_features", "int", "Size of `input2`'s last dimension."),
        _OUT_FEATURES,
        weight("weight", "`[out_features, in1_features, in2_features]`."),
        _BIAS,
    ),
)

_CONV_TRANSPOSE_2D = op(
    "ConvTranspose2d",
    """
    The transpose of `Conv2d` (its gradient with respect to its input), as
    `torch.nn.ConvTranspose2d`. `x` is `[N, in_channels, H, W]` or unbatched `[in_channels, H, W]`;
    `y` is `[N, out_channels, H′, W′]` with
    `H′ = (H − 1)·stride[0] − 2·padding[0] + dilation[0]·(kernel_size[0] − 1) + output_padding[0] + 1`
    and likewise `W′` with index 1.

    With `C_g = in_channels / groups` and `O_g = out_channels / groups`, every input element is
    spread over a window of `y`: `y[n, g·O_g + o, i, j] = bias[g·O_g + o] + Σ x[n, g·C_g + c, h, w] ·
    weight[g·C_g + c, o, a, b]`, summed over `c < C_g` and every `(h, w, a, b)` with
    `h·stride[0] + a·dilation[0] − padding[0] = i` and `w·stride[1] + b·dilation[1] − padding[1] = j`.
    Positions no input element reaches (the `output_padding` rows and columns among them) hold
    the bias alone. `output_padding[d]` is smaller than `stride[d]` or `dilation[d]`. torch's
    `output_size` argument to `forward` has no slot: an exporter resolves it into `output_padding`.
    """,
    parameters=(
        *_geometry(2, transposed=True),
        weight("weight", "`[in_channels, out_channels / groups, kernel_size[0], kernel_size[1]]`."),
        weight("bias", "`[out_channels]`. Absent: no bias.", optional=True),
    ),
)

_MAX_POOL_2D = op(
    "MaxPool2d",
    (
        """
        The maximum over each window, as `torch.nn.MaxPool2d`: `y[n, c, i, j]` is the largest of
        the window's elements that lie inside `x` (padding acts as −∞ and never wins). A NaN in a
        window makes its result NaN.
        """,
        _windows(dilation=True),
        """
        torch's `return_indices=True` has no form in opset 1 (the op has the one output `y`):
        exporters refuse such a module.
        """,
    ),
    parameters=_pool_slots(dilation=True),
)

_AVG_POOL_2D = op(
    "AvgPool2d",
    (
        """
        The mean over each window, as `torch.nn.AvgPool2d`: the sum of the window's elements that
        lie inside `x`, divided by a divisor. In each dimension, the window of index `i` runs from
        `s = i·stride − padding` to `e = min(s + kernel_size, S + padding)`; the divisor is
        `divisor_override` when it is set, else the product over both dimensions of `e − s` when
        `count_include_pad` is true, else the number of the window's elements inside `x`.
        """,
        _windows(dilation=False),
    ),
    parameters=(
        *_pool_slots(dilation=False),
        hyper("count_include_pad", "bool", "Whether padding elements count in the divisor.", True),
        hyper("divisor_override", "int", "A fixed divisor; `null`: computed as above.", None),
    ),
)

_ADAPTIVE_AVG_POOL_2D = op(
    "AdaptiveAvgPool2d",
    """
    The mean over windows chosen to give a fixed output size, as `torch.nn.AdaptiveAvgPool2d`.
    `x` is `[N, C, H, W]` or `[C, H, W]`; `y` is `[N, C, output_size[0], output_size[1]]`. Along a
    dimension of input size S and output size O, output index `i` averages input positions
    `⌊i·S / O⌋ … ⌈(i + 1)·S / O⌉ − 1` (windows may overlap and differ in size).
    """,
    parameters=(
        hyper(
            "output_size",
            "list",
            "2 entries, each an int or `null` (`null`: that dimension keeps its input size).",
        ),
    ),
)

_LAYER_NORM = op(
    "LayerNorm",
    """
    Normalizes over the last `D = len(normalized_shape)` dimensions, which must equal
    `normalized_shape`, as `torch.nn.LayerNorm`. For each index of the leading dimensions, μ and
    σ² are the mean and the biased variance over those D dimensions, and
    `y = (x − μ) / √(σ² + eps) · weight + bias`, `weight` and `bias` broadcast over the leading
    dimensions.
    """,
    parameters=(
        hyper("normalized_shape", "list", "The sizes of the normalized trailing dimensions (ints)."),
        _eps(),
        hyper("elementwise_affine", "bool", "Whether `weight` (and by default `bias`) exist.", True),
        *_affine("normalized_shape", "elementwise_affine", bias_flag=True),
    ),
)

_GROUP_NORM = op(
    "GroupNorm",
    """
    Normalizes groups of channels, as `torch.nn.GroupNorm`. `x` is `[N, C, *]` with C divisible
    by `num_groups`; group g holds channels `g·C/G … (g + 1)·C/G − 1`. For each sample n and group
    g, μ and σ² are the mean and the biased variance over the group's channels and all of `*`,
    and `y[n, c, …] = (x[n, c, …] − μ) / √(σ² + eps) · weight[c] + bias[c]`.
    """,
    parameters=(
        hyper("num_groups", "int", "G, the number of groups."),
        hyper("num_channels", "int", "C, the number of channels."),
        _eps(),
        hyper("affine", "bool", "Whether `weight` (and by default `bias`) exist.", True),
        *_affine("[C]", "affine", bias_flag=True),
    ),
)

_RMS_NORM = op(
    "RMSNorm",
    """
    Root-mean-square normalization over the last `D = len(normalized_shape)` dimensions, as
    `torch.nn.RMSNorm`: `y = x / √(mean(x²) + eps) · weight`, the mean taken over those D
    dimensions for each index of the leading ones. `eps` null means the machine epsilon of the
    dtype the norm is computed in: `x`'s own, float32 for float16 and bfloat16 (torch's "opmath"
    type, see *Half precision*; 2⁻²³ for float32).
    """,
    parameters=(
        hyper("normalized_shape", "list", "The sizes of the normalized trailing dimensions (ints)."),
        hyper("eps", "float", "Added to the mean square.", None),
        hyper("elementwise_affine", "bool", "Whether `weight` exists.", True),
        weight("weight", "`normalized_shape`. Absent when `elementwise_affine` is false (then 1).", optional=True),
    ),
)

_EMBEDDING = op(
    "Embedding",
    """
    A table lookup, as `torch.nn.Embedding`: `x` is an integer tensor (int32 or int64) of any
    shape with values in `[0, num_embeddings)`, and `y = weight[x]`, of shape
    `[*x.shape, embedding_dim]`.

    With `max_norm` set, each looked-up row whose `norm_type`-norm exceeds `max_norm` is first
    scaled by `max_norm / (norm + 1e-7)`. torch also writes the scaled rows back into `weight`;
    that side effect is not part of this op's value and implementations need not reproduce it.
    `padding_idx`, `scale_grad_by_freq` and `sparse` affect gradients only.
    """,
    parameters=(
        hyper("num_embeddings", "int", "Rows of `weight`."),
        hyper("embedding_dim", "int", "Columns of `weight`: the size of each embedding."),
        hyper("padding_idx", "int", "A row that receives no gradient (non-negative, as torch stores it).", None),
        hyper("max_norm", "float", "The largest norm a looked-up row may have.", None),
        hyper("norm_type", "float", "The p of the p-norm for `max_norm`.", 2.0),
        hyper("scale_grad_by_freq", "bool", "Training only.", False),
        hyper("sparse", "bool", "Training only.", False),
        weight("weight", "`[num_embeddings, embedding_dim]`."),
    ),
)

_DROPOUT = op(
    "Dropout",
    """
    Random zeroing for regularization, as `torch.nn.Dropout`. In training each element is zeroed
    with probability `p` and the others are scaled by `1 / (1 − p)`.
    """,
    eval_mode="The identity: `y = x`.",
    parameters=(hyper("p", "float", "Probability of zeroing an element, in [0, 1].", 0.5),),
)

_IDENTITY = op("Identity", "`y = x`, as `torch.nn.Identity` (which ignores its constructor arguments).")

_FLATTEN = op(
    "Flatten",
    """
    Merges dimensions `start_dim` … `end_dim` (inclusive; negative values count from the end) into
    one, as `torch.nn.Flatten`: `y` is `x` reshaped in C order, with that range of sizes replaced
    by their product. Note the defaults: the module keeps dimension 0 (the batch), the function
    `flatten` does not.
    """,
    parameters=(
        hyper("start_dim", "int", "First dimension merged.", 1),
        hyper("end_dim", "int", "Last dimension merged.", -1),
    ),
)

SPECS: tuple[OpSpec, ...] = (
    _LINEAR,
    _BILINEAR,
    _conv("Conv1d", 1),
    _conv("Conv2d", 2),
    _CONV_TRANSPOSE_2D,
    _MAX_POOL_2D,
    _AVG_POOL_2D,
    _ADAPTIVE_AVG_POOL_2D,
    _batch_norm("BatchNorm1d", "`[N, C]` or `[N, C, L]`"),
    _batch_norm("BatchNorm2d", "`[N, C, H, W]`"),
    _LAYER_NORM,
    _GROUP_NORM,
    _RMS_NORM,
    _EMBEDDING,
    _DROPOUT,
    _IDENTITY,
    _FLATTEN,
)
