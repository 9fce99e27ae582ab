"""The fallback for an aten op the catalog has no op for: torch's own decomposition of it.

Where :mod:`trama_torch.capture.aten` finds no catalog op for an aten op, the op may still be
computed from ops the catalog does have: torch keeps, for most of its operators, a decomposition
into simpler aten ops (``torch._decomp.decomposition_table``: ``aten.addcmul`` is a ``mul``, a
``mul`` and an ``add``). :func:`decomposition` traces that decomposition once, on tensors of the
captured shapes and dtypes (on the ``meta`` device: no data, no work), into a small graph of
aten ops; the capture then maps each of its nodes as it maps the program's own, inside a
``Graph`` node that records which op it stands for (:data:`DECOMPOSED`). So an export does not
fail for want of one op that torch knows how to decompose, and the module tree stays the
user's: only that one call becomes a small graph, inside the module that made it.

A decomposition is traced only for static shapes: a symbolic size of the captured program
would become a fresh, unrelated symbol in the trace. Ops without a decomposition, and ops whose
decomposition reads values (``.item()``) or itself fails on meta tensors, stay missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

__all__ = ["DECOMPOSED", "Decomposition", "decomposition", "tensor_arguments"]

#: Node metadata key of a ``Graph`` node that stands for one aten op, decomposed by torch's table:
#: its value is the op's name (``"aten.hardsigmoid.default"``).
DECOMPOSED = "decomposed"


@dataclass(frozen=True)
class Decomposition:
    """torch's decomposition of one captured call: ``graph`` takes the call's tensor arguments,
    in the order of ``tensors`` (indices into the flattened ``(args, kwargs)``), and returns its
    result (a tensor, or a tuple of them)."""

    graph: fx.Graph
    tensors: tuple[int, ...]


def _table() -> Mapping[Any, Any]:
    from torch._decomp import decomposition_table

    return decomposition_table


def _static_meta(value: Any) -> torch.Tensor | None:
    """An empty tensor on the meta device like ``value`` (a fake tensor of the program), or
    ``None`` when a size is symbolic."""
    if not isinstance(value, torch.Tensor):
        return None
    sizes = list(value.shape)
    if any(isinstance(size, torch.SymInt) for size in sizes):
        return None
    return torch.empty([int(size) for size in sizes], dtype=value.dtype, device="meta")


def decomposition(node: fx.Node) -> Decomposition | None:
    """torch's decomposition of the aten call ``node``, traced on its captured shapes, or
    ``None`` where torch has none or it cannot be traced here (see the module docstring)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return None
    decompose = _table().get(target)
    if decompose is None:
        return None
    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    examples: list[torch.Tensor] = []
    positions: list[int] = []
    for index, leaf in enumerate(flat):
        if isinstance(leaf, fx.Node):
            value = leaf.meta.get("val")
            if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                return None
            meta = _static_meta(value)
            if meta is None:
                return None
            examples.append(meta)
            positions.append(index)

    def call(*tensors: torch.Tensor) -> Any:
        leaves = list(flat)
        for position, tensor in zip(positions, tensors, strict=True):
            leaves[position] = tensor
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        return target(*args, **kwargs)

    try:
        traced = make_fx(call, decomposition_table={target: decompose}, tracing_mode="real")(*examples)
    except Exception:  # a decomposition that reads data or refuses meta tensors: no fallback
        return None
    if any(n.op == "call_function" and n.target is target for n in traced.graph.nodes):
        return None  # the table gave the op back unchanged
    return Decomposition(traced.graph, tuple(positions))


def tensor_arguments(args: Sequence[Any], kwargs: Mapping[str, Any], positions: Sequence[int]) -> list[Any]:
    """The scope values at ``positions`` of the flattened ``(args, kwargs)``: what feeds a
    :class:`Decomposition`'s placeholders, in order."""
    flat = pytree.tree_leaves((args, kwargs))
    return [flat[position] for position in positions]
