"""Zoo models exported with their dynamic axes symbolic, and inputs at other sizes.

A sequence model exported at batch 2 and length 8 must serve batch 1 and length 3, and batch 3
and length 20: :func:`export_dynamic` exports a zoo entry with ``dynamic_shapes`` from its
``dynamic_axes`` (the caller's symbol names), and :func:`inputs_at` makes inputs in which every
axis of one symbol has the size asked for it, the other axes as in the example, with values
drawn like the example's (token ids below its largest id, masks of ones where the example is
all ones, normal floats), seeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

import trama
from realworld.models import SEED, RealModel

__all__ = ["LARGER", "SMALLER", "export_dynamic", "inputs_at", "named_inputs"]

#: The sizes each symbol takes in the runs: one below the example's (batch 2, length 8), one
#: above it (and below the small configs' 64 positions).
SMALLER = {"batch": 1, "sequence": 3, "target_sequence": 5, "source": 3, "target": 5}
LARGER = {"batch": 3, "sequence": 20, "target_sequence": 13, "source": 17, "target": 11}


def named_inputs(entry: RealModel) -> dict[str, torch.Tensor]:
    """The example inputs by the document's input names."""
    args, kwargs = entry.args_kwargs()
    return dict(kwargs) if kwargs else dict(zip(entry.input_names, args, strict=True))


def export_dynamic(entry: RealModel, model: torch.nn.Module) -> trama.Model:
    """``trama.export_model`` with the entry's dynamic axes symbolic, written and read back."""
    args, kwargs = entry.args_kwargs()
    document = trama.export_model(
        model,
        inputs=list(entry.input_names),
        outputs=list(entry.output_names),
        example_inputs=kwargs if kwargs else args,
        dynamic_shapes={name: dict(axes) for name, axes in (entry.dynamic_axes or {}).items()},
    )
    return trama.loads(trama.dumps(document))


def inputs_at(entry: RealModel, sizes: Mapping[str, int]) -> dict[str, torch.Tensor]:
    """Inputs like the example's, each dynamic axis at the size ``sizes`` gives its symbol."""
    generator = torch.Generator().manual_seed(SEED + 1)
    made: dict[str, torch.Tensor] = {}
    axes = entry.dynamic_axes or {}
    for name, example in named_inputs(entry).items():
        shape = list(example.shape)
        for axis, symbol in axes.get(name, {}).items():
            shape[axis] = sizes[symbol]
        made[name] = _like(example, shape, generator)
    return made


def _like(example: torch.Tensor, shape: list[int], generator: torch.Generator) -> Any:
    if example.dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=example.dtype)
    low, high = int(example.min()), int(example.max())
    if low == high:
        return torch.full(shape, low, dtype=example.dtype)
    return torch.randint(low, high + 1, shape, generator=generator, dtype=example.dtype)
