"""Activations, each in two forms that mean the same: the module (``ReLU``, as ``torch.nn.ReLU``)
and the function (``relu``, as ``torch.nn.functional.relu``).

Both forms exist because exporters see both: a module attribute becomes a node named after its
class, a call in ``forward`` one named after the function. They share ports, slots and prose,
so each activation is written once and :func:`_forms` makes the pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from trama.catalog._build import hyper, op
from trama.format._specs import OpSpec, ParameterSchema

__all__ = ["SPECS"]


def _forms(module: str, function: str, formula: str, parameters: Sequence[ParameterSchema] = ()) -> tuple[OpSpec, ...]:
    """The module op and the function op of one activation."""
    shape = "`y` has the shape and dtype of `x`."
    return (
        op(
            module,
            (formula, f"{shape} As `torch.nn.{module}`; the function form is `{function}`."),
            parameters=parameters,
        ),
        op(
            function,
            (
                formula,
                f"{shape} As `torch.nn.functional.{function}` (and its torch aliases); the module form is `{module}`.",
            ),
            parameters=parameters,
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
        "`y = x · min(max(x + 3, 0), 6) / 6`, elementwise: 0 for `x ≤ −3`, `x` for `x ≥ 3`.",
    ),
)
