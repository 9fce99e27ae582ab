"""The capture's fallback: an aten op without a catalog op is written as torch's own decomposition
of it, a ``Graph`` node marked ``decomposed`` inside the module that called it.

``torch.addcmul`` stands for such an op: the catalog has no ``addcmul``, and torch decomposes it
into ``mul`` and ``add``, which it has. An op torch cannot decompose (a custom op) still fails
with one line that names it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import trama
from trama.tools._summary import render_summary, summarize

RUNTIMES = ["numpy", "torch:cpu", "jax:cpu"]


class Mixer(nn.Module):
    """A module whose own ``forward`` makes a call the catalog has no op for."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.proj(x), t, t, value=0.5).relu()


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mixer = Mixer()

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.mixer(x, t) * 2


def _captured(model: nn.Module, examples: tuple[torch.Tensor, ...], **options: Any) -> trama.Model:
    document = trama.export_model(model.eval(), inputs=["x", "t"], outputs=["y"], example_inputs=examples, **options)
    return trama.loads(trama.dumps(document))


def _examples() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 4, generator=generator), torch.randn(2, 4, generator=generator)


def test_a_missing_op_is_written_as_its_decomposition_inside_the_module_that_called_it() -> None:
    torch.manual_seed(0)
    document = _captured(Outer(), _examples())
    nodes = {node.id: node for node in document.nodes}
    decomposed = nodes["root.mixer.addcmul"]
    assert decomposed.op == "Graph"
    assert decomposed.metadata == {"decomposed": "aten.addcmul.default"}
    assert nodes["root.mixer"].metadata is not None
    assert nodes["root.mixer"].metadata["class"].endswith("Mixer")  # the user's tree is kept around it
    inside = sorted(node.op for node in document.nodes if node.parent == "root.mixer.addcmul")
    assert inside == ["add", "mul", "mul"]
    assert set(decomposed.inputs) == {"x0", "x1", "x2"}  # the call's three tensor arguments
    assert document.opsets == {"trama": 1}  # mul and add are opset 1


def test_a_decomposed_call_computes_the_op_on_every_runtime() -> None:
    torch.manual_seed(0)
    model = Outer().eval()
    x, t = _examples()
    document = _captured(model, (x, t))
    with torch.no_grad():
        expected = model(x, t).numpy()
    for name in RUNTIMES:
        (got,) = trama.runtime_for_name(name).prepare(document).run([x.numpy(), t.numpy()])
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6, err_msg=name)
    back = trama.import_model(document, registry=trama.registry("torch"))
    with torch.no_grad():
        torch.testing.assert_close(back(x, t), model(x, t), rtol=1e-6, atol=1e-6)


def test_trama_info_counts_the_decomposed_nodes() -> None:
    torch.manual_seed(0)
    summary = summarize(_captured(Outer(), _examples()))
    assert summary.decomposed == {"aten.addcmul.default": 1}
    assert "decomposed  1 node (aten.addcmul.default ×1)" in render_summary(summary)


@torch.library.custom_op("trama_test::opaque_scale", mutates_args=())
def _opaque_scale(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@_opaque_scale.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Opaque(nn.Module):
    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return _opaque_scale(x) + t


def test_an_op_torch_cannot_decompose_still_names_itself() -> None:
    with pytest.raises(
        trama.ExportError, match=r"trama_test\.opaque_scale\.default has no catalog op for it yet"
    ) as info:
        _captured(Opaque(), _examples())
    assert len(str(info.value).splitlines()) == 1


def test_no_decomposition_is_traced_for_symbolic_sizes() -> None:
    """A decomposition traced on fixed shapes would bake the example's sizes in: with a dynamic
    batch the op stays missing, and the error says which."""
    torch.manual_seed(0)
    with pytest.raises(trama.ExportError, match=r"aten\.addcmul\.default has no catalog op for it yet"):
        _captured(Outer(), _examples(), dynamic_shapes={"x": {0: "batch"}, "t": {0: "batch"}})
