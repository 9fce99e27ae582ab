"""How the catalog's recurrent layers (``GRU``, ``LSTM``) stack their layers and directions, for
every framework's kernels: the order is the catalog's (``docs/ops.md``), not any framework's.

Layer k in direction δ (0 forward, 1 reverse) starts from the states at index ``k·D + δ``; a
layer's output is its directions' outputs concatenated on the feature dimension, forward first;
layer 0 reads ``x`` and layer k ≥ 1 the output of layer k − 1; the final states are collected in
the same ``k·D + δ`` order. What one layer computes in one direction (the cell) is the kernel's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["stacked_layers"]

Direction = TypeVar("Direction")
Value = TypeVar("Value")

#: ``run(direction, x, states, reverse) -> (outputs, final states)``: one layer in one direction.
Pass = Callable[[Direction, Value, tuple[Any, ...], bool], tuple[Value, tuple[Any, ...]]]


def stacked_layers(
    layers: Sequence[Sequence[Direction]],
    x: Value,
    starts: Sequence[Any],
    run: Pass[Direction, Value],
    concatenate: Callable[[list[Value]], Value],
) -> tuple[Value, list[list[Any]]]:
    """The last layer's output and the final states of every layer and direction.

    ``starts`` holds one sequence per kind of state (``h``, and ``c`` for an LSTM), indexed by
    ``k·D + δ``; the final states come back the same way, as lists. ``concatenate`` joins the
    directions' outputs on the last (feature) dimension.
    """
    finals: list[list[Any]] = [[] for _ in starts]
    layer_input = x
    for k, directions in enumerate(layers):
        outputs = []
        for delta, direction in enumerate(directions):
            index = k * len(directions) + delta
            out, last = run(direction, layer_input, tuple(state[index] for state in starts), delta == 1)
            outputs.append(out)
            for collected, value in zip(finals, last, strict=True):
                collected.append(value)
        layer_input = outputs[0] if len(outputs) == 1 else concatenate(outputs)
    return layer_input, finals
