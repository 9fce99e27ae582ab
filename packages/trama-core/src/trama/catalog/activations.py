"""Activations, each in two forms that mean the same: the module (``ReLU``, as ``torch.nn.ReLU``)
and the function (``relu``, as ``torch.nn.functional.relu``).

Both forms exist because exporters see both: a module attribute becomes a node named after its
class, a call in ``forward`` one named after the function. They share ports, slots and prose,
so each activation is written once and :func:`_forms` makes the pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from trama.catalog._build import hyper, op, weight
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["SPECS"]


def _forms(
    module: str,
    function: str,
    formula: str,
    parameters: Sequence[ParameterSchema] = (),
    *,
    since: int = 1,
    shape: str = "`y` has the shape and dtype of `x`.",
    module_parameters: Sequence[ParameterSchema] | None = None,
    function_inputs: Sequence[str] = ("x",),
) -> tuple[OpSpec, ...]:
    """The module op and the function op of one activation, added in catalog opset ``since``.

    They share the formula, the shape sentence and, normally, the slots. An activation with a
    learned weight (``PReLU``) differs: the module holds it in ``module_parameters`` (its
    ``state_dict`` key) while the function takes it on an input port of ``function_inputs``,
    as ``torch.nn.functional`` takes it as an argument."""
    return (
        op(
            module,
            (formula, f"{shape} As `torch.nn.{module}`; the function form is `{function}`."),
            parameters=parameters if module_parameters is None else module_parameters,
            since=since,
        ),
        op(
            function,
            (
                formula,
                f"{shape} As `torch.nn.functional.{function}` (and its torch aliases); the module form is `{module}`.",
            ),
            inputs=function_inputs,
            parameters=parameters,
            since=since,
        ),
    )


_SOFTMAX_DIM = hyper(
    "dim",
    "int",
    """
    The dimension normalized (negative counts from the end). `null` is torch's legacy implicit
    dimension: 0 when `x` has 0, 1 or 3 dimensions, else 1. Exporters should write the dimension.
    """,
    None,
)

#: torch's ``dtype`` argument of the softmaxes is a cast before the op, which opset 1 cannot say.
_SOFTMAX_DTYPE = "torch's `dtype` argument has no slot: exporters refuse a call that sets it."

#: The opset-2 activations take floating-point `x` only.
_FLOATING = "`x` must be floating-point; an integer `x` is refused."

#: The ops that torch also computes on integer tensors (with its settings truncated to integers).
_FLOATING_CLAMP = (
    "`x` must be floating-point: torch also accepts integer tensors here, converting the settings "
    "to their integer type, which the catalog does not define, so an integer `x` is refused."
)

#: A setting compared with `x` is a number of `x`'s dtype, as in torch's kernels.
_ROUNDED = "rounded to `x`'s dtype first, as in torch's kernels"

#: ... or of the dtype `x` is computed in: float32 for the 16-bit floats (see "Half precision").
_ROUNDED_OPMATH = (
    "rounded first to the dtype `x` is computed in (`x`'s own; float32 for float16 and bfloat16, "
    "see *Half precision*), as in torch's kernels"
)

_SELU_ALPHA = "1.6732632423543772848170429916717"
_SELU_SCALE = "1.0507009873554804934193349852946"

_PRELU = f"""
    `y = x` where `x > 0`, else `w · x`, elementwise, where `w` is the weight of the element's
    channel: its index along dimension 1 of `x` (torch's layout `[N, C, …]`; an `x` of 0 or 1
    dimensions has one channel). The weight holds one value, shared by every channel, or one per
    channel (`x.shape[1]` of them); any other count is refused. `x = 0` gives `w · 0` (−0 for a
    negative `w`, NaN for an infinite one) and NaN stays NaN. The function form takes the weight on
    the input port `weight`, a 0-d or 1-d tensor of `x`'s dtype (torch does not promote between
    them); the module holds it in the slot `weight`. {_FLOATING}
    """

_OPSET_2: tuple[OpSpec, ...] = (
    *_forms(
        "ReLU6",
        "relu6",
        f"""
        `y = min(max(x, 0), 6)`, elementwise: `hardtanh` with `min_val` 0 and `max_val` 6. NaN
        stays NaN. {_FLOATING_CLAMP}
        """,
        since=2,
    ),
    *_forms(
        "Hardtanh",
        "hardtanh",
        f"""
        `y = min(max(x, min_val), max_val)`, elementwise (a clamp, the bounds {_ROUNDED}). NaN
        stays NaN. `min_val > max_val` is refused; the module form also refuses
        `min_val = max_val`, as `torch.nn.Hardtanh` does. {_FLOATING_CLAMP}
        """,
        (
            hyper("min_val", "float", "The lower bound.", -1.0),
            hyper("max_val", "float", "The upper bound.", 1.0),
        ),
        since=2,
    ),
    *_forms(
        "Hardsigmoid",
        "hardsigmoid",
        f"""
        `y = min(max(x + 3, 0), 6) / 6`, elementwise: 0 for `x ≤ −3`, 1 for `x ≥ 3`, the line
        `x / 6 + 1/2` between. NaN stays NaN. {_FLOATING}
        """,
        since=2,
    ),
    *_forms(
        "Mish",
        "mish",
        f"""
        `y = x · tanh(softplus(x))` with `softplus(x) = log(1 + exp(x))`, elementwise. `x = +inf`
        gives `+inf`; `x = −inf` gives NaN (`−inf · tanh(0)`), in torch as in the formula.
        {_FLOATING}
        """,
        since=2,
    ),
    *_forms(
        "PReLU",
        "prelu",
        _PRELU,
        since=2,
        module_parameters=(
            hyper("num_parameters", "int", "The number of weights: 1 (shared), or the channel count `x.shape[1]`.", 1),
            weight("weight", "The slopes for negative inputs, `[num_parameters]`, used in `x`'s dtype."),
        ),
        function_inputs=("x", "weight"),
    ),
    *_forms(
        "SELU",
        "selu",
        f"""
        `y = scale · x` where `x > 0`, else `scale · α · (exp(x) − 1)`, elementwise, with torch's
        constants `α = {_SELU_ALPHA}` and `scale = {_SELU_SCALE}`. {_FLOATING}
        """,
        since=2,
    ),
    *_forms(
        "CELU",
        "celu",
        f"""
        `y = x` where `x > 0`, else `alpha · (exp(x / alpha) − 1)`, elementwise. `alpha = 0` is
        refused (torch divides by it). {_FLOATING}
        """,
        (hyper("alpha", "float", "α, the negative saturation value; not 0.", 1.0),),
        since=2,
    ),
    *_forms(
        "GLU",
        "glu",
        f"""
        The gated linear unit: `x` is split along `dim` into halves `a` (the first) and `b` (the
        second), and `y = a · σ(b)`, `σ(b) = 1 / (1 + exp(−b))`. The size of `x` along `dim`
        must be even (0 is even: `y` is then empty); a 0-d `x` is refused. {_FLOATING}
        """,
        (hyper("dim", "int", "The dimension split in halves (negative counts from the end).", -1),),
        since=2,
        shape="`y` has the shape of `x` with the size along `dim` halved, and the dtype of `x`.",
    ),
    *_forms(
        "LogSigmoid",
        "logsigmoid",
        f"""
        `y = log σ(x) = −log(1 + exp(−x))`, elementwise, evaluated without overflow as
        `min(x, 0) − log(1 + exp(−|x|))`: `−inf` gives `−inf`, `+inf` gives 0, NaN stays NaN.
        {_FLOATING}
        """,
        since=2,
    ),
    *_forms(
        "Softsign",
        "softsign",
        f"""
        `y = x / (1 + |x|)`, elementwise. `±inf` gives NaN (`inf / inf`), in torch as in the
        formula. {_FLOATING}
        """,
        since=2,
    ),
    *_forms(
        "Tanhshrink",
        "tanhshrink",
        f"`y = x − tanh(x)`, elementwise (`±inf` stays `±inf`). {_FLOATING}",
        since=2,
    ),
    *_forms(
        "Hardshrink",
        "hardshrink",
        f"""
        `y = 0` where `−lambd ≤ x ≤ lambd`, else `x`, elementwise, `lambd` {_ROUNDED} (a float16
        or bfloat16 `x`'s own dtype too). A negative `lambd` leaves every value as it is; NaN stays
        NaN. {_FLOATING}
        """,
        (hyper("lambd", "float", "λ, the half-width of the interval set to 0.", 0.5),),
        since=2,
    ),
    *_forms(
        "Softshrink",
        "softshrink",
        f"""
        `y = x − lambd` where `x > lambd`, `x + lambd` where `x < −lambd`, else `x · 0` (a zero
        with `x`'s sign), elementwise, `lambd` {_ROUNDED_OPMATH}. NaN stays NaN. A negative `lambd` is
        refused, as torch refuses it. {_FLOATING}
        """,
        (hyper("lambd", "float", "λ ≥ 0, the amount every value is moved towards 0.", 0.5),),
        since=2,
    ),
    *_forms(
        "Threshold",
        "threshold",
        f"""
        `y = value` where `x ≤ threshold`, else `x`, elementwise, `threshold` and `value`
        each {_ROUNDED_OPMATH}. NaN (never `≤`) stays NaN. {_FLOATING_CLAMP}
        """,
        (
            hyper("threshold", "float", "Values at or below it are replaced."),
            hyper("value", "float", "What replaces them."),
        ),
        since=2,
    ),
    *_forms(
        "Softmin",
        "softmin",
        f"""
        `y = softmax(−x)` along `dim`: `exp(m − x) / Σ exp(m − x)`, the sum and the minimum `m`
        taken along `dim`. {_SOFTMAX_DTYPE}
        """,
        (_SOFTMAX_DIM,),
        since=2,
    ),
)

SPECS: tuple[OpSpec, ...] = (
    *_forms("ReLU", "relu", "`y = max(x, 0)`, elementwise; NaN stays NaN."),
    *_forms(
        "LeakyReLU",
        "leaky_relu",
        "`y = x` where `x ≥ 0`, else `negative_slope · x`, elementwise.",
        (hyper("negative_slope", "float", "Slope for negative inputs.", 0.01),),
    ),
    *_forms(
        "GELU",
        "gelu",
        """
        The Gaussian error linear unit, elementwise. `approximate` `"none"`:
        `y = x · Φ(x) = 0.5 · x · (1 + erf(x / √2))`. `approximate` `"tanh"`:
        `y = 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`.
        """,
        (hyper("approximate", "string", '`"none"` (exact) or `"tanh"`.', "none"),),
    ),
    *_forms("SiLU", "silu", "`y = x · σ(x) = x / (1 + exp(−x))`, elementwise (also called swish)."),
    *_forms("Sigmoid", "sigmoid", "`y = σ(x) = 1 / (1 + exp(−x))`, elementwise."),
    *_forms("Tanh", "tanh", "`y = tanh(x)`, elementwise."),
    *_forms(
        "Softmax",
        "softmax",
        f"""
        `y = exp(x − m) / Σ exp(x − m)`, the sum and the maximum `m` taken along `dim` (subtracting
        `m` changes nothing but avoids overflow). {_SOFTMAX_DTYPE}
        """,
        (_SOFTMAX_DIM,),
    ),
    *_forms(
        "LogSoftmax",
        "log_softmax",
        f"""
        `y = x − m − log Σ exp(x − m)`, the sum and the maximum `m` taken along `dim`: the logarithm
        of the softmax, computed without overflow. {_SOFTMAX_DTYPE}
        """,
        (_SOFTMAX_DIM,),
    ),
    *_forms(
        "Softplus",
        "softplus",
        "`y = log(1 + exp(beta · x)) / beta`, elementwise, except `y = x` where `beta · x > threshold`.",
        (
            hyper("beta", "float", "β, the sharpness.", 1.0),
            hyper("threshold", "float", "Where `beta · x` exceeds it, `y = x`.", 20.0),
        ),
    ),
    *_forms(
        "ELU",
        "elu",
        "`y = x` where `x > 0`, else `alpha · (exp(x) − 1)`, elementwise.",
        (hyper("alpha", "float", "α, the negative saturation value.", 1.0),),
    ),
    *_forms(
        "Hardswish",
        "hardswish",
        """
        `y = x · min(max(x + 3, 0), 6) / 6`, elementwise: `x` for `x ≥ 3`, and `x · 0` (a zero with
        `x`'s sign) for finite `x ≤ −3`. `x = −inf` gives NaN (`−inf · 0`), in torch as in the
        formula; NaN stays NaN.
        """,
    ),
    *_OPSET_2,
)
