"""``repeat_interleave`` and ``topk`` through capture: the calls real models make, exported by
``trama.export_model(..., example_inputs=...)`` to the catalog's ops, imported back into torch
with bit-identical outputs, and run by the numpy, torch and JAX runtimes within 1e-5.

The patterns are the models' own: GPT-J's and CodeGen's interleaved rotary positions
(``repeat_interleave`` of sin and cos along the last dimension), Cohere's interleaved
frequencies, Funnel's upsampling along the sequence, and Mixtral's router (``topk`` of the
softmax, its values normalized in place). Counts known only at run time are refused, naming
the call; ``topk``'s ties follow the catalog's rule (the lower position first) on every runtime,
where torch's own kernel orders them otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from export_support import assert_exact_and_runtimes_agree as check
from export_support import run_everywhere
from torch import nn

import trama


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def capture(model: nn.Module, inputs: list[str], outputs: list[str], *examples: torch.Tensor) -> trama.Model:
    """Export with example inputs, and read the document back from its JSON text."""
    document = trama.export_model(model.eval(), inputs=inputs, outputs=outputs, example_inputs=examples)
    return trama.loads(trama.dumps(document))


def nodes_of(document: trama.Model, op: str) -> list[trama.Node]:
    return [node for node in document.nodes if node.op == op]


def slots_of_each(document: trama.Model, op: str) -> list[dict[str, Any]]:
    """The slots of every ``op`` node, in document order."""
    return [
        {slot: document.parameters[entry].value for slot, entry in node.parameters.items()}
        for node in nodes_of(document, op)
    ]


# --- repeat_interleave ----------------------------------------------------------------------


class InterleavedRotary(nn.Module):
    """GPT-J's ``apply_rotary_pos_emb``: sin and cos of ``[B, S, D/2]`` interleaved to
    ``[B, S, 1, D]`` (``repeat_interleave(..., 2, 3)``), applied with ``rotate_every_two``."""

    def forward(self, x: torch.Tensor, sincos: torch.Tensor) -> torch.Tensor:
        sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
        sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
        cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
        rotated = torch.stack((-x[:, :, :, 1::2], x[:, :, :, ::2]), dim=-1).flatten(-2)
        return (x * cos) + (rotated * sin)


def test_gptj_interleaved_rotary_is_repeat_interleave() -> None:
    model = InterleavedRotary()
    x, sincos = torch.randn(2, 5, 3, 4), torch.randn(2, 5, 4)
    document = capture(model, ["x", "sincos"], ["y"], x, sincos)
    assert slots_of_each(document, "repeat_interleave") == [{"repeats": 2, "dim": 3}] * 2
    check(model, document, x, sincos)


class Interleavings(nn.Module):
    """Cohere's frequencies (``repeat_interleave(freqs, 2, dim=-1)``), Funnel's upsampling
    along the sequence, the flattening form (no ``dim``), and counts per slice from a tensor of
    constants."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        counts = torch.tensor([1, 0, 2])
        return (
            torch.repeat_interleave(x, 2, dim=-1),
            torch.repeat_interleave(x, repeats=3, dim=1),
            x.repeat_interleave(2),
            x.repeat_interleave(counts, dim=2),
        )


def test_every_form_of_repeat_interleave_is_the_op() -> None:
    model = Interleavings()
    x = torch.randn(2, 4, 3)
    document = capture(model, ["x"], ["freqs", "upsampled", "flat", "counted"], x)
    assert slots_of_each(document, "repeat_interleave") == [
        {"repeats": 2, "dim": -1},
        {"repeats": 3, "dim": 1},
        {"repeats": 2, "dim": None},
        {"repeats": [1, 0, 2], "dim": 2},
    ]
    check(model, document, x)


class RunTimeCounts(nn.Module):
    """Counts that are an input: the result's length depends on their values."""

    def forward(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        return x.repeat_interleave(counts, dim=0).sum(0)


def test_counts_known_only_at_run_time_are_refused_naming_the_call() -> None:
    with pytest.raises(
        trama.ExportError, match=r"repeat_interleave\.self_Tensor takes its repeats from a tensor known"
    ):
        capture(RunTimeCounts(), ["x", "counts"], ["y"], torch.randn(3, 2), torch.tensor([1, 2, 0]))


# --- topk -------------------------------------------------------------------------------------


class Router(nn.Module):
    """Mixtral's ``MixtralTopKRouter``: the softmax of the router logits, its top 2, the values
    normalized in place (``router_top_value /= ...sum()``) next to the indices it returns."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 8))

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = nn.functional.linear(hidden.reshape(-1, 8), self.weight)
        probabilities = torch.softmax(logits.float(), dim=-1)
        values, indices = torch.topk(probabilities, 2, dim=-1)
        values /= values.sum(dim=-1, keepdim=True)
        return logits, values, indices


def test_mixtral_router_is_one_topk_node_of_two_outputs() -> None:
    model = Router()
    hidden = torch.randn(2, 5, 8)
    document = capture(model, ["hidden"], ["logits", "scores", "experts"], hidden)
    (node,) = nodes_of(document, "topk")
    assert node.outputs == ["values", "indices"]
    assert slots_of_each(document, "topk") == [{"k": 2, "dim": -1, "largest": True}]
    check(model, document, hidden)


class Smallest(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, _ = torch.topk(x, 2, dim=0, largest=False, sorted=False)
        _, indices = x.topk(3)
        return values, indices


def test_the_smallest_and_an_unsorted_topk_take_their_slots() -> None:
    model = Smallest()
    x = torch.randn(4, 5)
    document = capture(model, ["x"], ["values", "indices"], x)
    assert slots_of_each(document, "topk") == [
        {"k": 2, "dim": 0, "largest": False},
        {"k": 3, "dim": -1, "largest": True},
    ]
    check(model, document, x)


class Top(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.topk(x, 5)
        return values, indices


def test_ties_follow_the_catalogs_rule_on_every_runtime() -> None:
    """Thirty-six equal maxima (positions 1 … 36): torch's CPU kernel returns five of them in its own order;
    the catalog takes the first five positions, in order, and every runtime does."""
    x = torch.full((1, 37), 2.0)
    x[0, 0] = 1.0
    document = capture(Top(), ["x"], ["values", "indices"], x)
    wanted = np.array([[1, 2, 3, 4, 5]])
    back = trama.import_model(document, registry=trama.registry("torch"))
    with torch.no_grad():
        values, indices = back(x)
    assert torch.equal(values, torch.topk(x, 5).values)
    np.testing.assert_array_equal(indices.numpy(), wanted)
    for name, (_, got) in run_everywhere(document, x).items():
        np.testing.assert_array_equal(got, wanted, err_msg=name)
