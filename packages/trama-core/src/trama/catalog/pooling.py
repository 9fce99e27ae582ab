"""Catalog opset 2: pooling in one, two and three dimensions, adaptive pools, resampling
(``interpolate``, ``Upsample``) and padding (``pad``), as modules and as functions.

The pools of every dimensionality share their window rules, so the rules are written once as a
function of the number of spatial dimensions (as :mod:`trama.catalog.layers` writes opset 1's
2-d pools) and each op is a call; a module op and its function form (``MaxPool1d`` and
``max_pool1d``) share slots and prose. Resampling follows torch's CPU index arithmetic to the
float32 operation, because that arithmetic decides which input elements an output reads.
"""

from __future__ import annotations

from trama.catalog._build import hyper, op, prose
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["LAYERS", "SPECS"]

#: The names docs give the spatial dimensions of a channels-first tensor with 1, 2 or 3 of them.
_SPATIAL = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}


def _count(dims: int) -> str:
    return f"{dims} int{'s' if dims > 1 else ''}"


def _layouts(dims: int) -> str:
    spatial = ", ".join(_SPATIAL[dims])
    return f"`x` is `[N, C, {spatial}]` or unbatched `[C, {spatial}]`; `y` keeps `N` (when present) and `C`."


def _windows(dims: int, *, dilation: bool) -> str:
    """How the windows of a pool with ``dims`` spatial dimensions are laid out."""
    step = " + a·dilation[d]" if dilation else " + a"
    span = "(dilation[d]·(kernel_size[d] − 1) + 1)" if dilation else "kernel_size[d]"
    return prose(
        f"""
        Windows: along spatial dimension d of size S, output index `i` covers the input positions
        `i·stride[d] − padding[d]{step}` for `a < kernel_size[d]`. That dimension of `y` has size
        `⌊(S + 2·padding[d] − {span}) / stride[d]⌋ + 1`, rounded up instead of down when
        `ceil_mode` is true; in ceil mode a last window that would start in the end padding
        (`(size − 1)·stride[d] ≥ S + padding[d]`) is dropped. `padding[d]` is at most
        `kernel_size[d] / 2`, and an input whose output would have no position is an error.
        {_layouts(dims)}
        """
    )


def _pool_slots(dims: int, *, dilation: bool) -> list[ParameterSchema]:
    n = _count(dims)
    slots = [
        hyper("kernel_size", "list", f"Window extent: {n}."),
        hyper("stride", "list", f"Step between windows: {n}; `null` means `kernel_size`.", None),
        hyper("padding", "list", f"Implicit padding at both ends: {n}.", [0] * dims),
    ]
    if dilation:
        slots.append(hyper("dilation", "list", f"Spacing between window elements: {n}.", [1] * dims))
    slots.append(hyper("ceil_mode", "bool", "Round output sizes up instead of down.", False))
    return slots


def _torch_name(name: str, module: bool) -> str:
    return f"torch.nn.{name}" if module else f"torch.nn.functional.{name}"


def _max_pool(name: str, dims: int, *, module: bool) -> OpSpec:
    return op(
        name,
        (
            f"""
            The maximum over each window, as `{_torch_name(name, module)}`: `y` at an output
            position is the largest of the window's elements that lie inside `x` (padding acts as
            −∞ and never wins). A NaN in a window makes its result NaN. `x` may be floating point
            or integer; `y` has its dtype.
            """,
            _windows(dims, dilation=True),
            """
            torch's `return_indices=True` has no form (the op has the one output `y`): exporters
            refuse such a call or module.
            """,
        ),
        parameters=_pool_slots(dims, dilation=True),
        since=2,
    )


def _avg_pool(name: str, dims: int, *, module: bool) -> OpSpec:
    override = dims > 1
    divisor = "`divisor_override` when it is set, else " if override else ""
    slots = [
        *_pool_slots(dims, dilation=False),
        hyper("count_include_pad", "bool", "Whether padding elements count in the divisor.", True),
    ]
    if override:
        slots.append(hyper("divisor_override", "int", "A fixed divisor; `null`: computed as above.", None))
    absent = "" if override else " torch's 1-d average pool has no `divisor_override`."
    whole = (
        " As torch's 3-d average pool does, every spatial size of `x` must be at least `kernel_size[d]`, padding aside."
        if dims == 3
        else ""
    )
    return op(
        name,
        (
            f"""
            The mean over each window, as `{_torch_name(name, module)}`: the sum of the window's
            elements that lie inside `x`, divided by a divisor. In each dimension, the window of
            index `i` runs from `s = i·stride − padding` to `e = min(s + kernel_size, S + padding)`;
            the divisor is {divisor}the product over the spatial dimensions of `e − s` when
            `count_include_pad` is true, else the number of the window's elements inside `x`.
            `x` is floating point; `y` has its dtype.{absent}{whole}
            """,
            _windows(dims, dilation=False),
        ),
        parameters=slots,
        since=2,
    )


def _output_size(dims: int, *, nullable: bool) -> ParameterSchema:
    if dims == 1:
        return hyper("output_size", "list", "1 int ≥ 1: the size of `y`'s last dimension.")
    entries = "each an int ≥ 1 or `null` (`null`: that dimension keeps its input size)" if nullable else "ints ≥ 1"
    return hyper("output_size", "list", f"{dims} entries, {entries}.")


_ADAPTIVE_WINDOWS = """
    Along a spatial dimension of input size S and output size O, output index `i` covers input
    positions `⌊i·S / O⌋ … ⌈(i + 1)·S / O⌉ − 1`: windows may overlap and differ in size, and none
    is empty (S ≥ 1).
    """


def _adaptive(name: str, dims: int, reduction: str, *, module: bool) -> OpSpec:
    what = (
        "The mean over windows chosen to give a fixed output size (the window's sum divided by its size)"
        if reduction == "avg"
        else "The maximum over windows chosen to give a fixed output size (a NaN in a window makes its result NaN)"
    )
    dtype = "floating point" if reduction == "avg" else "floating point or integer"
    extra = (
        ""
        if reduction == "avg"
        else " torch's `return_indices=True` has no form (the op has the one output `y`): exporters refuse it."
    )
    spatial = ", ".join(_SPATIAL[dims])
    sized = ", ".join(f"output_size[{d}]" for d in range(dims))
    return op(
        name,
        (
            f"""
            {what}, as `{_torch_name(name, module)}`. `x` is `[N, C, {spatial}]` or unbatched
            `[C, {spatial}]`, {dtype}; `y` is `[N, C, {sized}]` (without `N` when `x` has none),
            of `x`'s dtype.{extra}
            """,
            _ADAPTIVE_WINDOWS,
        ),
        parameters=(_output_size(dims, nullable=dims > 1),),
        since=2,
    )


_RESAMPLING = """
    `x` is `[N, C, *S]` with k = 1, 2 or 3 spatial dimensions (there is no unbatched form: the
    first dimension is always `N`), floating point; `y` is `[N, C, *S′]` of its dtype. Exactly one
    of `size` and `scale_factor` is set. With `size`, `S′` is `size` (an int: every spatial
    dimension). With `scale_factor` (a number: every spatial dimension), `S′_d = ⌊S_d ·
    scale_factor_d⌋`, computed in float64; an output size of 0 is an error.

    Each spatial dimension is resampled on its own, the last one first; along a dimension of input
    size S and output size S′ (index `o`), every number below is float32 arithmetic (float64 for a
    float64 `x`, except in the nearest modes), rounded after each operation, as torch's CPU
    kernels compute it. The ratio `r` is `(S − 1) / (S′ − 1)` (0 when
    `S′ = 1`) with `align_corners` true; otherwise `1 / scale_factor_d` (computed in float64, then
    rounded) when `scale_factor` is set and `recompute_scale_factor` is not true, else `S / S′`.

    * `"nearest"`: `y[o] = x[min(⌊o · r⌋, S − 1)]`, except that `S′ = S` copies (`x[o]`) and
      `S′ = 2·S` reads `x[⌊o / 2⌋]` (torch's rule, kept for compatibility).
    * `"nearest-exact"`: `y[o] = x[min(⌊(o + 0.5) · r⌋, S − 1)]` (the product in float64,
      rounded to float32 before the floor).
    * `"linear"` (k = 1), `"bilinear"` (k = 2), `"trilinear"` (k = 3): when `S′ = S` the weights
      are 1 and 0 on `x[o]` (a copy). Otherwise the source position is `p = r · o` with
      `align_corners`, else `p = max(r · (o + 0.5) − 0.5, 0)`; `i₀ = min(⌊p⌋, S − 1)`,
      `i₁ = i₀ + 1` if `i₀ < S − 1` else `i₀`, `λ = min(max(p − i₀, 0), 1)`, and
      `y[o] = x[i₀] · (1 − λ) + x[i₁] · λ`.
    * `"bicubic"` (k = 2): `p` as for the linear modes but without the clamp at 0;
      `i = min(⌊p⌋, S − 1)`, `t = min(max(p − i, 0), 1)`, and
      `y[o] = Σ_(j<4) x[min(max(i − 1 + j, 0), S − 1)] · w_j` with Keys' cubic convolution,
      `A = −0.75`: `w₀ = c₂(t + 1)`, `w₁ = c₁(t)`, `w₂ = c₁(1 − t)`, `w₃ = c₂((1 − t) + 1)`, where
      `c₁(u) = ((A + 2)·u − (A + 3))·u·u + 1` and `c₂(u) = ((A·u − 5A)·u + 8A)·u − 4A`.
    * `"area"`: `y` is `x`'s adaptive average pool to `S′` (the windows of `AdaptiveAvgPool2d`).

    The terms are summed in the order written (tap 0 first). `align_corners` may only be set
    (non-null) with the linear and cubic modes, where `null` means false; `recompute_scale_factor`
    true recomputes the ratio from the sizes (`S / S′`) and needs `scale_factor`. torch's
    `antialias=True` has no form: exporters refuse it.
    """

_MODES = '`"nearest"`, `"nearest-exact"`, `"linear"`, `"bilinear"`, `"bicubic"`, `"trilinear"` or `"area"`'


def _resampling_slots() -> tuple[ParameterSchema, ...]:
    return (
        hyper("size", ("int", "list"), "The output's spatial size: an int (every dimension) or k ints.", None),
        hyper(
            "scale_factor",
            ("float", "list"),
            "The multiplier of the spatial size: a number (every dimension) or k numbers > 0.",
            None,
        ),
        hyper("mode", "string", f"{_MODES}; the linear modes need k = 1, 2, 3 in turn, bicubic k = 2.", "nearest"),
        hyper("align_corners", "bool", "Align the corner pixels' centres (linear and cubic modes only).", None),
        hyper("recompute_scale_factor", "bool", "Use `S / S′` rather than `1 / scale_factor` as the ratio.", None),
    )


def _resample(name: str, *, module: bool) -> OpSpec:
    return op(
        name,
        (f"Resamples the spatial dimensions of `x`, as `{_torch_name(name, module)}`.", _RESAMPLING),
        parameters=_resampling_slots(),
        since=2,
    )


_PAD = op(
    "pad",
    """
    Pads (or, with negative amounts in constant mode, crops) the last dimensions of `x`, as
    `torch.nn.functional.pad`. `pad` holds 2·m ints for the last m dimensions, the last dimension
    first: `[before_last, after_last, before_second_last, after_second_last, …]`, m at most the
    rank of `x`; `y` has `x`'s dtype, and dimension d grows by its before and after amounts.

    * `"constant"`: the new elements are `value` (`null`: 0) in `x`'s dtype; a negative amount
      removes that many elements from that end instead.
    * `"reflect"`: mirrored about the edge element, which is not repeated (each amount smaller than
      the dimension).
    * `"replicate"`: the edge element repeated (the dimension not empty).
    * `"circular"`: wrapped around, as if the dimension were periodic (each amount at most the
      dimension).

    The last three need m = 1, 2 or 3, `x` of rank m + 1 or m + 2, amounts ≥ 0, and `value`
    null or 0, as torch does.
    """,
    parameters=(
        hyper("pad", "list", "2·m ints, the last dimension's pair first (torch's order)."),
        hyper("mode", "string", '`"constant"`, `"reflect"`, `"replicate"` or `"circular"`.', "constant"),
        hyper("value", "float", 'The fill of `"constant"` padding; `null`: 0.', None),
    ),
    since=2,
)

#: Function ops of this family (category ``pooling``).
SPECS: tuple[OpSpec, ...] = (
    _max_pool("max_pool1d", 1, module=False),
    _max_pool("max_pool2d", 2, module=False),
    _max_pool("max_pool3d", 3, module=False),
    _avg_pool("avg_pool1d", 1, module=False),
    _avg_pool("avg_pool2d", 2, module=False),
    _avg_pool("avg_pool3d", 3, module=False),
    _adaptive("adaptive_avg_pool1d", 1, "avg", module=False),
    _adaptive("adaptive_avg_pool2d", 2, "avg", module=False),
    _adaptive("adaptive_avg_pool3d", 3, "avg", module=False),
    _adaptive("adaptive_max_pool1d", 1, "max", module=False),
    _adaptive("adaptive_max_pool2d", 2, "max", module=False),
    _resample("interpolate", module=False),
    _PAD,
)

#: Module ops of this family, printed with the layers.
LAYERS: tuple[OpSpec, ...] = (
    _max_pool("MaxPool1d", 1, module=True),
    _max_pool("MaxPool3d", 3, module=True),
    _avg_pool("AvgPool1d", 1, module=True),
    _avg_pool("AvgPool3d", 3, module=True),
    _adaptive("AdaptiveAvgPool1d", 1, "avg", module=True),
    _adaptive("AdaptiveAvgPool3d", 3, "avg", module=True),
    _adaptive("AdaptiveMaxPool1d", 1, "max", module=True),
    _adaptive("AdaptiveMaxPool2d", 2, "max", module=True),
    _resample("Upsample", module=True),
)
