"""The arrays ops (:mod:`trama.catalog.arrays`) through capture: the calls real models make, each
exported by ``trama.export_model(..., example_inputs=...)`` to its catalog op, imported back into
torch with bit-identical outputs (the module calls the torch function the model called), and run
by the numpy, torch and JAX runtimes within 1e-5.

The models are the patterns the ops were added for: BERT's position ids (a buffer sliced and
expanded) and ``gather``, RoBERTa's position ids from a cumulative sum of the padding mask, Swin's
cyclic shift (``roll``), MaxViT's relative attention (``einsum``, ``swapaxes``), a ViT class token
expanded to the batch, attention masks expanded to the heads, and creation from a run-time value
(``x.new_ones``, ``zeros_like``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from export_support import assert_exact_and_runtimes_agree as check
from torch import nn

import trama


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def capture(model: nn.Module, inputs: list[str], outputs: list[str], examples: Any, dynamic: Any = None) -> trama.Model:
    """Export with example inputs, and read the document back from its JSON text."""
    document = trama.export_model(
        model.eval(), inputs=inputs, outputs=outputs, example_inputs=examples, dynamic_shapes=dynamic
    )
    return trama.loads(trama.dumps(document))


def ops(document: trama.Model) -> list[str]:
    """Every op of the document (nested graphs' nodes are nodes of the document too)."""
    return [node.op for node in document.nodes]


def slots_of(document: trama.Model, op: str) -> dict[str, Any]:
    node = next(node for node in document.nodes if node.op == op)
    return {slot: document.parameters[entry].value for slot, entry in node.parameters.items()}


# --- The models ---------------------------------------------------------------------------------


class BertPositions(nn.Module):
    """BERT: a registered ``position_ids`` buffer sliced to the length and expanded to the batch,
    and token states gathered at given positions."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("position_ids", torch.arange(16).expand((1, -1)), persistent=False)
        self.embed = nn.Embedding(16, 4)

    def forward(self, ids: torch.Tensor, picks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        positions = self.position_ids[:, : ids.shape[1]].expand(ids.shape[0], -1)
        hidden = self.embed(positions) + ids[..., None]
        return hidden, torch.gather(hidden, 1, picks[..., None].expand(-1, -1, 4))


def test_bert_position_ids_expand_and_gather() -> None:
    model = BertPositions()
    ids, picks = torch.randn(2, 5), torch.tensor([[4, 0], [1, 1]])
    document = capture(model, ["ids", "picks"], ["hidden", "picked"], (ids, picks))
    assert {"expand", "gather"} <= set(ops(document))
    check(model, document, ids, picks)


class RobertaPositions(nn.Module):
    """RoBERTa: positions counted over the non-padding tokens, a cumulative sum of the mask."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = ids.ne(1)
        return torch.cumsum(mask, dim=1) * mask + 1


def test_roberta_positions_are_a_cumsum_of_the_mask_in_int64() -> None:
    model = RobertaPositions()
    ids = torch.tensor([[0, 5, 7, 1, 1], [3, 1, 4, 4, 1]])
    document = capture(model, ["ids"], ["positions"], (ids,))
    assert slots_of(document, "cumsum") == {"dim": 1}
    check(model, document, ids)


class SwinShift(nn.Module):
    """Swin: the cyclic shift of the windows and its reverse, on ``[B, H, W, C]``."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shifted = torch.roll(x, shifts=(-1, -2), dims=(1, 2))
        return shifted, torch.roll(shifted * 2, shifts=(1, 2), dims=(1, 2))


def test_swin_cyclic_shift_is_roll() -> None:
    model = SwinShift()
    x = torch.randn(2, 4, 5, 3)
    document = capture(model, ["x"], ["shifted", "back"], (x,))
    assert slots_of(document, "roll") == {"shifts": [-1, -2], "dims": [1, 2]}
    check(model, document, x)


class RelativeAttention(nn.Module):
    """MaxViT-style: scores by ``einsum``, a relative bias, heads swapped with ``swapaxes``."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(2, 3, 3))

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        scores = torch.einsum("bhid,bhjd->bhij", q, k) + self.bias
        return scores.softmax(-1).swapaxes(1, 2)


def test_maxvit_einsum_and_swapaxes() -> None:
    model = RelativeAttention()
    q, k = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4)
    document = capture(model, ["q", "k"], ["y"], (q, k))
    assert slots_of(document, "einsum") == {"equation": "bhid,bhjd->bhij"}
    assert "transpose" in ops(document)
    check(model, document, q, k)


class ClassToken(nn.Module):
    """ViT: a learned class token expanded to the batch and joined to the patches."""

    def __init__(self) -> None:
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 4))

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.cls.expand(patches.shape[0], -1, -1), patches], dim=1)


def test_vit_class_token_expand() -> None:
    model = ClassToken()
    patches = torch.randn(3, 5, 4)
    document = capture(model, ["patches"], ["tokens"], (patches,))
    assert slots_of(document, "expand") == {"size": [3, -1, -1]}
    check(model, document, patches)


def test_an_expand_by_a_symbolic_batch_not_its_own_is_the_batch_read_at_run_time() -> None:
    """The class token has no batch of its own: its expansion reads the batch of the patches,
    written as the size ``batch`` (test_torch_sizes.py runs such documents at other sizes)."""
    document = capture(ClassToken(), ["patches"], ["tokens"], (torch.randn(3, 5, 4),), {"patches": {0: "batch"}})
    (size,) = [document.parameters[node.parameters["size"]].value for node in document.nodes if node.op == "expand"]
    assert size == [trama.SizeExpr.parse("batch"), -1, -1]


class Masks(nn.Module):
    """transformers: a padding mask ``[B, S]`` expanded to ``[B, 1, S, S]``, made causal by
    ``tril``, and a rank-1 mask expanded to the batch of its own symbolic size."""

    def forward(self, mask: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, s = mask.shape
        wide = torch.tril(mask[:, None, None, :].expand(b, 1, s, s))
        return wide, x.unsqueeze(1).expand(x.shape[0], 3, x.shape[1])


def test_masks_expand_with_symbolic_sizes_of_their_own_written_as_minus_one() -> None:
    model = Masks()
    mask, x = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]), torch.randn(2, 4)
    dynamic = {"mask": {0: "batch"}, "x": {0: "batch"}}
    document = capture(model, ["mask", "x"], ["wide", "repeated"], (mask, x), dynamic)
    sizes = [document.parameters[node.parameters["size"]].value for node in document.nodes if node.op == "expand"]
    assert sorted(sizes) == [[-1, 1, 3, 3], [-1, 3, 4]]
    check(model, document, mask, x)
    check(model, document, torch.tensor([[1.0, 0.0, 0.0]] * 4), torch.randn(4, 4))


class Statistics(nn.Module):
    """Reductions: variance and deviation forms, ``min`` with indices, ``argmin``, ``prod``,
    ``any``/``all``, ``logsumexp``, and an ``expand_as`` that changes nothing."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values, indices = x.min(dim=1, keepdim=True)
        return (
            x.var(dim=-1),
            x.std(unbiased=False),
            x.var(dim=(0, 1), correction=2, keepdim=True),
            values,
            indices,
            x.amin(0),
            x.argmin(),
            x.prod(1),
            (x > 0).any(-1),
            (x > -3).all(),
            torch.logsumexp(x, dim=(0, 1)),
            x.expand_as(x) * 2,
        )


def test_reductions_map_to_their_catalog_ops() -> None:
    model = Statistics()
    x = torch.randn(3, 4)
    document = capture(model, ["x"], [f"y{k}" for k in range(12)], (x,))
    found = set(ops(document))
    assert {"var", "std", "min", "argmin", "prod", "any", "all", "logsumexp"} <= found
    assert "expand" not in found  # an expansion that changes nothing is the value itself
    check(model, document, x)


class Created(nn.Module):
    """Creation from a run-time value: ``new_ones``/``new_zeros``/``new_full`` take the dtype of
    ``x``, the ``_like`` ops its shape."""

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            x.new_ones(2, 3),
            ids.new_zeros(4),
            x.new_full((2,), -1.5),
            torch.zeros_like(x),
            torch.ones_like(ids, dtype=torch.bool),
            torch.full_like(x, 7),
            torch.triu(x) + torch.tril(x, -1).flip(0),
            x.repeat(2, 1).cumprod(0),
            x.tile((2,)),
            torch.index_select(x, 1, ids),
        )


def test_creation_from_a_run_time_value() -> None:
    model = Created()
    x, ids = torch.randn(3, 3), torch.tensor([2, 0])
    document = capture(model, ["x", "ids"], [f"y{k}" for k in range(10)], (x, ids))
    assert {"ones", "zeros", "full", "zeros_like", "ones_like", "full_like", "index_select"} <= set(ops(document))
    assert slots_of(document, "zeros") == {"size": [4], "dtype": "int64"}
    check(model, document, x, ids)


def test_a_created_tensor_follows_the_module_to_its_device() -> None:
    """``zeros`` has no input to take a device from: its module creates it where the model was
    moved (the meta device stands for a GPU here)."""
    document = capture(Created(), ["x", "ids"], [f"y{k}" for k in range(10)], (torch.randn(3, 3), torch.tensor([2])))
    back = trama.import_model(document, registry=trama.registry("torch")).to("meta")
    outputs = back(torch.randn(3, 3, device="meta"), torch.tensor([1], device="meta"))
    assert all(output.device.type == "meta" for output in outputs)
