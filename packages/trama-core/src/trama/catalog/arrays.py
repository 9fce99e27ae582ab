"""Catalog opset 2: expanding, gathering, scanning, repeating, reducing, selecting and creating
tensors — the calls real models make between their layers (``x.expand``, ``torch.gather``,
``mask.cumsum``, ``torch.roll``, ``x.repeat_interleave``, ``torch.einsum``, ``x.var``,
``torch.topk``, ``torch.arange``, ``x.new_ones``).

Names are torch's function names, lowercase; slots are torch's argument names. The reductions
share their ``dim`` and ``keepdim`` rules with opset 1's (:mod:`trama.catalog.functions`), whose
prose is spliced in so that the two read alike. The settings checks live in
:mod:`trama.catalog._arrays_checks`.
"""

from __future__ import annotations

from trama.catalog._build import hyper, op
from trama.catalog.functions import _DIM_RULE, _KEEPDIM
from trama.format._dtypes import DTYPE_NAMES
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["LAYERS", "SPECS"]

_SINCE = 2

_DIM_WRAP = "`dim` counts from the end when negative; a 0-d `x` accepts 0 and −1, as if it had one dimension."

_DTYPE_LIST = ", ".join(f"`{name}`" for name in DTYPE_NAMES)


def _dtype(doc: str) -> ParameterSchema:
    """The ``dtype`` slot of a creation op: a format dtype name, or null for torch's default."""
    return hyper("dtype", "string", f"{doc} One of {_DTYPE_LIST}, or `null`.", None)


_INT64_RULE = """
    Without x64 mode JAX has no int64, so a JAX implementation gives int32 where the catalog says
    int64 (the values are the same while they fit).
    """


# --- Shapes ---------------------------------------------------------------------------------

_EXPAND = op(
    "expand",
    """
    `x` repeated along dimensions of size 1 to the sizes `size`, as `torch.Tensor.expand`
    (`expand_as` is this op with the other tensor's shape). `size` has at least as many entries
    as `x` has dimensions, aligned at the last one. An entry −1 keeps that dimension of `x`; any
    other entry must equal the size of `x` there, or `x` must have size 1 there (repeated, also
    to 0). Entries before the first dimension of `x` are new leading dimensions, of sizes ≥ 0
    (−1 is not allowed there, as in torch). The dtype is that of `x`. Values are immutable, so
    the view torch returns and a copy are alike.
    """,
    parameters=(hyper("size", "list", "The sizes of `y` (ints; −1 keeps a dimension of `x`)."),),
    since=_SINCE,
)

_GATHER = op(
    "gather",
    f"""
    Values of `x` picked along `dim` by `index`, as `torch.gather`:
    `y[i₀, …, i_dim, …] = x[i₀, …, index[i₀, …, i_dim, …], …]`. `index` is an int64 tensor with
    as many dimensions as `x` (a 0-d `x` takes a 0-d `index`), of sizes at most those of `x` in
    every dimension but `dim`; `y` has the shape of `index` and the dtype of `x`. Positions must
    lie in `0 … x.shape[dim] − 1`: negative positions are refused, as torch refuses them (where a
    compiled runtime cannot check values, an out-of-range position gives an unspecified value).
    {_DIM_WRAP}
    """,
    inputs=("x", "index"),
    parameters=(hyper("dim", "int", "The dimension indexed."),),
    since=_SINCE,
)

_INDEX_SELECT = op(
    "index_select",
    f"""
    The slices of `x` at the positions `index` along `dim`, as `torch.index_select`: `y` is `x`
    with dimension `dim` replaced by the length of `index`, a 1-D (or 0-d, acting as one
    position) int32 or int64 tensor. Positions lie in `0 … x.shape[dim] − 1`; negative ones are
    refused, as in torch (a compiled runtime that cannot check values gives an unspecified value
    for them). {_DIM_WRAP}
    """,
    inputs=("x", "index"),
    parameters=(hyper("dim", "int", "The dimension indexed."),),
    since=_SINCE,
)


def _scan(name: str, combine: str) -> OpSpec:
    return op(
        name,
        f"""
        The running {combine} along `dim`, as `torch.{name}`: `y` has the shape of `x`, and
        `y[…, i, …]` combines `x[…, 0, …]` … `x[…, i, …]`. Bool and integer inputs give int64, as
        torch's default `dtype` does; floating inputs keep their dtype. (torch's `dtype`
        argument is not a slot: a cast to another dtype is a cast op.) {_DIM_WRAP}
        """,
        parameters=(hyper("dim", "int", "The dimension scanned."),),
        since=_SINCE,
    )


def _triangle(name: str, kept: str, comparison: str) -> OpSpec:
    return op(
        name,
        f"""
        The {kept} triangle of the matrices in the last two dimensions of `x`, as `torch.{name}`:
        `y[…, i, j] = x[…, i, j]` where `j − i {comparison} diagonal`, else 0 (false for bools).
        `x` has at least 2 dimensions; `y` has its shape and dtype. `diagonal` 0 is the main
        diagonal, positive ones lie above it, negative ones below.
        """,
        parameters=(hyper("diagonal", "int", "Which diagonal bounds the triangle.", 0),),
        since=_SINCE,
    )


_ROLL = op(
    "roll",
    """
    `x` rotated along dimensions, as `torch.roll`: along each dimension `dims[k]` the element at
    position i moves to position (i + `shifts[k]`) mod size (positive shifts move toward higher
    positions; a shift may exceed the size). `shifts` and `dims` are each an int or a list of
    ints, of the same length. With `dims` null, `x` is rolled as if flattened in C order by the
    one shift `shifts` holds, and keeps its shape. Dimensions count from the end when negative;
    a 0-d `x` takes `dims` null only, as torch requires; an empty dimension leaves `y` empty.
    """,
    parameters=(
        hyper("shifts", ("int", "list"), "The shift of each rolled dimension (an int or a list of ints)."),
        hyper("dims", ("int", "list"), "The dimensions rolled; `null`: the flattened tensor.", None),
    ),
    since=_SINCE,
)

_FLIP = op(
    "flip",
    """
    `x` with the order of its elements reversed along each dimension of `dims`, as
    `torch.flip` (negative counts from the end; a dimension named twice is refused). An empty
    list gives `x` unchanged.
    """,
    parameters=(hyper("dims", "list", "The dimensions reversed (ints)."),),
    since=_SINCE,
)

_SLICE_SCATTER = op(
    "slice_scatter",
    """
    `x` with the slice `start:end:step` of dimension `dim` replaced by `src`, as
    `torch.slice_scatter`: `y` has `x`'s shape and dtype, and `src` has exactly the slice's shape
    and `x`'s dtype. The bounds follow Python's slicing (`null` is the default, negative counts
    from the end, out-of-range bounds are clamped); `step` is positive. This is how an exporter
    writes an in-place write into a slice of a tensor that is read afterwards
    (`b = bias.clone(); b[n:2 * n].zero_()`): the write is a new value of the whole tensor.
    """,
    inputs=("x", "src"),
    parameters=(
        hyper("dim", "int", "The dimension sliced (negative counts from the end).", 0),
        hyper("start", "int", "First position of the slice; `null`: the start.", None),
        hyper("end", "int", "Position after the slice; `null`: the end.", None),
        hyper("step", "int", "Distance between positions (≥ 1).", 1),
    ),
    since=_SINCE,
)

_CONTIGUOUS = op(
    "contiguous",
    """
    `y = x`, as `Tensor.contiguous`: the same values, shape and dtype. The op says nothing about
    values; it is kept where a model makes a strided tensor contiguous before an op whose
    floating-point result depends on the memory layout of its input (a matrix product, a
    normalization), so that a torch implementation that calls `Tensor.contiguous` there gives
    back the model's own bits. Other implementations return `x`.
    """,
    since=_SINCE,
)

_REPEAT = op(
    "repeat",
    """
    `x` tiled, as `torch.Tensor.repeat`: `repeats` has at least as many entries as `x` has
    dimensions; `x` is first given leading dimensions of size 1 to that count, then repeated
    `repeats[k]` times along dimension k (0 gives an empty dimension). `y[…, i, …]` is
    `x[…, i mod size, …]`. The dtype is that of `x`.
    """,
    parameters=(hyper("repeats", "list", "The number of copies along each dimension (ints ≥ 0)."),),
    since=_SINCE,
)

_TILE = op(
    "tile",
    """
    `x` tiled, as `torch.tile`: as `repeat` with `dims` as the repeats, except that `dims` may
    have fewer entries than `x` has dimensions, and is then padded with leading 1s.
    """,
    parameters=(hyper("dims", "list", "The number of copies along each (trailing) dimension (ints ≥ 0)."),),
    since=_SINCE,
)

_REPEAT_INTERLEAVE = op(
    "repeat_interleave",
    """
    Each slice of `x` along `dim` repeated in place, as `torch.repeat_interleave(x, repeats,
    dim)`: along `dim`, `[a, b]` twice is `[a, a, b, b]` (where `repeat` gives `[a, b, a, b]`).
    `repeats` is an int ≥ 0, the count of every slice, or a list of ints ≥ 0, one count per
    slice of `x` along `dim`, in order (a list of one entry serves every slice, as torch
    broadcasts it). `y` has the sizes and dtype of `x`, except along `dim`, where its size is
    the sum of the counts. With `dim` null, `x` is first flattened in C order and `y` is 1-D (a
    0-d `x` is one element); a 0-d `x` takes `dim` null only, as torch requires. Negative `dim`
    counts from the end.

    torch's tensor form (`torch.repeat_interleave(x, counts, dim)`) is this op where the counts
    are known when the model is exported, written as the list; counts computed at run time have
    no op (the shape of `y` would depend on values). A count, and a list's sum, is at most 2**48
    (docs/format.md, section 7). torch's `output_size` is a hint of that sum, not a slot.
    """,
    parameters=(
        hyper("repeats", ("int", "list"), "The count of every slice (an int), or of each slice (a list of ints ≥ 0)."),
        hyper("dim", "int", "The dimension repeated along; `null`: the flattened `x`.", None),
    ),
    since=_SINCE,
)

_EINSUM = op(
    "einsum",
    (
        """
        Einstein summation, as `torch.einsum(equation, x0, x1, …)`. `equation` names each
        dimension of each operand with a letter (`a`–`z`, `A`–`Z`), operands separated by
        commas, optionally followed by `->` and the letters of `y`; `...` stands for the
        dimensions no letter names, which broadcast by the numpy rule. Dimensions of one letter
        have equal sizes; a letter absent from `y` is summed over; a letter twice in one operand
        takes its diagonal. Without `->`, `y` has the letters that appear exactly once, in
        ASCII order (capitals first), after the `...` dimensions. Spaces are ignored.
        """,
        """
        The inputs are the ports `x0`, `x1`, …, `x{n−1}`, n ≥ 1, one per operand of the
        equation: numbered from 0 without gaps and taken in numeric order, as `concat` takes
        them. The operands have one dtype, which `y` has; bools are refused (torch refuses
        them). Floating results are the exact sums rounded to that dtype, within the rounding
        of float32 accumulation.
        """,
    ),
    inputs=("x0",),
    variadic_inputs=True,
    parameters=(hyper("equation", "string", "The subscripts, as `torch.einsum` takes them."),),
    since=_SINCE,
)


# --- Reductions -----------------------------------------------------------------------------


def _reduction(name: str, semantics: str, *extra: ParameterSchema, rule: str = _DIM_RULE) -> OpSpec:
    """A reduction over ``dim`` (null, an int or a list) with ``keepdim``, opset 1's rules."""
    dim = hyper("dim", ("int", "list"), "The dimensions reduced; `null`: all.", None)
    return op(name, (semantics, rule), parameters=(dim, *extra, _KEEPDIM), since=_SINCE)


def _single(name: str, semantics: str) -> OpSpec:
    """A reduction over one dimension or, with ``dim`` null, over every element."""
    dim = hyper("dim", "int", "The dimension reduced; `null`: all of them, flattened.", None)
    return op(name, semantics, parameters=(dim, _KEEPDIM), since=_SINCE)


_CORRECTION = hyper(
    "correction", "float", "Subtracted from the element count in the divisor (1: Bessel's correction).", 1
)

_VARIANCE = """
    `var = Σ (x − mean)² / max(0, N − correction)` over the N elements reduced, as `torch.var`
    with `correction` (`unbiased=True` is `correction` 1, `False` is 0). When `N − correction`
    is 0 or less the division is by 0: +∞, or NaN for an all-equal or empty sample (torch warns,
    the catalog does not). `x` has a floating dtype, which `y` keeps.
    """

_LOGSUMEXP_DIM = """
    `dim` is an int or a non-empty list of distinct ints (negative counts from the end): torch
    requires it. With `keepdim` the reduced dimensions stay, with size 1; otherwise they are
    removed.
    """

_REDUCTIONS = (
    _reduction(
        "min",
        """
        The smallest element over `dim`, as `torch.amin`; a NaN makes its result NaN, and an
        empty dimension is an error. torch's `min(x, dim)` gives values and indices: the values
        are this op, the indices `argmin` with the same `dim` and `keepdim`. The elementwise
        `torch.min(x, other)` is not this op.
        """,
    ),
    _single(
        "argmin",
        """
        The int64 index of the smallest element along `dim`, as `torch.argmin`: the first one
        on ties, a NaN counting as the smallest. With `keepdim` the dimension stays, with size
        1; otherwise it is removed. `dim` null gives the index into the flattened `x`: 0-d, or
        with `keepdim` shaped `[1, …, 1]` with the rank of `x`, as torch 2 gives. An empty `x`
        is an error.
        """,
    ),
    _single(
        "prod",
        """
        The product over `dim`, as `torch.prod`: one dimension, or with `dim` null every element
        (0-d, or with `keepdim` shaped `[1, …, 1]`). Bool and integer inputs are multiplied as
        int64 (wrapping on overflow), floating ones keep their dtype. An empty product is 1.
        With `keepdim` the reduced dimension stays, with size 1; otherwise it is removed.
        """,
    ),
    _reduction("var", f"The variance over `dim`: {_VARIANCE}", _CORRECTION),
    _reduction("std", f"The standard deviation over `dim`, `√var`, where {_VARIANCE}", _CORRECTION),
    _reduction(
        "any",
        """
        Whether any element over `dim` is nonzero (true), as `torch.any`: a bool result, except
        that a uint8 `x` gives uint8 (0 or 1), as torch gives. NaN counts as nonzero; an empty
        reduction is false.
        """,
    ),
    _reduction(
        "all",
        """
        Whether every element over `dim` is nonzero (true), as `torch.all`: a bool result,
        except that a uint8 `x` gives uint8 (0 or 1), as torch gives. NaN counts as nonzero; an
        empty reduction is true.
        """,
    ),
    _reduction(
        "linalg_vector_norm",
        """
        The vector `ord`-norm over `dim`, as `torch.linalg.vector_norm` (and what `F.normalize`
        and `Tensor.norm` compute): `(Σ |x|^ord)^(1/ord)`; `ord` `"inf"` is `max |x|`, `"-inf"`
        `min |x|`, and 0 the count of nonzero elements. `x` has a floating dtype, which `y`
        keeps; a NaN gives NaN. torch's `dtype` argument has no slot: exporters refuse a call
        that sets it.
        """,
        hyper("ord", ("int", "float", "string"), 'The order: a number, `"inf"` or `"-inf"`.', 2),
    ),
    op(
        "logsumexp",
        (
            """
            `log Σ exp(x)` over `dim`, as `torch.logsumexp`, computed stably (shifted by the
            maximum): a +∞ element gives +∞, all −∞ give −∞, a NaN gives NaN. Floating inputs
            keep their dtype; bool and integer ones give float32, torch's default dtype.
            """,
            _LOGSUMEXP_DIM,
        ),
        parameters=(hyper("dim", ("int", "list"), "The dimensions reduced."), _KEEPDIM),
        since=_SINCE,
    ),
)


# --- Selection ------------------------------------------------------------------------------

_TOPK = op(
    "topk",
    (
        """
        The `k` largest elements of `x` along `dim` (the `k` smallest with `largest` false), as
        `torch.topk(x, k, dim, largest, sorted=True)`: `values` has the shape of `x` with size
        `k` along `dim`, and its dtype; `indices`, of the same shape and dtype int64, holds
        their positions along `dim` (`values` is `gather(x, dim, indices)`). Along `dim` they
        come in order, the largest first (the smallest first with `largest` false).
        """,
        """
        **Ties.** Equal elements are taken in the order of their positions, the lower position
        first. That decides both which of them are taken where they straddle the `k`-th place
        and the order they come in: the result is the first `k` of a stable sort,
        `torch.sort(x, dim, descending=largest, stable=True)`. torch's `topk` leaves that order
        to its kernel (on the CPU, the top 5 of 37 equal elements come as
        `[26, 24, 25, 23, 27]`, where the catalog says `[0, 1, 2, 3, 4]`); the catalog fixes it
        so that every runtime gives the same `indices`. NaN counts as larger than every number
        and equal to any other NaN, as torch orders it; −0.0 and +0.0 are equal.
        """,
        """
        `k` lies in `0 … x.shape[dim]`, and `dim` counts from the end when negative. A 0-d `x`
        is one element along `dim` 0 or −1: `k` is 0 or 1, and the results are `x` and the
        index 0, both 0-d, as torch gives them. Bool `x` is refused (torch refuses it). torch's
        `sorted=False` leaves the order of the results unspecified, and the sorted order is one
        of them, so an exporter writes such a call as this op.
        """,
        _INT64_RULE,
    ),
    outputs=("values", "indices"),
    parameters=(
        hyper("k", "int", "How many elements are taken (≥ 0, at most the size of `dim`)."),
        hyper("dim", "int", "The dimension searched.", -1),
        hyper("largest", "bool", "Take the largest elements (`false`: the smallest).", True),
    ),
    since=_SINCE,
)


# --- Creation -------------------------------------------------------------------------------

_CREATED = """
    Its value depends on the settings alone (and, for the `_like` ops, on the shape and dtype of
    `x`, never on its values), so a tracer that knows them at capture writes a constant instead;
    the op records creation that depends on a value known only at run time.
    """

_DEFAULT_DTYPE = "`null` takes torch's default: float32."

_CREATION = (
    op(
        "arange",
        (
            """
            The 1-D tensor `start, start + step, start + 2·step, …` of the values below `end`
            (above it for a negative `step`), as `torch.arange`: its length is
            `⌈(end − start) / step⌉`, computed in float64, and 0 when `end` equals `start`.
            `step` is not 0 and has the sign of `end − start` (torch refuses the others). With
            `dtype` null the result is int64 when `start`, `end` and `step` are all ints, else
            float32, torch's default. Values are `start + i·step` rounded to the dtype (torch
            computes some of them in float32 steps, which can differ in the last bit); an
            integer `dtype` needs integer `start`, `end` and `step`, and bool is refused.
            """,
            _INT64_RULE,
            _CREATED,
        ),
        inputs=(),
        parameters=(
            hyper("start", ("int", "float"), "The first value.", 0),
            hyper("end", ("int", "float"), "The bound, excluded."),
            hyper("step", ("int", "float"), "The difference between neighbours.", 1),
            _dtype("The dtype of `y`; `null` as described above."),
        ),
        since=_SINCE,
    ),
    op(
        "full",
        (
            """
            A tensor of shape `size` filled with `fill_value`, as `torch.full`. With `dtype`
            null it is bool for a bool `fill_value`, int64 for an int and float32 for a float
            (torch's rule); otherwise `fill_value` is converted to `dtype` (a float to an
            integer dtype truncates toward zero).
            """,
            _CREATED,
        ),
        inputs=(),
        parameters=(
            hyper("size", "list", "The shape of `y` (ints ≥ 0)."),
            hyper("fill_value", ("int", "float", "bool"), "The value of every element."),
            _dtype("The dtype of `y`; `null` as described above."),
        ),
        since=_SINCE,
    ),
    *(
        op(
            name,
            (f"A tensor of shape `size` filled with {value}, as `torch.{name}`.", _CREATED),
            inputs=(),
            parameters=(hyper("size", "list", "The shape of `y` (ints ≥ 0)."), _dtype(_DEFAULT_DTYPE)),
            since=_SINCE,
        )
        for name, value in (("zeros", "0 (false for bool)"), ("ones", "1 (true for bool)"))
    ),
    op(
        "full_like",
        (
            """
            A tensor of the shape of `x` filled with `fill_value`, as `torch.full_like`: of
            `dtype`, or the dtype of `x` when it is null (`fill_value` converted to it).
            """,
            _CREATED,
        ),
        parameters=(
            hyper("fill_value", ("int", "float", "bool"), "The value of every element."),
            _dtype("The dtype of `y`; `null`: that of `x`."),
        ),
        since=_SINCE,
    ),
    *(
        op(
            name,
            (
                f"""
                A tensor of the shape of `x` filled with {value}, as `torch.{name}`: of `dtype`, or
                the dtype of `x` when it is null.
                """,
                _CREATED,
            ),
            parameters=(_dtype("The dtype of `y`; `null`: that of `x`."),),
            since=_SINCE,
        )
        for name, value in (("zeros_like", "0 (false for bool)"), ("ones_like", "1 (true for bool)"))
    ),
)

#: Function ops of this family (category ``arrays``).
SPECS: tuple[OpSpec, ...] = (
    _EXPAND,
    _GATHER,
    _INDEX_SELECT,
    _scan("cumsum", "sum"),
    _scan("cumprod", "product"),
    _triangle("triu", "upper", "≥"),
    _triangle("tril", "lower", "≤"),
    _ROLL,
    _FLIP,
    _CONTIGUOUS,
    _SLICE_SCATTER,
    _REPEAT,
    _TILE,
    _REPEAT_INTERLEAVE,
    _EINSUM,
    *_REDUCTIONS,
    _TOPK,
    *_CREATION,
)

#: Module ops of this family, printed with the layers (none: these are all function calls).
LAYERS: tuple[OpSpec, ...] = ()
