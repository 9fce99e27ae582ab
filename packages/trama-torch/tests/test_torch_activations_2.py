"""The opset-2 activations in torch: their modules as catalog leaves, their functions captured from
a ``forward``, and back again.

A model exported from torch and imported back computes bit for bit what it computed
(``torch.equal``): the leaves come back as the same ``torch.nn`` classes and the function ops call
the ``torch.nn.functional`` function the model called. The same documents run on numpy,
torch:cpu and jax:cpu within 1e-5. The blocks are the shapes real models have: MobileNetV2's
``Conv-BN-ReLU6(inplace=True)``, MobileNetV3's squeeze-excitation with ``Hardsigmoid``, and timm's
functional ``F.hardsigmoid``/``F.relu6`` calls.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trama

RUNTIMES = ["numpy", "torch:cpu", "jax:cpu"]


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def capture(model: nn.Module, examples: tuple[torch.Tensor, ...], outputs: int = 1) -> trama.Model:
    """Export with example inputs, through the document's JSON text."""
    names = [f"y{k}" for k in range(outputs)]
    document = trama.export_model(model.eval(), inputs=["x"], outputs=names, example_inputs=examples)
    return trama.loads(trama.dumps(document))


def imported(document: trama.Model) -> Any:
    return trama.import_model(document, registry=trama.registry("torch"))


def ops(document: trama.Model) -> list[str]:
    """The ops of the document's nodes, in the exporter's order (``Graph`` roots left out)."""
    return [node.op for node in document.nodes if node.op != "Graph"]


def slots(document: trama.Model, op: str) -> dict[str, Any]:
    """The slot values of the first node of ``op``."""
    node = next(node for node in document.nodes if node.op == op)
    return {slot: document.parameters[entry].value for slot, entry in node.parameters.items()}


def as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def assert_round_trip(model: nn.Module, document: trama.Model, x: torch.Tensor) -> None:
    """Imported back into torch, bit for bit; on every runtime, within 1e-5 of torch."""
    back = imported(document)
    with torch.no_grad():
        expected, got = as_tuple(model(x.clone())), as_tuple(back(x.clone()))
    assert len(got) == len(expected)
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == want.dtype
        assert torch.equal(have, want)
    for name in RUNTIMES:
        results = trama.runtime_for_name(name).prepare(document).run([x.numpy()])
        for want, have in zip(expected, results, strict=True):
            np.testing.assert_allclose(np.asarray(have), want.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


# --- Modules: catalog leaves ---------------------------------------------------------------------

LEAVES: list[tuple[nn.Module, str, dict[str, Any]]] = [
    (nn.ReLU6(inplace=True), "ReLU6", {}),
    (nn.Hardtanh(-2.0, 0.5), "Hardtanh", {"min_val": -2.0, "max_val": 0.5}),
    (nn.Hardsigmoid(), "Hardsigmoid", {}),
    (nn.Mish(), "Mish", {}),
    (nn.SELU(), "SELU", {}),
    (nn.CELU(0.7), "CELU", {"alpha": 0.7}),
    (nn.GLU(1), "GLU", {"dim": 1}),
    (nn.LogSigmoid(), "LogSigmoid", {}),
    (nn.Softsign(), "Softsign", {}),
    (nn.Tanhshrink(), "Tanhshrink", {}),
    (nn.Hardshrink(0.3), "Hardshrink", {"lambd": 0.3}),
    (nn.Softshrink(0.2), "Softshrink", {"lambd": 0.2}),
    (nn.Threshold(0.1, 5.0), "Threshold", {"threshold": 0.1, "value": 5.0}),
    (nn.Softmin(2), "Softmin", {"dim": 2}),
]


class Wrapped(nn.Module):
    """A leaf inside a module of the user's, as models hold them."""

    def __init__(self, act: nn.Module) -> None:
        super().__init__()
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


@pytest.mark.parametrize(("module", "op", "expected"), LEAVES, ids=[op for _, op, _ in LEAVES])
def test_modules_are_leaves_that_come_back_as_themselves(module: nn.Module, op: str, expected: dict[str, Any]) -> None:
    model = Wrapped(module)
    x = torch.randn(2, 4, 6) * 3
    document = capture(model, (x,))
    assert ops(document) == [op]
    assert slots(document, op) == expected
    back = imported(document)
    assert isinstance(back.act, type(module))  # Softmin: a subclass that resolves a null dim
    assert repr(back.act) == repr(module).replace("inplace=True", "")  # the catalog drops inplace
    assert_round_trip(model, document, x)


def test_relu6_is_its_own_op_not_its_base_classs() -> None:
    """``nn.ReLU6`` subclasses ``nn.Hardtanh``; it is the catalog's ``ReLU6``, without bounds."""
    document = trama.export_model(Wrapped(nn.ReLU6()), inputs=["x"], outputs=["y"])
    assert ops(document) == ["ReLU6"]
    assert slots(document, "ReLU6") == {}


def test_prelu_module_keeps_its_learned_weight() -> None:
    model = Wrapped(nn.PReLU(4))
    with torch.no_grad():
        model.act.weight.copy_(torch.tensor([0.1, -0.5, 2.0, 0.0]))
    x = torch.randn(2, 4, 3) * 3
    document = capture(model, (x,))
    assert ops(document) == ["PReLU"]
    values = slots(document, "PReLU")
    assert values["num_parameters"] == 4
    np.testing.assert_array_equal(np.asarray(values["weight"]), model.act.weight.detach().numpy())
    back = imported(document)
    assert isinstance(back.act.weight, nn.Parameter)
    assert back.act.weight.requires_grad
    assert_round_trip(model, document, x)


def test_softmin_without_dim_takes_the_legacy_dimension_without_a_warning() -> None:
    model = Wrapped(nn.Softmin())
    x = torch.randn(2, 3, 4)
    document = trama.export_model(model, inputs=["x"], outputs=["y"])
    assert slots(document, "Softmin") == {"dim": None}
    back = imported(document)
    assert isinstance(back.act, nn.Softmin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = back(x)
    assert torch.equal(got, F.softmin(x, 0))  # torch's legacy dim for 3 dimensions


# --- Functions: captured from a forward ---------------------------------------------------------


class Functional(nn.Module):
    """Every captured activation function, as a ``forward`` calls them."""

    def __init__(self) -> None:
        super().__init__()
        self.slopes = nn.Parameter(torch.tensor([0.25, -0.5, 1.5, 0.0]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            F.relu6(x),
            F.hardtanh(x, 0.0, 6.0),
            F.hardtanh(x.clone(), -0.5, 0.5, inplace=True),
            F.hardsigmoid(x),
            F.mish(x),
            F.prelu(x, self.slopes),
            F.selu(x),
            F.celu(x, 1.5),
            F.glu(x, 1),
            F.logsigmoid(x),
            F.hardshrink(x, 0.3),
            F.softshrink(x, 0.1),
            F.threshold(x, 0.2, -1.0),
            F.relu6(x.clone(), inplace=True),
        )


def test_functions_are_captured_as_their_ops_and_come_back_bit_for_bit() -> None:
    model = Functional()
    x = torch.randn(2, 4, 6) * 4
    document = capture(model, (x,), outputs=14)
    found = ops(document)
    for op in ("relu6", "hardtanh", "hardsigmoid", "mish", "prelu", "selu", "celu", "glu", "logsigmoid"):
        assert op in found, op
    for op in ("hardshrink", "softshrink", "threshold"):
        assert op in found, op
    assert found.count("relu6") == 2  # F.relu6 and its in-place form
    assert found.count("hardtanh") == 2  # the in-place hardtanh_ is the functional op
    assert "constant" in found  # the slopes feed prelu's weight port
    assert_round_trip(model, document, x)


def test_hardtanh_with_relu6_bounds_stays_hardtanh() -> None:
    """``F.hardtanh(x, 0, 6)`` is written as the source reads, not folded into ``relu6``."""

    class Clamp(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.hardtanh(x, 0.0, 6.0)

    document = capture(Clamp(), (torch.randn(3, 4),))
    assert ops(document) == ["hardtanh"]
    assert slots(document, "hardtanh") == {"min_val": 0.0, "max_val": 6.0}


# --- Blocks of real models -----------------------------------------------------------------------


class InvertedResidual(nn.Module):
    """MobileNetV2's expansion block: Conv-BN-ReLU6(inplace) twice, a projection, a residual."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(channels, 2 * channels, 1), nn.BatchNorm2d(2 * channels), nn.ReLU6(True))
        self.project = nn.Sequential(nn.Conv2d(2 * channels, channels, 1), nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.project(self.expand(x))


class SqueezeExcitation(nn.Module):
    """MobileNetV3's squeeze-excitation: a pooled gate through ReLU and Hardsigmoid, then a
    Hardswish (and timm's functional hard sigmoid on the side)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc1 = nn.Conv2d(channels, 2, 1)
        self.act = nn.ReLU()
        self.fc2 = nn.Conv2d(2, channels, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))
        return F.hardswish(x * scale) + F.relu6(x + 3.0) / 6.0


@pytest.mark.parametrize("block", [InvertedResidual(3), SqueezeExcitation(3)], ids=["mobilenet_v2", "mobilenet_v3"])
def test_mobilenet_blocks_round_trip(block: nn.Module) -> None:
    block.eval()
    x = torch.randn(2, 3, 5, 5) * 3
    document = capture(block, (x,))
    found = ops(document)
    assert ("ReLU6" in found) if isinstance(block, InvertedResidual) else ("Hardsigmoid" in found)
    assert_round_trip(block, document, x)


# --- The torch forms refuse what the catalog refuses --------------------------------------------


@pytest.mark.parametrize("op", ["relu6", "hardtanh", "threshold", "softsign", "tanhshrink"])
def test_function_forms_refuse_integer_inputs_like_the_other_runtimes(op: str) -> None:
    """torch computes these on integers (with truncated bounds, or as float32); the catalog
    refuses them, so the torch runtime does too, as numpy and JAX do."""
    settings = {"threshold": 1.0, "value": 0.0} if op == "threshold" else {}
    parameters = {f"n.{k}": trama.Parameter(v) for k, v in settings.items()}
    node = trama.Node("n", op, {"x": trama.Ref(trama.INPUT, "x")}, ["y"], {k: f"n.{k}" for k in settings})
    document = trama.Model(inputs=["x"], outputs=[trama.Ref("n", "y")], nodes=[node], parameters=parameters)
    runnable = trama.runtime_for_name("torch:cpu").prepare(document)
    with pytest.raises(trama.ExecutionError, match="x must be a floating-point tensor"):
        runnable.run([np.array([1, 2], np.int64)])
