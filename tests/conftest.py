"""Shared fixtures for the core test suite.

* ``demo/`` goes on ``sys.path`` so that tests can ``import toylayers`` (the toy numpy layer
  library that implements trama's protocols).
* ``toy_registry`` / ``mlp_module`` / ``mlp_model``: the toy layers ready to export and import.
* ``make_doc`` builds a small valid document as plain Python data (a fresh copy on every call),
  for tests that corrupt one field at a time; ``tensor_json`` encodes an array the way the
  format stores it inline.
"""

from __future__ import annotations

import base64
import copy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "demo"
LEGACY_FIXTURES = REPO / "tests" / "fixtures" / "legacy"

if str(DEMO) not in sys.path:
    sys.path.insert(0, str(DEMO))

import toylayers  # noqa: E402

import trama  # noqa: E402


def tensor_json(array: Any, dtype: str | None = None) -> dict[str, Any]:
    """``{"dtype", "shape", "data"}`` of an array: base64 of its little-endian C-order bytes."""
    array = np.asarray(array)
    name = dtype or trama.Tensor.from_array(array).dtype
    raw = np.ascontiguousarray(array).tobytes(order="C")
    return {"dtype": name, "shape": list(array.shape), "data": base64.b64encode(raw).decode("ascii")}


def _ref(node: str, output: str) -> dict[str, str]:
    return {"node": node, "output": output}


# A root composite (Sequential) with a Linear and a ReLU child. The Linear's in_features and
# out_features share one table entry, "dims.n". The registry of demo/toylayers.py accepts it.
_BASE_DOC: dict[str, Any] = {
    "format_version": "1.0",
    "inputs": ["x"],
    "outputs": [_ref("root", "y")],
    "nodes": [
        {
            "id": "root",
            "parent": None,
            "op": "Sequential",
            "inputs": {"x": _ref("%input", "x")},
            "outputs": ["y"],
            "parameters": {},
            "output_bindings": {"y": _ref("root.relu", "y")},
        },
        {
            "id": "root.linear",
            "parent": "root",
            "op": "Linear",
            "inputs": {"x": _ref("%input", "x")},
            "outputs": ["y"],
            "parameters": {
                "in_features": {"name": "dims.n"},
                "out_features": {"name": "dims.n"},
                "weight": {"name": "root.linear.weight"},
                "bias": {"name": "root.linear.bias"},
            },
            "output_bindings": None,
        },
        {
            "id": "root.relu",
            "parent": "root",
            "op": "ReLU",
            "inputs": {"x": _ref("root.linear", "y")},
            "outputs": ["y"],
            "parameters": {},
            "output_bindings": None,
        },
    ],
    "parameters": {
        "dims.n": {"value": 2, "learnable": False},
        "root.linear.weight": {
            "value": tensor_json(np.array([[1.0, -2.0], [0.5, 4.0]], dtype="<f4")),
            "learnable": True,
        },
        "root.linear.bias": {"value": tensor_json(np.array([0.25, -0.75], dtype="<f4")), "learnable": True},
    },
}


@pytest.fixture
def toy_registry() -> trama.OpRegistry:
    """The specs and factories of the toy layers (Linear, ReLU, Sequential)."""
    return toylayers.registry()


@pytest.fixture
def mlp_module() -> toylayers.Sequential:
    """A small ReLU MLP, 4 -> 3 -> 2, with seeded float32 weights."""
    return toylayers.mlp([4, 3, 2], seed=0)


@pytest.fixture
def mlp_model(mlp_module: toylayers.Sequential, toy_registry: trama.OpRegistry) -> trama.Model:
    """``mlp_module`` exported with the toy registry."""
    return trama.export_model(mlp_module, inputs=["x"], outputs=["y"], registry=toy_registry)


@pytest.fixture
def make_doc() -> Callable[[], dict[str, Any]]:
    """A function that returns a fresh deep copy of a small valid document (Python data)."""
    return lambda: copy.deepcopy(_BASE_DOC)


@pytest.fixture
def base_doc(make_doc: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A fresh copy of the small valid document, to mutate in one test."""
    return make_doc()


@pytest.fixture
def encode_tensor() -> Callable[..., dict[str, Any]]:
    """:func:`tensor_json`: an array as the format's inline tensor value."""
    return tensor_json
