"""The pooling family in torch: models that call ``F.max_pool2d``, ``F.interpolate``, ``F.pad``…
and hold ``nn.MaxPool1d``, ``nn.Upsample``… are captured into the catalog's pooling ops, come
back through the torch registry with bit-identical outputs (``torch.equal``: each op calls the
function the model called), and run on numpy, torch:cpu and jax:cpu within 1e-5.

The capture's refusals are checked too: an adaptive max pool's indices, which the catalog's op
does not give, and an output size read from the input at run time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trama

RUNTIMES = ("numpy", "torch:cpu", "jax:cpu")


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def capture(model: nn.Module, outputs: int, *examples: torch.Tensor, **options: Any) -> trama.Model:
    """Export with example inputs (inputs ``x0``, ``x1``…; outputs ``y0``…), through JSON text."""
    names = [f"x{k}" for k in range(len(examples))]
    document = trama.export_model(
        model.eval(), inputs=names, outputs=[f"y{k}" for k in range(outputs)], example_inputs=examples, **options
    )
    return trama.loads(trama.dumps(document))


def ops(document: trama.Model) -> list[str]:
    return [node.op for node in document.nodes]


def slots(document: trama.Model, op: str) -> dict[str, Any]:
    node = next(each for each in document.nodes if each.op == op)
    return {slot: document.parameters[entry].value for slot, entry in node.parameters.items()}


def as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def assert_round_trip(model: nn.Module, document: trama.Model, *inputs: torch.Tensor) -> None:
    """The imported model gives torch's outputs exactly; every runtime within 1e-5."""
    expected = as_tuple(model(*inputs))
    back = trama.import_model(document, registry=trama.registry("torch"))
    for want, got in zip(expected, as_tuple(back(*inputs)), strict=True):
        assert torch.equal(want, got)
    for name in RUNTIMES:
        results = trama.runtime_for_name(name).prepare(document).run([x.numpy() for x in inputs])
        for want, got in zip(expected, results, strict=True):
            np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


class Functional(nn.Module):
    """The calls real models make: ResNet's and GoogLeNet's pools, timm's adaptive average,
    DeepLabV3's bilinear upsampling, Swin's padding."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        pooled = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
        averaged = F.avg_pool2d(x, 2, count_include_pad=False, padding=1)
        squeezed = F.adaptive_avg_pool2d(x, (1, 1))
        upsampled = F.interpolate(pooled, size=x.shape[-2:], mode="bilinear", align_corners=False)
        scaled = F.interpolate(x, scale_factor=1.7, mode="bilinear", align_corners=True)
        nearest = F.interpolate(x, scale_factor=2.0, mode="nearest")
        padded = F.pad(x, (0, 1, 0, 2))
        reflected = F.pad(x, (1, 1, 2, 2), mode="reflect")
        return pooled, averaged, squeezed, upsampled, scaled, nearest, padded, reflected


def test_functional_pools_resampling_and_padding_round_trip_exactly() -> None:
    model = Functional()
    x = torch.randn(2, 3, 7, 6)
    document = capture(model, 8, x)
    assert document.opsets == {"trama": 2}
    assert {"max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "interpolate", "pad"} <= set(ops(document))
    assert slots(document, "max_pool2d") == {
        "kernel_size": [3, 3],
        "stride": [2, 2],
        "padding": [1, 1],
        "dilation": [1, 1],
        "ceil_mode": True,
    }
    resampled = [slots(document, "interpolate")]
    assert resampled[0] == {"mode": "bilinear", "align_corners": False, "size": [7, 6]}
    assert_round_trip(model, document, x)


class OneAndThree(nn.Module):
    """The 1-d and 3-d pools, functional and modules, and the other resampling modes."""

    def __init__(self) -> None:
        super().__init__()
        self.max1 = nn.MaxPool1d(2, padding=1)
        self.max3 = nn.MaxPool3d((2, 1, 2), stride=1, dilation=(1, 2, 1))
        self.avg1 = nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False)
        self.avg3 = nn.AvgPool3d(2, divisor_override=3)
        self.adaptive_avg1 = nn.AdaptiveAvgPool1d(3)
        self.adaptive_avg3 = nn.AdaptiveAvgPool3d((2, None, 3))
        self.adaptive_max1 = nn.AdaptiveMaxPool1d(4)
        self.adaptive_max2 = nn.AdaptiveMaxPool2d((3, None))
        self.upsample = nn.Upsample(scale_factor=(2.0, 1.5), mode="bicubic", align_corners=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        line, volume = x[0], x.unsqueeze(0)  # [C, L] and [1, C, H, W] (unbatched [C, D, H, W] for 3-d pools)
        return (
            self.max1(line),
            self.max3(volume),
            self.avg1(line),
            self.avg3(volume),
            self.adaptive_avg1(line),
            self.adaptive_avg3(volume),
            self.adaptive_max1(line),
            self.adaptive_max2(x),
            self.upsample(volume),
            F.max_pool1d(line, 2),
            F.avg_pool3d(volume, 2, 1),
            F.adaptive_avg_pool3d(volume, 2),
            F.adaptive_max_pool1d(line, 3),
            F.adaptive_max_pool2d(x, (2, 3)),
            F.interpolate(x, scale_factor=1.5, mode="linear"),
            F.interpolate(volume, size=(5, 9), mode="nearest-exact"),
            F.interpolate(volume.unsqueeze(0), size=(3, 4, 5), mode="trilinear"),
            F.interpolate(x, scale_factor=0.5, mode="area"),
            F.pad(x, (1, 2), mode="replicate"),
            F.pad(x, (1, 1, 1, 0), mode="circular"),
        )


def test_one_and_three_dimensional_pools_and_modules_round_trip_exactly() -> None:
    model = OneAndThree()
    x = torch.randn(2, 6, 8)
    document = capture(model, 20, x)
    leaves = {"MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool3d"}
    leaves |= {"AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Upsample"}
    functions = {"max_pool1d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d"}
    assert leaves | functions | {"interpolate", "pad"} <= set(ops(document))
    assert slots(document, "Upsample")["scale_factor"] == [2.0, 1.5]
    assert slots(document, "AdaptiveAvgPool3d") == {"output_size": [2, None, 3]}
    assert_round_trip(model, document, x)


class Indices(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values, indices = F.adaptive_max_pool2d(x, 2, return_indices=True)
        return values + indices.float()


def test_the_indices_of_an_adaptive_max_pool_are_refused_where_they_are_used() -> None:
    with pytest.raises(trama.ExportError, match=r"the indices of aten\.adaptive_max_pool2d"):
        capture(Indices(), 1, torch.randn(1, 2, 4, 4))


def test_an_adaptive_max_pool_module_returning_indices_is_refused() -> None:
    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pool = nn.AdaptiveMaxPool2d(2, return_indices=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            values, _ = self.pool(x)
            return values

    with pytest.raises(trama.ExportError, match="cannot export 'pool'"):
        capture(Holder(), 1, torch.randn(1, 2, 4, 4))
    # exported on its own, the module is refused for the setting
    with pytest.raises(trama.ExportError, match="return_indices=True has no form in the catalog"):
        trama.export_model(nn.AdaptiveMaxPool2d(2, return_indices=True), inputs=["x"], outputs=["y"])


class Follow(nn.Module):
    """Upsampling to another input's size, read at run time."""

    def forward(self, x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=like.shape[-2:], mode="bilinear", align_corners=False)


def test_an_output_size_read_at_run_time_is_written_over_the_symbols() -> None:
    x, like = torch.randn(1, 2, 4, 4), torch.randn(1, 2, 8, 8)
    dynamic = {"x1": {2: "height", 3: "width"}}
    document = capture(Follow(), 1, x, like, dynamic_shapes=dynamic)
    assert slots(document, "interpolate")["size"] == [trama.SizeExpr.parse("height"), trama.SizeExpr.parse("width")]
