"""Static costs of a model for profiles: parameters per node and multiply-adds per op.

Parameter counts come from the table (an entry shared by several nodes counts once in the
total). Multiply-adds need the shapes a run produced, and a formula per op: the ops whose
cost is a clear product (dense, bilinear, convolutions, matmul) have one here; other ops report
``null`` rather than a guess. A calling node costs what it runs, a copy of its target: its row
sums the time and multiply-adds of its own run and counts its target's parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from trama.format._calls import expand_calls
from trama.format._model import Model, Node
from trama.format._tensor import Tensor

__all__ = ["MACS", "static_costs"]

Shapes = list[list[list[int]]]  # [input shapes, output shapes]
_MacsRule = Callable[[Mapping[str, Any], Shapes], int]


def _setting(parameters: Mapping[str, Any], slot: str, default: Any = None) -> Any:
    value = parameters.get(slot, default)
    if isinstance(value, Tensor):
        array = np.asarray(value)
        return array.item() if array.ndim == 0 else array.tolist()
    return value


def _out_elements(shapes: Shapes) -> int:
    return math.prod(shapes[1][0]) if shapes[1] else 0


def _conv(parameters: Mapping[str, Any], shapes: Shapes) -> int:
    kernel = _setting(parameters, "kernel_size", [1])
    kernel = kernel if isinstance(kernel, list) else [kernel]
    per_output = int(_setting(parameters, "in_channels", 0)) // max(1, int(_setting(parameters, "groups", 1)))
    return _out_elements(shapes) * per_output * math.prod(kernel)


def _conv_transpose(parameters: Mapping[str, Any], shapes: Shapes) -> int:
    kernel = _setting(parameters, "kernel_size", [1])
    kernel = kernel if isinstance(kernel, list) else [kernel]
    per_input = int(_setting(parameters, "out_channels", 0)) // max(1, int(_setting(parameters, "groups", 1)))
    return (math.prod(shapes[0][0]) if shapes[0] else 0) * per_input * math.prod(kernel)


def _matmul(parameters: Mapping[str, Any], shapes: Shapes) -> int:
    inner = shapes[0][0][-1] if shapes[0] and shapes[0][0] else 1
    return _out_elements(shapes) * inner


#: Multiply-adds of one call, by op: ``rule(parameters by slot, [input shapes, output shapes])``.
MACS: dict[str, _MacsRule] = {
    "Linear": lambda p, s: _out_elements(s) * _setting(p, "in_features", 0),
    "Bilinear": lambda p, s: _out_elements(s) * _setting(p, "in1_features", 0) * _setting(p, "in2_features", 0),
    "Conv1d": _conv,
    "Conv2d": _conv,
    "ConvTranspose2d": _conv_transpose,
    "matmul": _matmul,
}


def static_costs(
    model: Model,
    calls: Mapping[str, int],
    seconds: Mapping[str, float],
    shapes: Mapping[str, Shapes],
    total_seconds: float,
    *,
    runtime: str,
) -> dict[str, Any]:
    """The profile document: per node calls, time, parameters and multiply-adds; totals.

    ``calls``, ``seconds`` and ``shapes`` are by the id of the leaf that ran, as in the
    execution plan: inside an expanded call that is a copy's id (see :mod:`trama.format._calls`).
    Those rows add up into their calling node's; the document lists the model's nodes only.
    """
    table = model.parameters
    expanded, _ = expand_calls(model)
    subtree_entries: dict[str, set[str]] = {node.id: set(node.parameters.values()) for node in expanded}
    kinds = {node.id: "leaf" if node.output_bindings is None else "composite" for node in expanded}
    leaf_macs: dict[str, int | None] = {}
    for node in expanded:
        if node.output_bindings is None:
            leaf_macs[node.id] = _macs(node, model, shapes.get(node.id))
    rows: dict[str, dict[str, Any]] = {}
    for node in reversed(expanded):  # children before parents: sums flow upwards
        entries = subtree_entries[node.id]
        row = rows.setdefault(node.id, {"calls": 0, "seconds": 0.0, "macs": 0})
        if node.output_bindings is None:
            row["calls"] = calls.get(node.id, 0)
            row["seconds"] = seconds.get(node.id, 0.0)
            row["macs"] = leaf_macs[node.id]
        parent = node.parent
        if parent is not None:
            subtree_entries[parent] |= entries
            up = rows.setdefault(parent, {"calls": 0, "seconds": 0.0, "macs": 0})
            up["calls"] = max(up["calls"], 1 if row["calls"] else 0)
            up["seconds"] += row["seconds"]
            up["macs"] = None if up["macs"] is None or row["macs"] is None else up["macs"] + row["macs"]
    nodes = []
    for node in model.nodes:
        count, nbytes = _parameter_size(subtree_entries[node.id], table)
        row = rows[node.id]
        nodes.append(
            {
                "id": node.id,
                "op": node.op,
                "kind": kinds[node.id],
                "calls": row["calls"],
                "seconds": row["seconds"],
                "parameters": count,
                "parameter_bytes": nbytes,
                "macs": row["macs"],
            }
        )
    count, nbytes = _parameter_size(set(table), table)
    known = [m for m in leaf_macs.values() if m is not None]
    return {
        "runtime": runtime,
        "nodes": nodes,
        "total": {
            "seconds": total_seconds,
            "node_seconds": sum(seconds.values()),
            "parameters": count,
            "parameter_bytes": nbytes,
            "macs": sum(known),
            "macs_complete": len(known) == len(leaf_macs),
        },
    }


def _macs(node: Node, model: Model, shapes: Shapes | None) -> int | None:
    rule = MACS.get(node.op)
    if rule is None or shapes is None:
        return None
    values = {slot: model.parameters[key].value for slot, key in node.parameters.items()}
    try:
        return int(rule(values, shapes))
    except (TypeError, ValueError, IndexError):
        return None


def _parameter_size(entries: set[str], table: Mapping[str, Any]) -> tuple[int, int]:
    """Elements and bytes of the tensor entries among ``entries`` (scalars are configuration)."""
    count = nbytes = 0
    for key in entries:
        value = table[key].value
        if isinstance(value, Tensor):
            count += value.size
            nbytes += value.nbytes
    return count, nbytes
