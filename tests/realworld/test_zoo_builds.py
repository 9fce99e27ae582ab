"""The zoo itself is sound: every real model builds, runs and is captured by torch.export.

These tests say nothing about trama. They guard the yardstick trama's capture is measured against
(``benchmarks/realworld_report.py``): a model that no longer builds after a library upgrade, whose
declared input or output names no longer match what ``forward`` takes and returns, or that
torch.export itself cannot capture would make every later comparison meaningless.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any

import pytest
import torch
from torch import nn

from realworld.models import MAX_DYNAMIC, ZOO, RealModel, ensure_torchvision_importable

# Non-strict torch.export warns about nn.RNN's (LSTM, GRU) ``_flat_weights`` list, which forward
# rebuilds from the registered parameters; torch turned the former error into this warning on
# purpose (pytorch/pytorch#163809) and restores the attribute afterwards. Ignored for those only.
_RNN_FLAT_WEIGHTS = r"The tensor attributes self\.\w+\._flat_weights\[0\]"


def _named_outputs(result: Any, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """What ``forward`` returned, as ``{output name: tensor}``: a dict (transformers' ModelOutput,
    torchvision's segmentation result) by its keys, a tensor or a tuple in order of ``names``."""
    if isinstance(result, Mapping):
        return dict(result)
    tensors = (result,) if isinstance(result, torch.Tensor) else tuple(result)
    assert len(tensors) == len(names), f"forward returned {len(tensors)} tensor(s) for the outputs {names}"
    return dict(zip(names, tensors, strict=True))


def test_zoo_is_large_varied_and_uniquely_named() -> None:
    names = [entry.name for entry in ZOO]
    assert len(names) >= 30
    assert len(set(names)) == len(names)
    assert {entry.library for entry in ZOO} == {"torchvision", "transformers", "timm", "diffusers", "torch"}


def test_torchvision_workaround_is_idempotent() -> None:
    ensure_torchvision_importable()
    ensure_torchvision_importable()  # a second definition of a schema would raise
    vision_models = importlib.import_module("torchvision.models")

    assert torch.ops.torchvision.nms.default._schema.name == "torchvision::nms"
    assert torch.ops.torchvision.qnms.default._schema.name == "torchvision::qnms"
    assert callable(vision_models.resnet18)


@pytest.mark.parametrize("entry", ZOO, ids=lambda entry: entry.name)
def test_model_builds_runs_and_exports(entry: RealModel) -> None:
    model = entry.build()
    assert isinstance(model, nn.Module)
    assert not any(module.training for module in model.modules()), "the zoo hands out models in eval mode"

    # Seeded: a second build has the very same weights.
    again = entry.build().state_dict()
    for key, value in model.state_dict().items():
        assert torch.equal(value, again[key]), f"{entry.name}: {key} differs between two builds"

    args, kwargs = entry.args_kwargs()
    if kwargs:
        assert tuple(kwargs) == entry.input_names
    else:
        assert len(args) == len(entry.input_names)

    with torch.no_grad():
        eager = _named_outputs(model(*args, **kwargs), entry.output_names)
    assert tuple(eager) == entry.output_names, f"forward returns {tuple(eager)}, the entry names {entry.output_names}"
    assert all(torch.isfinite(tensor).all() for tensor in eager.values())

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_RNN_FLAT_WEIGHTS, category=UserWarning)
        program = torch.export.export(model, args, kwargs, strict=False)
    with torch.no_grad():
        captured = _named_outputs(program.module()(*args, **kwargs), entry.output_names)
    assert tuple(captured) == entry.output_names
    for name, tensor in eager.items():
        torch.testing.assert_close(captured[name], tensor, rtol=1e-4, atol=1e-5)


def _by_name(entry: RealModel) -> dict[str, torch.Tensor]:
    args, kwargs = entry.args_kwargs()
    return kwargs if kwargs else dict(zip(entry.input_names, args, strict=True))


def _grown(inputs: dict[str, torch.Tensor], axes: Mapping[str, Mapping[int, str]]) -> dict[str, torch.Tensor]:
    """The inputs one longer along every dynamic axis (the first slice repeated at the end), so
    that axes sharing a name stay the same size and token ids stay valid."""
    grown = dict(inputs)
    for name, named_axes in axes.items():
        for axis in named_axes:
            tensor = grown[name]
            grown[name] = torch.cat([tensor, tensor.narrow(axis, 0, 1)], dim=axis)
    return grown


@pytest.mark.parametrize("entry", [entry for entry in ZOO if entry.dynamic_axes], ids=lambda entry: entry.name)
def test_dynamic_axes_hint_is_what_torch_export_keeps_symbolic(entry: RealModel) -> None:
    axes = entry.dynamic_axes
    assert axes is not None
    assert set(axes) <= set(entry.input_names)
    inputs = _by_name(entry)
    for name, named_axes in axes.items():
        assert all(0 <= axis < inputs[name].dim() for axis in named_axes), f"{name}: no such axis"

    dims = {dim: torch.export.Dim(dim, min=2, max=MAX_DYNAMIC) for named in axes.values() for dim in named.values()}
    shapes = {name: {axis: dims[dim] for axis, dim in axes[name].items()} if name in axes else None for name in inputs}
    model = entry.build()
    args, kwargs = entry.args_kwargs()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_RNN_FLAT_WEIGHTS, category=UserWarning)
        program = torch.export.export(model, args, kwargs, dynamic_shapes=shapes, strict=False)

    grown = _grown(inputs, axes)
    grown_args = () if kwargs else tuple(grown[name] for name in entry.input_names)
    grown_kwargs = grown if kwargs else {}
    with torch.no_grad():
        eager = _named_outputs(model(*grown_args, **grown_kwargs), entry.output_names)
        captured = _named_outputs(program.module()(*grown_args, **grown_kwargs), entry.output_names)
    for name, tensor in eager.items():
        torch.testing.assert_close(captured[name], tensor, rtol=1e-4, atol=1e-5)
