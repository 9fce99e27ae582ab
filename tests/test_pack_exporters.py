"""An op pack's exporter wins for the classes it claims, whichever library they come from.

Issue 23: under capture (``example_inputs``) exporters were asked only about modules whose
top-level package belonged to a distribution with exporters, so a pack mapping another
library's class to one op (a ``trama-transformers`` pack's ``LlamaRMSNorm``) was never asked,
and the norm's inside was captured instead. Now every module call is offered to the exporters
ranked before trama-torch's own, under capture as on the fx path, whatever the discovery order.

The pack here is a plugin built in the test: ``rmsnorm.Norm``, whose exporter claims
transformers' ``LlamaRMSNorm`` (a class from another top-level package) and whose torch factory
builds that class back. Its ``forward`` ends with the usual mixed-precision cast
(``weight * hidden_states.to(input_dtype)``), which before failed export with "its to_node
gives 1 outputs, but forward returned 2". A second pack module, defined here, holds its own
parameters: they must be written once, in its node, and not again as constants.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from realworld.models import ensure_torchvision_importable
from torch import nn

import trama
from trama import NodeFragment, OpSpec, Param, ParameterSchema
from trama.extension import PluginHost, hookimpl, reset_plugins
from trama_torch import plugin as torch_plugin
from trama_torch import tied_parameter

ensure_torchvision_importable()  # transformers imports torchvision (see tests/realworld/models.py)
from transformers.models.llama.modeling_llama import LlamaRMSNorm  # noqa: E402

NORM = "rmsnorm.Norm"
GAIN = "rmsnorm.Gain"


class Gain(nn.Module):
    """A pack's own module: ``x * weight``, cast back to the dtype of ``x``."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        return (x.to(torch.float32) * self.weight).to(dtype)


def _export(obj: Any, ctx: trama.ExportContext) -> NodeFragment | None:
    """Claims transformers' ``LlamaRMSNorm`` and :class:`Gain`, by their classes' modules first."""
    if type(obj).__module__ not in (LlamaRMSNorm.__module__, __name__):
        return None
    if isinstance(obj, LlamaRMSNorm):
        weight, extra = obj.weight, {"eps": Param(float(obj.variance_epsilon))}
        op = NORM
    elif isinstance(obj, Gain):
        weight, extra, op = obj.weight, {}, GAIN
    else:
        return None
    (source,) = ctx.inputs.values()
    parameters = {"weight": Param(weight.detach().numpy().copy(), learnable=True, key=weight), **extra}
    return NodeFragment(op, inputs={"x": source}, outputs=["y"], parameters=parameters)


def _build_norm(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, Any]) -> nn.Module:
    weight = tied_parameter(parameters["weight"], what=f"{node.id}.weight")
    module = LlamaRMSNorm(weight.shape[0], eps=float(parameters["eps"].value))
    module.weight = weight
    return module


def _build_gain(node: trama.Node, *, children: Mapping[str, Any], parameters: Mapping[str, Any]) -> nn.Module:
    weight = tied_parameter(parameters["weight"], what=f"{node.id}.weight")
    module = Gain(weight.shape[0])
    module.weight = weight
    return module


def _pack() -> Any:
    specs = (
        OpSpec(
            NORM,
            inputs=("x",),
            outputs=("y",),
            parameters=(ParameterSchema("weight", ("tensor",)), ParameterSchema("eps", ("float",))),
        ),
        OpSpec(GAIN, inputs=("x",), outputs=("y",), parameters=(ParameterSchema("weight", ("tensor",)),)),
    )

    @hookimpl
    def trama_op_specs() -> Sequence[OpSpec]:
        return specs

    @hookimpl
    def trama_opsets() -> Mapping[str, int]:
        return {"rmsnorm": 1}

    @hookimpl
    def trama_frameworks() -> Sequence[str]:
        return ("torch",)

    @hookimpl
    def trama_op_implementations(framework: str) -> Mapping[str, Any] | None:
        return {NORM: _build_norm, GAIN: _build_gain} if framework == "torch" else None

    @hookimpl
    def trama_exporters(framework: str) -> Sequence[Any] | None:
        return [_export] if framework == "torch" else None

    return SimpleNamespace(
        trama_op_specs=trama_op_specs,
        trama_opsets=trama_opsets,
        trama_frameworks=trama_frameworks,
        trama_op_implementations=trama_op_implementations,
        trama_exporters=trama_exporters,
    )


class _EntryPoint:
    def __init__(self, name: str, distribution: str, plugin: Any) -> None:
        self.name = name
        self.dist = SimpleNamespace(name=distribution, version="1.0")
        self._plugin = plugin

    def load(self) -> Any:
        return self._plugin


@pytest.fixture(params=["pack first", "trama-torch first"])
def discovery(request: pytest.FixtureRequest) -> Iterator[str]:
    """The pack and trama-torch discovered in either order."""
    pack = _EntryPoint("rmsnorm", "trama-rmsnorm", _pack())
    own = _EntryPoint("torch", "trama-torch", torch_plugin)
    entries = [pack, own] if request.param == "pack first" else [own, pack]
    reset_plugins(PluginHost(entries))
    yield request.param
    reset_plugins()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 8)
        self.norm = LlamaRMSNorm(8, eps=1e-5)
        self.gain = Gain(8)
        self.down = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.gain(self.norm(self.up(x))))


@pytest.mark.parametrize("captured", [True, False], ids=["capture", "fx"])
def test_a_pack_exporter_wins_for_another_library_s_class(discovery: str, captured: bool) -> None:
    torch.manual_seed(0)
    model = Block().eval()
    with torch.no_grad():
        model.norm.weight.copy_(torch.linspace(0.8, 1.2, 8))
    x = torch.randn(3, 8)
    examples = (x,) if captured else None
    document = trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=examples)
    ops = {node.id: node.op for node in document.nodes}
    assert ops["root.norm"] == NORM, ops
    assert ops["root.gain"] == GAIN, ops
    assert [node.id for node in document.nodes if node.id.startswith("root.norm")] == ["root.norm"]
    assert not [node.id for node in document.nodes if node.op == "constant"], "parameters written twice"
    back = trama.import_model(document, registry=trama.registry("torch"))
    assert list(back.state_dict()) == list(model.state_dict())
    assert isinstance(back.get_submodule("norm"), LlamaRMSNorm)
    with torch.no_grad():
        assert torch.equal(back(x), model(x))


def test_the_exporter_is_asked_once_per_module_under_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cheaply: under capture each module is offered to the pack's exporter once to decide,
    and a claimed one once more to export it."""
    seen: list[str] = []
    original = _export

    def counting(obj: Any, ctx: trama.ExportContext) -> NodeFragment | None:
        seen.append(type(obj).__name__)
        return original(obj, ctx)

    monkeypatch.setitem(globals(), "_export", counting)
    pack = _EntryPoint("rmsnorm", "trama-rmsnorm", _pack())
    reset_plugins(PluginHost([pack, _EntryPoint("torch", "trama-torch", torch_plugin)]))
    model = Block().eval()
    try:
        trama.export_model(model, inputs=["x"], outputs=["y"], example_inputs=(torch.randn(2, 8),))
    finally:
        reset_plugins()
    assert seen.count("LlamaRMSNorm") == 2
    assert seen.count("Gain") == 2
    assert seen.count("Linear") == 2  # up and down, each asked once
