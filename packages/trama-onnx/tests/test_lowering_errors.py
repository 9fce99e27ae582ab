"""A document the lowering cannot take is one :class:`trama_onnx.LoweringError` at the node to
blame, whichever lowering found out."""

from __future__ import annotations

import numpy as np
import pytest

from trama import INPUT, Model, Node, Parameter, Ref, Tensor, ValueFact
from trama_onnx import LoweringError, lower


def test_a_document_that_fails_on_numpy_is_blamed_on_the_node_that_failed() -> None:
    """The lowering learns dtypes and ranks by running the document on numpy: where that run
    fails at the Linear (its weight wants 5 features, the input has 4), the error names the
    Linear, though the ReLU before it is the first lowering that asks."""
    weight = np.ones((3, 5), np.float32)
    table = {
        "fc.weight": Parameter(Tensor.from_array(weight), True),
        "fc.in": Parameter(5),
        "fc.out": Parameter(3),
    }
    nodes = [
        Node("root", "Sequential", {"x": Ref(INPUT, "x")}, ["y"], output_bindings={"y": Ref("root.fc", "y")}),
        Node("root.act", "ReLU", {"x": Ref(INPUT, "x")}, ["y"]),
        Node(
            "root.fc",
            "Linear",
            {"x": Ref("root.act", "y")},
            ["y"],
            {"weight": "fc.weight", "in_features": "fc.in", "out_features": "fc.out"},
        ),
    ]
    model = Model(["x"], [Ref("root", "y")], nodes, table, input_facts=[ValueFact("float32", ("batch", 4))])
    with pytest.raises(LoweringError, match="does not run on numpy") as caught:
        lower(model)
    assert caught.value.node_id == "root.fc"
