"""The elementwise ops end to end in torch: models that compute attention masks, RMSNorm, rotary
embeddings and relative position buckets as transformers writes them are captured
(``trama.export_model`` with example inputs) into the catalog's elementwise ops, import back
into torch with bit-identical outputs (``torch.equal``: the modules call torch's own functions),
and run on numpy, torch:cpu and jax:cpu within 1e-5. Casts become ``to`` or nothing, in-place
forms keep torch's in-place dtype, and a non-finite fill value (JSON has no number for −inf)
becomes a 0-d tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import trama

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")


def capture(model: nn.Module, inputs: list[str], outputs: list[str], examples: tuple[Any, ...]) -> trama.Model:
    document = trama.export_model(model.eval(), inputs=inputs, outputs=outputs, example_inputs=examples)
    return trama.loads(trama.dumps(document))


def ops(document: trama.Model) -> set[str]:
    return {node.op for node in document.nodes}


def as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def assert_round_trip(document: trama.Model, model: nn.Module, *args: torch.Tensor) -> None:
    """torch gives back the very outputs; numpy and JAX agree within 1e-5 (int64 is int32 in
    JAX without x64, the documented exception)."""
    back = trama.import_model(document, registry=trama.registry("torch"))
    with torch.no_grad():
        expected, got = as_tuple(model(*args)), as_tuple(back(*args))
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == want.dtype
        assert torch.equal(have, want)
    for name in RUNTIMES:
        results = trama.runtime_for_name(name).prepare(document).run([arg.numpy() for arg in args])
        for want, have in zip(expected, results, strict=True):
            have = np.asarray(have.detach() if isinstance(have, torch.Tensor) else have)
            assert have.shape == tuple(want.shape), name
            if want.dtype == torch.int64 and name == "jax:cpu":
                assert have.dtype == np.int32
            else:
                assert str(have.dtype) == str(want.dtype).removeprefix("torch."), name
            np.testing.assert_allclose(have.astype(np.float64), want.double().numpy(), rtol=1e-5, atol=1e-5)


class Masks(nn.Module):
    """An attention mask and RMSNorm as transformers writes them."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, 4))

    def forward(self, hidden: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keep = (ids != 0) & (ids < 5)
        h = hidden.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = (self.weight * h).to(hidden.dtype)
        h = h.masked_fill(~keep.unsqueeze(-1), float("-inf"))
        h = torch.where(keep.unsqueeze(-1), h, torch.finfo(h.dtype).min)
        return h, keep.logical_and(ids > 2).long()


def test_an_attention_mask_and_rms_norm_round_trip() -> None:
    model = Masks()
    hidden, ids = torch.randn(2, 3, 4), torch.tensor([[0, 1, 7], [3, 4, 2]])
    document = capture(model, ["hidden", "ids"], ["h", "keep"], (hidden, ids))
    assert {"ne", "lt", "bitwise_and", "bitwise_not", "rsqrt", "masked_fill", "where", "logical_and", "gt"} <= ops(
        document
    )
    assert "to" in ops(document)  # the .long() of a bool; the float32 casts of float32 are nothing
    assert_round_trip(document, model, hidden, ids)


class Rotary(nn.Module):
    """Rotary embeddings, T5's relative buckets and a hand-written GELU."""

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angles = positions.float().unsqueeze(-1) * 0.5
        rotated = x * torch.cos(angles) + x * torch.sin(angles)
        gelu = rotated * 0.5 * (1.0 + torch.erf(rotated / 1.4142135623730951))
        distance = torch.abs(positions)
        large = 2 + (torch.log(distance.float().clamp(min=1) / 2) / 1.5 * 4).to(torch.long)
        large = torch.min(large, large * 0 + 7)  # aten.min.other: the elementwise minimum
        bucket = torch.where(distance < 2, distance, large)
        return torch.exp(-gelu.abs()) + torch.floor(gelu) - torch.clamp(gelu, -1.0, 1.0), bucket


def test_rotary_embeddings_and_relative_buckets_round_trip() -> None:
    model = Rotary()
    x, positions = torch.randn(3, 4), torch.tensor([0, -1, 5])
    document = capture(model, ["x", "positions"], ["y", "bucket"], (x, positions))
    assert {"cos", "sin", "erf", "abs", "log", "clamp", "minimum", "where", "exp", "floor", "lt", "to"} <= ops(document)
    assert_round_trip(document, model, x, positions)


class InPlace(nn.Module):
    def forward(self, x: torch.Tensor, bits: torch.Tensor, other: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.clone()
        y.clamp_(min=-0.5)
        y.masked_fill_(y > 1, 1.0)
        b = bits.clone()
        b &= other  # int32 &= int64: the result stays int32 in place
        return y.exp_(), b


def test_in_place_forms_keep_the_dtype_of_self() -> None:
    model = InPlace()
    x = torch.randn(2, 3)
    bits, other = torch.tensor([3, 5, 6], dtype=torch.int32), torch.tensor([1, 4, 7])
    document = capture(model, ["x", "bits", "other"], ["y", "b"], (x, bits, other))
    assert {"clamp", "masked_fill", "exp", "bitwise_and"} <= ops(document)
    assert_round_trip(document, model, x, bits, other)


class Casts(nn.Module):
    def forward(self, x: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return x.to("cpu").float(), x.type_as(like), x.to(device="cpu", dtype=torch.float16)


def test_casts_are_to_or_nothing() -> None:
    model = Casts()
    x, like = torch.randn(2, 3) * 40, torch.zeros(2, dtype=torch.int32)
    document = capture(model, ["x", "like"], ["same", "ints", "half"], (x, like))
    casts = sorted(node.parameters["dtype"] for node in document.nodes if node.op == "to")
    assert [document.parameters[entry].value for entry in casts] == ["float16", "int32"]
    assert_round_trip(document, model, x, like)


class Complex(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.complex64).real


def test_a_cast_to_a_dtype_the_format_lacks_names_it() -> None:
    with pytest.raises(trama.ExportError, match=r"a cast to torch\.complex64\) has no catalog dtype"):
        capture(Complex(), ["x"], ["y"], (torch.randn(2),))
