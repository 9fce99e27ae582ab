"""A tiny numpy "modeling library" that implements trama's two protocols by hand.

It stands in for a real library (trama-torch and friends come as separate packages) so that the
demo and the core's tests can export, save, load and import models with nothing but numpy.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

import trama
from trama import NodeFragment, OpRegistry, OpSpec, Param, Parameter, ParameterSchema


class Linear:
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``[out, in]``."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray | None = None) -> None:
        self.weight = weight
        self.bias = bias

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x @ np.asarray(self.weight).T
        return y + np.asarray(self.bias) if self.bias is not None else y

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        out_features, in_features = np.shape(self.weight)
        parameters: dict[str, Any] = {
            "in_features": in_features,
            "out_features": out_features,
            "weight": Param(self.weight, learnable=True),
        }
        if self.bias is not None:
            parameters["bias"] = Param(self.bias, learnable=True)
        return NodeFragment(op="Linear", outputs=["y"], parameters=parameters)

    @classmethod
    def from_node(cls, node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> Linear:
        bias = parameters.get("bias")
        return cls(np.asarray(parameters["weight"].value), None if bias is None else np.asarray(bias.value))


class ReLU:
    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x, 0)

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        return NodeFragment(op="ReLU", outputs=["y"])

    @classmethod
    def from_node(cls, node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> ReLU:
        return cls()


class Sequential:
    """Children applied in order; exported as a composite whose wiring is the chain."""

    def __init__(self, *layers: Any) -> None:
        self.layers = list(layers)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        for layer in self.layers:
            x = layer(x)
        return x

    def to_node(self, ctx: trama.ExportContext) -> NodeFragment:
        ref = ctx.input("x")
        for index, layer in enumerate(self.layers):
            ref = ctx.child(f"layers_{index}", layer, inputs={"x": ref}, outputs=["y"])["y"]
        return NodeFragment(op="Sequential", outputs=["y"], output_bindings={"y": ref})

    @classmethod
    def from_node(
        cls, node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
    ) -> Sequential:
        return cls(*children.values())


def registry() -> OpRegistry:
    """The specs of the toy ops, with their factories."""
    return OpRegistry(
        [
            OpSpec(
                "Linear",
                inputs=("x",),
                outputs=("y",),
                parameters=(
                    ParameterSchema("in_features", ("int",)),
                    ParameterSchema("out_features", ("int",)),
                    ParameterSchema("weight", ("tensor",), learnable=True),
                    ParameterSchema("bias", ("tensor",), optional=True, learnable=True),
                ),
                factory=Linear,
            ),
            OpSpec("ReLU", inputs=("x",), outputs=("y",), factory=ReLU),
            OpSpec("Sequential", inputs=("x",), outputs=("y",), composite=True, factory=Sequential),
        ]
    )


def mlp(sizes: list[int], seed: int = 0) -> Sequential:
    """A ReLU multi-layer perceptron with random float32 weights."""
    rng = np.random.default_rng(seed)
    layers: list[Any] = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        if layers:
            layers.append(ReLU())
        layers.append(
            Linear(
                rng.standard_normal((fan_out, fan_in)).astype(np.float32),
                rng.standard_normal(fan_out).astype(np.float32),
            )
        )
    return Sequential(*layers)
