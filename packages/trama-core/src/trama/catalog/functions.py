"""Tensor functions: arithmetic, joining, reshaping, reductions, indexing and constants — the
calls a tracer finds in a ``forward`` (``x + y``, ``torch.cat``, ``x.view``, ``x[:, 0]``).

Names are torch's function names, lowercase. Binary operators and reductions share their
operand and ``dim`` rules, so those are written once and spliced into each doc.
"""

from __future__ import annotations

from trama.catalog._build import hyper, op, operand
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["SPECS"]

_OPERANDS = (
    operand("x", "The first operand as a constant, when the port `x` is not wired."),
    operand("other", "The second operand as a constant, when the port `other` is not wired."),
)

_OPERAND_RULE = """
    Each operand is given exactly once: wired to the input port of its name, or held by the
    parameter slot of that name as a constant (a tensor, or a number or bool that acts as a Python
    scalar). The slot form covers constants on either side (`x * 0.5`, `1 - x`, `x @ self.w`).
    """

_BROADCAST_RULE = """
    The operands broadcast by the numpy and torch rule: shapes are aligned at their last
    dimension, a missing leading dimension has size 1, and two sizes must be equal or one of them
    1, which is repeated. The result dtype is torch's type promotion (`torch.result_type`): a
    number does not widen a tensor of its kind (float16 · 2.0 is float16), and an integer tensor
    with a float number gives float32, torch's default float dtype (NumPy gives float64 there, so
    a NumPy implementation casts).
    """


def _binary(name: str, formula: str, *extra: ParameterSchema) -> OpSpec:
    """An elementwise binary op on ``x`` and ``other`` (ports or constant slots)."""
    return op(
        name,
        (formula, _OPERAND_RULE, _BROADCAST_RULE),
        inputs=(),
        optional_inputs=("x", "other"),
        parameters=(*_OPERANDS, *extra),
    )


def _variadic(name: str, semantics: str) -> OpSpec:
    """An op on the ports ``x0``, ``x1``, … joined along ``dim``."""
    numbering = """
        The inputs are the ports `x0`, `x1`, …, `x{n−1}`, n ≥ 1: numbered from 0 without gaps and
        taken in numeric order (`x2` before `x10`), whatever their order in the node's `inputs`.
        The result dtype is the type promotion of all inputs.
        """
    return op(
        name,
        (semantics, numbering),
        inputs=("x0",),
        variadic_inputs=True,
        parameters=(hyper("dim", "int", "The dimension joined along (negative counts from the end).", 0),),
    )


_DIM_RULE = """
    `dim` null reduces every dimension; an int, or a list of distinct ints, reduces those
    dimensions (negative counts from the end). An empty list is not allowed: torch reads it as
    every dimension and NumPy as none. With `keepdim` the reduced dimensions stay, with size 1;
    otherwise they are removed.
    """

_KEEPDIM = hyper("keepdim", "bool", "Keep reduced dimensions with size 1.", False)


def _reduction(name: str, semantics: str, *, single: bool = False) -> OpSpec:
    """A reduction over ``dim`` (``single``: one dimension or all of them, as ``argmax`` takes)."""
    if single:
        dim = hyper("dim", "int", "The dimension reduced; `null`: all of them, flattened.", None)
        return op(name, semantics, parameters=(dim, _KEEPDIM))
    dim = hyper("dim", ("int", "list"), "The dimensions reduced; `null`: all.", None)
    return op(name, (semantics, _DIM_RULE), parameters=(dim, _KEEPDIM))


_INDEX_ITEMS = (
    (
        "an int",
        "`3`, `-1`",
        "One position (negative counts from the end); the dimension is removed. Out of range is an error.",
    ),
    (
        "`[start, stop, step]`, each an int or `null`",
        "`1:5:2`; `:` is `[null, null, null]`",
        "A slice with Python's rules: `null` is the default, bounds are clamped. `step` must be positive, as torch "
        "requires.",
    ),
    ("`null`", "`None`", "A new dimension of size 1."),
    ('`"..."`', "`...`", "As many whole dimensions as the other items leave; at most once."),
    (
        '`"i0"`, `"i1"`, …',
        "a tensor",
        "The tensor wired to that input port: integers (advanced indexing) or bools (a mask over as many dimensions as "
        "it has).",
    ),
)


def _table(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> str:
    """A Markdown table, for docs whose rules read best as one."""
    lines = [header, tuple("---" for _ in header), *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


_GETITEM = op(
    "getitem",
    (
        """
        Indexing and slicing, `y = x[index]`, as torch's `Tensor.__getitem__`. `index` is a list
        with one item per component of the subscript (`x[0, 1:3]` has two, `x[0]` one), each one
        of:
        """,
        _table(("item", "in Python", "meaning"), _INDEX_ITEMS),
        """
        Dimensions no item reaches are kept whole. Tensor items broadcast together, and the
        dimensions they index are replaced by the broadcast shape: in place when the tensor items
        are adjacent, at the front of `y` otherwise. Integer items do not count as tensor items:
        torch removes their dimensions first, so `x[:, [0], :, 0]` of a `[5, 6, 7, 8]` tensor is
        `[5, 1, 7]`, where NumPy would count the integer as an advanced index and give `[1, 5, 7]`
        (a NumPy implementation applies the integer items first). The index ports are exactly
        `i0`, `i1`, … for the tensor items in order; a constant index list (`x[:, [0, 2]]`) is a
        `constant` node wired to one of them.
        """,
    ),
    variadic_inputs=True,
    parameters=(hyper("index", "list", "The subscript, one item per component (see above)."),),
)

_TUPLE_GET = op(
    "tuple_get",
    """
    `y` is the element `index` of `x`, a tuple or list value (negative counts from the end): torch's
    `operator.getitem` on a tuple. Catalog ops never produce tuples (they have named outputs), so
    tuples come from model inputs and from the ops of other namespaces.
    """,
    parameters=(hyper("index", "int", "Which element."),),
)

_CONSTANT = op(
    "constant",
    """
    `y = value`: a tensor as stored, or a number, bool, string, null or list as that Python value
    (not made a tensor). This is how a traced module's own parameters and buffers (`get_attr`) and
    literal constants enter the wiring; the entry's `learnable` flag says whether training may
    change it, and a shared entry shares the value as everywhere in the format.
    """,
    inputs=(),
    parameters=(ParameterSchema("value", ("any",), learnable=None, doc="The value, of any kind."),),
)

_MATMUL = op(
    "matmul",
    (
        """
        The matrix product, as `torch.matmul` (`numpy.matmul` has the same rules). Both operands
        1-D: their dot product, 0-d. Both 2-D: the matrix product. A 1-D `x` acts as `[1, n]` and
        a 1-D `other` as `[n, 1]`, that dimension being removed from `y`. Otherwise the last two
        dimensions multiply as matrices and the leading (batch) dimensions broadcast by the numpy
        rule. 0-d operands are not allowed.
        """,
        _OPERAND_RULE,
    ),
    inputs=(),
    optional_inputs=("x", "other"),
    parameters=_OPERANDS,
)

_ALPHA = hyper("alpha", "float", "Multiplier of `other`.", 1)

SPECS: tuple[OpSpec, ...] = (
    _binary("add", "`y = x + alpha · other`, as `torch.add` (and `+`).", _ALPHA),
    _binary("sub", "`y = x − alpha · other`, as `torch.sub` (and `-`).", _ALPHA),
    _binary("mul", "`y = x · other`, elementwise, as `torch.mul` (and `*`)."),
    _binary(
        "div",
        """
        `y = x / other`, as `torch.div` (and `/`, `//`). With `rounding_mode` null it is true
        division (integer operands give float32); `"trunc"` rounds the quotient toward zero and
        `"floor"` toward −∞ (Python's `//`), and integer operands then give an integer result.
        """,
        hyper("rounding_mode", "string", '`null`, `"trunc"` or `"floor"`.', None),
    ),
    _binary("pow", "`y = x ** other`, as `torch.pow` (and `**`; torch names the second operand `exponent`)."),
    _MATMUL,
    op("neg", "`y = −x`, as `torch.neg` (and unary `-`)."),
    _variadic(
        "concat",
        """
        Joins its inputs along the existing dimension `dim`, as `torch.cat` (`torch.concat`). The
        inputs have the same number of dimensions and the same sizes except along `dim`, where `y`
        has the sum of their sizes. (torch also skips 1-D inputs of shape `[0]` whatever `dim`
        is; writers should not rely on it.)
        """,
    ),
    _variadic(
        "stack",
        """
        Joins its inputs along a new dimension inserted at `dim`, as `torch.stack`: the inputs
        have the same shape, r dimensions, and `dim` runs from −(r + 1) to r.
        """,
    ),
    op(
        "reshape",
        """
        `y` holds the elements of `x` in C order with the shape `shape`, as `torch.reshape`. One
        entry may be −1, inferred from the element count; 0 is a size of 0 (not "copy this
        dimension", as in ONNX). `Tensor.view` is this op too: values are immutable, so a view and
        a copy are alike. Sizes that torch computed at run time (`x.view(x.size(0), -1)`) are
        written as numbers or −1: opset 1 has no shape input.
        """,
        parameters=(hyper("shape", "list", "The new sizes (ints)."),),
    ),
    op(
        "permute",
        """
        Reorders the dimensions, as `torch.permute`: dimension i of `y` is dimension `dims[i]` of
        `x`. `dims` is a permutation of the dimensions (negative counts from the end).
        """,
        parameters=(hyper("dims", "list", "The source dimension of each dimension of `y` (ints)."),),
    ),
    op(
        "transpose",
        "Swaps dimensions `dim0` and `dim1` (negative counts from the end), as `torch.transpose`.",
        parameters=(hyper("dim0", "int", "One dimension."), hyper("dim1", "int", "The other.")),
    ),
    op(
        "flatten",
        """
        Merges dimensions `start_dim` … `end_dim` (inclusive; negative counts from the end) into
        one, as `torch.flatten`: `x` reshaped in C order. A 0-d `x` gives shape `[1]`. Unlike the
        module `Flatten`, `start_dim` defaults to 0.
        """,
        parameters=(
            hyper("start_dim", "int", "First dimension merged.", 0),
            hyper("end_dim", "int", "Last dimension merged.", -1),
        ),
    ),
    op(
        "squeeze",
        """
        Removes dimensions of size 1, as `torch.squeeze`: every one when `dim` is null, else those
        `dim` names (an int or a list of ints, negative counting from the end) that have size 1; a
        named dimension of another size is kept, not an error.
        """,
        parameters=(hyper("dim", ("int", "list"), "The dimensions that may be removed; `null`: all.", None),),
    ),
    op(
        "unsqueeze",
        """
        Inserts a dimension of size 1 at position `dim` of `y`, as `torch.unsqueeze`; for `x` of
        r dimensions, `dim` runs from −(r + 1) to r and a negative one means `dim + r + 1`.
        """,
        parameters=(hyper("dim", "int", "Position of the new dimension in `y`."),),
    ),
    _reduction("mean", "The arithmetic mean over `dim`, as `torch.mean`; `x` has a floating dtype."),
    _reduction("sum", "The sum over `dim`, as `torch.sum`; bool and integer inputs are summed as int64."),
    _reduction(
        "max",
        """
        The largest element over `dim`, as `torch.amax`; a NaN makes its result NaN. torch's
        `max(x, dim)` gives values and indices: the values are this op, the indices `argmax` with
        the same `dim` and `keepdim`. The elementwise `torch.max(x, other)` is not this op.
        """,
    ),
    _reduction(
        "argmax",
        """
        The int64 index of the largest element along `dim`, as `torch.argmax`: the first one on
        ties, a NaN counting as the largest. With `keepdim` the dimension stays, with size 1;
        otherwise it is removed. `dim` null gives the 0-d index into the flattened `x`, and
        `keepdim` is then false.
        """,
        single=True,
    ),
    _GETITEM,
    _TUPLE_GET,
    _CONSTANT,
)
