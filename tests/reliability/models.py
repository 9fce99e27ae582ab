"""The small models the reliability tests write, read and corrupt."""

from __future__ import annotations

import numpy as np

import trama


def linear_model(weight: np.ndarray) -> trama.Model:
    """One catalog ``Linear`` leaf, ``lin``, whose weight is ``weight`` (``[out, in]``)."""
    slots = {"weight": "lin.weight", "in_features": "lin.in_features", "out_features": "lin.out_features"}
    node = trama.Node("lin", "Linear", {"x": trama.Ref(trama.INPUT, "x")}, ["y"], slots)
    return trama.Model(
        ["x"],
        [trama.Ref("lin", "y")],
        [node],
        {
            "lin.weight": trama.Parameter(trama.Tensor.from_array(weight), learnable=True),
            "lin.in_features": trama.Parameter(weight.shape[1]),
            "lin.out_features": trama.Parameter(weight.shape[0]),
        },
    )
