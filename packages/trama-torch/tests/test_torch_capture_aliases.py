"""aten's other names for catalog ops (:mod:`trama_torch.capture.aten_aliases`): a model that calls
``torch.multiply``, ``torch.greater``, ``torch.absolute`` or ``torch.special.expit`` exports the
same document as one that calls ``torch.mul``, ``torch.gt``, ``torch.abs`` or ``torch.sigmoid``,
imports back bit for bit and runs on every runtime; the alias table matches this torch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import trama
from trama_torch.capture import aten_aliases
from trama_torch.capture.aten import _handlers

RUNTIMES = ["numpy", "torch:cpu", "jax:cpu"]


class Aliased(nn.Module):
    """Every alias of the table that a model calls by its Python name."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        product = torch.multiply(x, y)
        difference = torch.subtract(product, y, alpha=2)
        quotient = torch.divide(difference, y.abs() + 1)
        floored = torch.divide(x, 0.5, rounding_mode="floor")
        true = torch.true_divide(quotient, 3)
        magnitude = torch.absolute(torch.negative(true))
        written = x.clone()
        written.multiply_(2).subtract_(y).divide_(4)
        compared = (
            torch.greater(x, y),
            torch.greater_equal(x, 0),
            torch.less(x, y),
            torch.less_equal(x, 0.5),
            torch.not_equal(x, y),
        )
        special = (
            torch.special.expit(x),
            torch.special.erf(x),
            torch.special.expm1(x),
            torch.special.log1p(magnitude),
            torch.special.round(x, decimals=1),
            torch.special.softmax(x, 1),
            torch.special.log_softmax(x, 1),
            torch.special.logsumexp(x, 1),
            torch.sgn(x),
        )
        joined = torch.concatenate([x, y], dim=1)
        product_matrix = torch.linalg.matmul(x, y.mT)
        return (floored, magnitude, written, *compared, *special, joined, product_matrix)


def test_aliases_export_as_their_originals_and_agree_everywhere() -> None:
    model = Aliased().eval()
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    outputs = [f"y{k}" for k in range(len(model(x, y)))]
    exported = trama.export_model(model, inputs=["x", "y"], outputs=outputs, example_inputs=(x, y))
    document = trama.loads(trama.dumps(exported))
    ops = {node.op for node in document.nodes}
    assert {"mul", "sub", "div", "abs", "neg", "gt", "ge", "lt", "le", "ne", "sigmoid", "erf", "concat"} <= ops
    assert {"expm1", "log1p", "round", "softmax", "log_softmax", "logsumexp", "sign", "matmul"} <= ops
    back = trama.import_model(document, registry=trama.registry("torch"))
    with torch.no_grad():
        expected, got = model(x, y), back(x, y)
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == want.dtype
        assert torch.equal(have, want)
    for name in RUNTIMES:
        results = trama.runtime_for_name(name).prepare(document).run([x.numpy(), y.numpy()])
        for want, have in zip(expected, results, strict=True):
            np.testing.assert_allclose(
                np.asarray(have).astype(np.float64), want.numpy().astype(np.float64), rtol=1e-5, atol=1e-5
            )


@pytest.mark.parametrize(("alias", "original"), aten_aliases.ALIASES, ids=[pair[0] for pair in aten_aliases.ALIASES])
def test_every_alias_of_the_table_exists_and_takes_its_originals_arguments(alias: str, original: str) -> None:
    """The handlers bind arguments by name, so each alias overload must have its original's
    argument names; an alias this torch lacks (or renamed) fails here, not in a user's export."""
    overloads = [(a, o) for a, o in aten_aliases.pairs() if a.overloadpacket.__name__ == alias]
    assert overloads, f"aten.{alias} has no overload that maps onto aten.{original}"
    handlers = _handlers()
    for alias_overload, original_overload in overloads:
        names = [argument.name for argument in alias_overload._schema.arguments]
        assert names == [argument.name for argument in original_overload._schema.arguments], alias_overload
        assert handlers[alias_overload] is handlers[original_overload]
