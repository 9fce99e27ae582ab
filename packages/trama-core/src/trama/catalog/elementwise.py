"""Catalog opset 2: unary math (`exp`, `rsqrt`, `erf`…), comparisons, logic, `where`, `clamp`, casts.

These are the elementwise calls real models make around their layers: attention masks
(`eq`, `logical_and`, `where`, `masked_fill`, `to`), RMSNorm (`rsqrt`, `to`), rotary embeddings
(`sin`, `cos`), T5's relative position buckets (`abs`, `log`, `lt`, `minimum`, `where`), and the
pieces of activations written by hand (`erf`, `exp`, `clamp`). Names and dtype rules are torch's;
the rules several ops share (how an operand is given, how dtypes promote, which input dtypes
give a float result) are written once here and spliced into each doc.

(The settings checks live in ``trama.catalog._elementwise_checks``.)
"""

from __future__ import annotations

from trama.catalog._build import hyper, op, operand
from trama.format._dtypes import DTYPE_NAMES
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["CAST_DTYPES", "FLOAT_RESULT_OPS", "LAYERS", "SPECS", "UNARY_OPS"]

#: The element types `to` converts to: every dtype name of the format.
CAST_DTYPES: tuple[str, ...] = DTYPE_NAMES

_SINCE = 2

_OPERANDS = (
    operand("x", "The first operand as a constant, when the port `x` is not wired."),
    operand("other", "The second operand as a constant, when the port `other` is not wired."),
)

_OPERAND_RULE = """
    Each operand is given exactly once: wired to the input port of its name, or held by the
    parameter slot of that name as a constant (a tensor, or a number or bool that acts as a Python
    scalar), as for the binary ops of the tensor functions (`add`).
    """

_BROADCAST_RULE = """
    The operands broadcast by the numpy and torch rule (shapes aligned at their last dimension,
    sizes equal or 1). The operands are first converted to their type promotion
    (`torch.result_type`: a number does not widen a tensor of its kind, `float16 < 0.1` compares
    in float16, an integer tensor against a float number compares in float32), an integer number
    wrapping to the promoted integer type as torch wraps it (`uint8 == -1` is true for 255).
    """

_FLOAT_RESULT = """
    A floating `x` gives its own dtype (float16 and bfloat16 are computed in float32 and rounded
    once, as torch computes them); a bool or integer `x` gives float32, torch's default float
    dtype (`exp` of an int64 tensor is float32).
    """

_NAN = "NaN gives NaN."


def _float_unary(name: str, formula: str, edges: str) -> OpSpec:
    """A transcendental op: floating result, integers promoted to float32."""
    return op(name, (formula, _FLOAT_RESULT, edges), since=_SINCE)


#: The unary ops whose result is floating whatever the input (integers give float32).
FLOAT_RESULT_OPS: tuple[str, ...] = (
    "exp",
    "log",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "erf",
    "reciprocal",
)

_UNARY: tuple[OpSpec, ...] = (
    op(
        "abs",
        """
        `y = |x|`, as `torch.abs`. The dtype of `x` is kept: integers stay integers (the most
        negative value of a signed type is its own absolute value, wrapping as in torch), and
        bool is refused, as torch refuses it. `abs(−0.0)` is `0.0`; NaN gives NaN.
        """,
        since=_SINCE,
    ),
    _float_unary("exp", "`y = eˣ`, as `torch.exp`.", "Large `x` overflows to inf, as in torch. " + _NAN),
    _float_unary(
        "log",
        "`y = ln x`, the natural logarithm, as `torch.log`.",
        "`log(0)` is −inf, a negative `x` gives NaN, `log(inf)` is inf. " + _NAN,
    ),
    _float_unary(
        "log1p",
        "`y = ln(1 + x)`, as `torch.log1p`, accurate for small `|x|`.",
        "`log1p(−1)` is −inf, `x < −1` gives NaN. " + _NAN,
    ),
    _float_unary("expm1", "`y = eˣ − 1`, as `torch.expm1`, accurate for small `|x|`.", "`expm1(−inf)` is −1. " + _NAN),
    _float_unary(
        "sqrt",
        "`y = √x`, as `torch.sqrt`.",
        "A negative `x` gives NaN; `sqrt(−0.0)` is `−0.0`. " + _NAN,
    ),
    _float_unary(
        "rsqrt",
        "`y = 1 / √x`, as `torch.rsqrt` (the scale of RMSNorm).",
        "`rsqrt(0)` is inf, `rsqrt(−0.0)` is −inf, a negative `x` gives NaN, `rsqrt(inf)` is 0. " + _NAN,
    ),
    _float_unary("sin", "`y = sin x` (`x` in radians), as `torch.sin`.", "±inf gives NaN. " + _NAN),
    _float_unary("cos", "`y = cos x` (`x` in radians), as `torch.cos`.", "±inf gives NaN. " + _NAN),
    _float_unary(
        "erf",
        "`y = erf x = (2/√π) ∫₀ˣ e^(−t²) dt`, the error function, as `torch.erf`.",
        "±inf gives ±1. " + _NAN,
    ),
    _float_unary(
        "reciprocal",
        "`y = 1 / x`, as `torch.reciprocal`.",
        "`1 / 0` is inf and `1 / −0.0` is −inf (an integer 0 gives inf too: the result is float). " + _NAN,
    ),
    op(
        "floor",
        """
        `y = ⌊x⌋`, the largest integer not greater than `x`, as `torch.floor`. A floating `x`
        keeps its dtype (the result is exact); an integer `x` is returned as it is; bool is
        refused, as torch refuses it. NaN and ±inf are returned as they are.
        """,
        since=_SINCE,
    ),
    op(
        "ceil",
        """
        `y = ⌈x⌉`, the smallest integer not less than `x`, as `torch.ceil`. A floating `x` keeps
        its dtype (`ceil(−0.5)` is `−0.0`); an integer `x` is returned as it is; bool is refused.
        NaN and ±inf are returned as they are.
        """,
        since=_SINCE,
    ),
    op(
        "round",
        """
        `x` rounded to `decimals` decimal places, as `torch.round`: halfway cases go to the even
        neighbour (`round(0.5)` is 0, `round(1.5)` is 2, `round(−2.5)` is −2), not away from zero
        as Python 2 did. With `decimals` 0 the result is exact. With `decimals` d > 0 it is
        computed as torch computes it, `rint(x · 10ᵈ) / 10ᵈ`, and with d < 0 as
        `rint(x / 10⁻ᵈ) · 10⁻ᵈ`, in float32 for float32 and 16-bit inputs (then rounded to the
        input's dtype) and in float64 for float64 inputs, so that a value whose scaled form is a
        tie after that rounding rounds as torch rounds it (`round(1.35, decimals=1)` in float32 is
        1.4). A floating `x` keeps its dtype. An integer `x` is returned as it is when `decimals`
        is 0 and refused otherwise, and bool is refused, as torch does. NaN and ±inf are returned
        as they are.
        """,
        parameters=(hyper("decimals", "int", "Decimal places (negative: tens, hundreds…).", 0),),
        since=_SINCE,
    ),
    op(
        "sign",
        """
        `y` is −1, 0 or 1 as `x` is negative, zero or positive, as `torch.sign`, in the dtype of
        `x` (bool is returned as it is). Unlike NumPy, torch gives 0 for NaN, and so does the
        catalog; the sign of a zero result is not specified.
        """,
        since=_SINCE,
    ),
    op(
        "square",
        """
        `y = x · x`, as `torch.square`. A floating or integer `x` keeps its dtype (integers wrap on
        overflow, as in torch); a bool `x` gives int64 (torch computes `x ** 2`, whose promotion
        with the integer 2 is int64).
        """,
        since=_SINCE,
    ),
)

#: The one-input math ops (port `x`, output `y`).
UNARY_OPS: tuple[str, ...] = tuple(spec.name for spec in _UNARY)


def _comparison(name: str, relation: str, symbol: str) -> OpSpec:
    return op(
        name,
        (
            f"""
            `y = x {relation} other`, elementwise, as `torch.{name}` (and `{symbol}`): a bool
            tensor. A comparison with NaN is false, except `ne`, which is true.
            """,
            _OPERAND_RULE,
            _BROADCAST_RULE,
        ),
        inputs=(),
        optional_inputs=("x", "other"),
        parameters=_OPERANDS,
        since=_SINCE,
    )


_COMPARISONS: tuple[OpSpec, ...] = (
    _comparison("eq", "=", "=="),
    _comparison("ne", "≠", "!="),
    _comparison("lt", "<", "<"),
    _comparison("le", "≤", "<="),
    _comparison("gt", ">", ">"),
    _comparison("ge", "≥", ">="),
)

_TRUTH = """
    Each element counts as true when it is not zero (a NaN is true), whatever the dtype; the
    result is a bool tensor.
    """


def _logical(name: str, formula: str) -> OpSpec:
    return op(
        name,
        (
            f"`y = {formula}`, elementwise, as `torch.{name}`; `x` and `other` broadcast, and both are "
            "tensors wired to their ports (torch takes no number here).",
            _TRUTH,
        ),
        inputs=("x", "other"),
        since=_SINCE,
    )


_BITWISE_TYPES = """
    The operands are bool or integer tensors (or numbers of those kinds), never floating: torch
    refuses those. The result dtype is their type promotion (a bool tensor `&` the number 1 is
    int64); on bools the operation is the logical one.
    """


def _bitwise(name: str, symbol: str, meaning: str) -> OpSpec:
    return op(
        name,
        (
            f"`y = x {symbol} other`, the bitwise {meaning} of two's-complement integers, elementwise, as "
            f"`torch.{name}` (and `{symbol}`, `Tensor.__{name.removeprefix('bitwise_')}__`).",
            _BITWISE_TYPES,
            _OPERAND_RULE,
            _BROADCAST_RULE,
        ),
        inputs=(),
        optional_inputs=("x", "other"),
        parameters=_OPERANDS,
        since=_SINCE,
    )


_LOGIC: tuple[OpSpec, ...] = (
    _logical("logical_and", "x ∧ other"),
    _logical("logical_or", "x ∨ other"),
    _logical("logical_xor", "x ⊕ other (true where exactly one is true)"),
    op("logical_not", ("`y = ¬x`, elementwise, as `torch.logical_not`.", _TRUTH), since=_SINCE),
    _bitwise("bitwise_and", "&", "and"),
    _bitwise("bitwise_or", "|", "or"),
    _bitwise("bitwise_xor", "^", "exclusive or"),
    op(
        "bitwise_not",
        """
        `y = ~x`, the bitwise complement, as `torch.bitwise_not` (and `~`): on integers `−x − 1`
        (unsigned ones `max − x`), on bools logical not. The dtype of `x` is kept; floating `x` is
        refused, as torch refuses it.
        """,
        since=_SINCE,
    ),
)

_MIN_MAX_DOC = """
    `y = {what}(x, other)`, elementwise, as `torch.{name}` (and `torch.{short}(x, other)`, the
    elementwise form of `torch.{short}`): a NaN in either operand makes that element NaN (unlike
    `fmin`/`fmax`). Both operands are tensors wired to their ports (torch takes no number here);
    they broadcast, and the result dtype is their type promotion (`torch.result_type`; on bools
    the minimum is logical and, the maximum logical or).
    """

_SELECTION: tuple[OpSpec, ...] = (
    op(
        "where",
        (
            """
            `y = x` where `condition` is true, `other` where it is false, elementwise, as
            `torch.where(condition, x, other)` (torch names `x` `input`). `condition` is a bool
            tensor wired to its port (torch's deprecated uint8 conditions are refused); `x` and
            `other` are each given exactly once, wired to the port of its name or held by the slot
            of that name as a constant (a tensor, or a number or bool: `torch.where(mask, x, 0.0)`).
            The three broadcast together by the numpy rule. The result dtype is the type promotion
            of `x` and `other` alone (`torch.result_type`): a number does not widen a tensor of its
            kind (`where(c, float16, 0.0)` is float16), an integer tensor with a float number
            gives float32, two numbers give bool, int64 or float32 by their kind. JSON has no
            number for ±inf or NaN: such a branch is a 0-d tensor, whose dtype an exporter
            chooses as the promotion above, so that the result dtype stays the number's.
            """,
        ),
        inputs=("condition",),
        optional_inputs=("x", "other"),
        parameters=_OPERANDS,
        since=_SINCE,
    ),
    op(
        "masked_fill",
        """
        `y` is `x` with the elements where `mask` is true replaced by `value`, as
        `torch.masked_fill` (`Tensor.masked_fill`). `mask` is a bool tensor (torch refuses other
        dtypes) and `x` and `mask` broadcast: `y` has their broadcast shape, and the dtype of `x`.
        `value` is given exactly once: wired to the port `value` (a 0-d tensor, as
        `masked_fill.Tensor` takes it) or held by the slot `value` (a number or bool, or a 0-d
        tensor). It is converted to the dtype of `x` as torch converts a scalar: to an integer
        type by truncation toward zero, to bool as `value ≠ 0`, to a float type by rounding; a
        finite value outside the range of that dtype is an error, as in torch (`−inf` into a
        float16 tensor is allowed, `−1e9` is not). A `value` on the port is converted without
        that range check where the framework cannot read it when it builds (JAX). JSON has no
        number for −inf or NaN: such a value is a 0-d tensor (held, or on the port).
        """,
        inputs=("x", "mask"),
        optional_inputs=("value",),
        parameters=(
            ParameterSchema(
                "value",
                ("tensor", "int", "float", "bool"),
                optional=True,
                learnable=None,
                doc="The fill value as a constant (a number, a bool or a 0-d tensor), when the port `value` "
                "is not wired.",
            ),
        ),
        since=_SINCE,
    ),
    op(
        "clamp",
        """
        `y = min(max(x, min), max)`, elementwise, as `torch.clamp` (`torch.clip`, `clamp_min`,
        `clamp_max`): each bound is a number held by its slot (`null` or absent: no bound), or a
        tensor wired to the port of the same name (`clamp.Tensor`: bounds that broadcast with
        `x`); a bound is never both, and one bound may be a port and the other a number (the
        same as clamping by one and then by the other). At least one bound must be given, as
        torch requires. Where
        `min` > `max` the result is `max`, as torch's order of operations gives. A NaN in `x` or
        in a bound makes that element NaN. The result dtype is the type promotion of `x` and the
        bounds given (`torch.result_type`): an integer tensor clamped by `0.5` is float32, by `0`
        stays integer. Bool results are refused, as torch refuses them. A float bound outside
        the range of a float16 or bfloat16 result is an error in torch; such documents are not
        portable.
        """,
        optional_inputs=("min", "max"),
        parameters=(
            hyper("min", "float", "The lower bound as a number (an int stays an int); `null`: none.", None),
            hyper("max", "float", "The upper bound as a number (an int stays an int); `null`: none.", None),
        ),
        since=_SINCE,
    ),
    op(
        "minimum",
        _MIN_MAX_DOC.format(what="min", name="minimum", short="min"),
        inputs=("x", "other"),
        since=_SINCE,
    ),
    op(
        "maximum",
        _MIN_MAX_DOC.format(what="max", name="maximum", short="max"),
        inputs=("x", "other"),
        since=_SINCE,
    ),
)

_TO = op(
    "to",
    f"""
    `x` converted to the element type `dtype`, as `Tensor.to(dtype)` (and `.float()`, `.half()`,
    `.bool()`, `.long()`…, `type_as`): one of {", ".join(f"`{name}`" for name in CAST_DTYPES)}.
    A dtype that is already that of `x` returns `x`. The conversions are torch's:

    * float to float rounds to nearest, ties to even (float32 to bfloat16 too); a value beyond
      the target's range becomes ±inf, NaN stays NaN;
    * float to integer truncates toward zero (`2.7` → 2, `−2.7` → −2). NaN, ±inf and values
      outside the integer type's range have no defined result in torch: the catalog leaves that
      result unspecified, and each framework gives its own;
    * integer to integer keeps the low bits (two's complement: int64 300 → uint8 44, → int8 44;
      int64 −1 → uint8 255);
    * integer to float rounds to nearest; bool to a number gives 0 and 1;
    * anything to bool is `x ≠ 0` (NaN is true, `−0.0` false).

    A runtime without 64-bit types (JAX outside x64 mode) gives int32 for int64 and float32 for
    float64.
    """,
    parameters=(hyper("dtype", "string", "The target element type, a dtype name of the format."),),
    since=_SINCE,
)

#: Function ops of this family (category ``elementwise``).
SPECS: tuple[OpSpec, ...] = (*_UNARY, *_COMPARISONS, *_LOGIC, *_SELECTION, _TO)

#: Module ops of this family, printed with the layers.
LAYERS: tuple[OpSpec, ...] = ()
