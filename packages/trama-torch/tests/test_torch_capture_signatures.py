"""A scope's ports are its module's signature (trama_torch.capture.sharing).

In eager torch ``x.to(x.dtype)``, ``x.contiguous()`` of a contiguous ``x`` and ``x.detach()``
give back ``x`` itself, and torch.export then records every later use of ``x`` as a use of that
op's result, even in another module: the norm of a pre-norm residual block, which starts with
such a cast, would return the cast as a second output. These models put the pattern in a child
and read the same tensor in the parent, and check that the child's node returns only what its
``forward`` returned, that the parent reads its own value, and that the import is exact.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import trama


class CastingNorm(nn.Module):
    """RMSNorm as transformers writes it: a cast of the input to the dtype it already has."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, width))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden.to(torch.float32)
        return self.weight * hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6)


class ContiguousNorm(nn.Module):
    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden.contiguous().detach()
        return hidden - hidden.mean(-1, keepdim=True)


class Block(nn.Module):
    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.norm = norm
        self.proj = nn.Linear(8, 8)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        residual = hidden
        return residual + self.proj(self.norm(hidden))


class Passing(nn.Module):
    """Returns its cast input: the parent reads the child's output, as the code says."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden.to(hidden.dtype)


class Reader(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.passing = Passing()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.passing(hidden) * 2


def _export(model: nn.Module) -> trama.Model:
    example = (torch.randn(2, 3, 8),)
    document = trama.export_model(model.eval(), inputs=["x"], outputs=["y"], example_inputs=example)
    return trama.loads(trama.dumps(document))


def _node(document: trama.Model, node_id: str) -> trama.Node:
    return next(each for each in document.nodes if each.id == node_id)


@pytest.mark.parametrize("norm", [CastingNorm(8), ContiguousNorm()], ids=["to", "contiguous_detach"])
def test_a_same_tensor_op_read_by_the_parent_is_no_output_of_the_child(norm: nn.Module) -> None:
    torch.manual_seed(0)
    model = Block(norm)
    document = _export(model)
    assert _node(document, "root.norm").outputs == ["y"]
    residual = next(each for each in document.children("root") if each.op == "add")
    assert {ref.node for ref in residual.inputs.values()} == {"%input", "root.proj"}
    back = trama.import_model(document, registry=trama.registry("torch"))
    assert set(back.state_dict()) == set(model.state_dict())
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        assert torch.equal(back(x), model(x))


def test_a_same_tensor_op_the_child_returns_stays_the_child_output() -> None:
    document = _export(Reader())
    doubled = next(each for each in document.children("root") if each.op == "mul")
    assert [ref.node for ref in doubled.inputs.values()] == ["root.passing"]
