"""The settings checks of :mod:`trama.catalog.attention`.

Two things are refused here, before any framework builds anything: a positive ``dropout_p``
(torch applies it in either mode, so it has no deterministic value: see the op's *Eval mode*)
and ``is_causal`` together with a wired ``attn_mask`` (torch refuses the pair). Shapes and dtypes
of the ports are only known when the op runs; the kernels check them there.
"""

from __future__ import annotations

from trama.catalog._reader import Checker, Flag, Number, Reader

__all__ = ["CHECKERS"]


def _deterministic(reader: Reader) -> None:
    """``dropout_p`` 0 only: any other value is dropout at run time, in every mode."""
    p = reader.values["dropout_p"]
    if p != 0.0:
        raise reader.error(
            f"dropout_p must be 0, got {p!r}: torch applies dropout whenever it is positive, in training and "
            "evaluation alike, so the result would be random (export the model in eval mode, where callers pass 0)"
        )


def _causal_or_mask(reader: Reader) -> None:
    """``is_causal`` and an ``attn_mask`` together are refused, as torch refuses them."""
    if reader.values["is_causal"] and "attn_mask" in reader.node.inputs:
        raise reader.error("is_causal is true and attn_mask is wired; torch refuses the two together")


#: Every op of the family's checker, by op name.
CHECKERS: dict[str, Checker] = {
    "scaled_dot_product_attention": Checker(
        {
            "dropout_p": Number(default=0.0),
            "is_causal": Flag(default=False),
            "scale": Number(default=None, nullable=True),
            "enable_gqa": Flag(default=False),
        },
        (_deterministic, _causal_or_mask),
    ),
}
