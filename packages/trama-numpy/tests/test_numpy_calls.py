"""Calling nodes on the numpy runtime: a module used twice runs twice, with the same weights,
whether it is a leaf or a composite and wherever the call is; a profile charges each call."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

import trama

REPO = Path(__file__).resolve().parents[3]
if str(REPO / "demo") not in sys.path:
    sys.path.insert(0, str(REPO / "demo"))

import toylayers  # noqa: E402

RNG = np.random.default_rng(11)
W1 = RNG.standard_normal((4, 4)).astype(np.float32)
B1 = RNG.standard_normal(4).astype(np.float32)
W2 = RNG.standard_normal((4, 4)).astype(np.float32)
B2 = RNG.standard_normal(4).astype(np.float32)
X = RNG.standard_normal((3, 4)).astype(np.float32)


def dense(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return x @ w.T + b


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def run(module: Any) -> tuple[trama.Model, np.ndarray]:
    """Export, write and read back, run on numpy: the model read back and its output."""
    model = trama.loads(trama.dumps(trama.export_model(module, inputs=["x"], outputs=["y"])))
    (y,) = trama.runtime_for_name("numpy").prepare(model).run([X])
    return model, y


def test_a_leaf_called_twice() -> None:
    fc = toylayers.Linear(W1, B1)
    model, y = run(toylayers.Sequential(fc, toylayers.ReLU(), fc))
    assert model.node("root.layers_2").calls == "root.layers_0"
    np.testing.assert_allclose(y, dense(relu(dense(X, W1, B1)), W1, B1), rtol=1e-5, atol=1e-6)


def test_a_composite_called_twice() -> None:
    block = toylayers.Sequential(toylayers.Linear(W1, B1), toylayers.ReLU())
    model, y = run(toylayers.Sequential(block, block))
    assert model.node("root.layers_1").calls == "root.layers_0"
    once = relu(dense(X, W1, B1))
    np.testing.assert_allclose(y, relu(dense(once, W1, B1)), rtol=1e-5, atol=1e-6)


def test_calls_from_another_scope() -> None:
    fc = toylayers.Linear(W1, B1)
    block = toylayers.Sequential(fc, toylayers.ReLU())
    other = toylayers.Sequential(toylayers.Linear(W2, B2), block, fc)  # calls both from inside
    model, y = run(toylayers.Sequential(block, other))
    assert model.node("root.layers_1.layers_1").calls == "root.layers_0"
    assert model.node("root.layers_1.layers_2").calls == "root.layers_0.layers_0"
    first = relu(dense(X, W1, B1))
    inner = relu(dense(dense(first, W2, B2), W1, B1))
    np.testing.assert_allclose(y, dense(inner, W1, B1), rtol=1e-5, atol=1e-5)


def test_a_profile_charges_each_call_what_its_target_costs() -> None:
    block = toylayers.Sequential(toylayers.Linear(W1, B1), toylayers.Linear(W2, B2))  # ops with a rule
    model = trama.export_model(toylayers.Sequential(block, block), inputs=["x"], outputs=["y"])
    profile = trama.runtime_for_name("numpy").prepare(model).profile_json([X])
    rows = {row["id"]: row for row in profile["nodes"]}
    assert list(rows) == [node.id for node in model.nodes]  # the model's nodes, not the copies
    target, call = rows["root.layers_0"], rows["root.layers_1"]
    assert call["kind"] == "composite"
    assert call["calls"] == 1
    assert call["seconds"] > 0
    assert call["macs"] == target["macs"] == 2 * 3 * 4 * 4  # two Linear 4->4 on 3 rows
    assert (call["parameters"], call["parameter_bytes"]) == (target["parameters"], target["parameter_bytes"])
    assert target["parameters"] == 2 * (16 + 4)
    assert profile["total"]["macs"] == 2 * call["macs"]
    assert profile["total"]["parameters"] == target["parameters"]  # shared entries count once
