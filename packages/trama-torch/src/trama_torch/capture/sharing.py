"""Values one module computed that another reads without being given them, put back in place.

A scope's ports are its module's signature: a node takes what ``forward`` was called with and
returns what it returned. The exported program does not always say so. In eager torch some ops
return the very tensor they were given (``x.to(x.dtype)``, ``x.contiguous()`` of a contiguous
``x``, ``x.detach()``, ``x.alias()``), and the tracer then records every later use of that
tensor object as a use of the op's result. LlamaRMSNorm starts with
``hidden_states.to(torch.float32)``; the decoder layer keeps ``residual = hidden_states`` and
adds it after the attention, and the program has that add read the cast made inside the norm,
so the norm's scope would return a second value, ``to``, that its ``forward`` never returned.

:func:`unshare_aliases` rewrites such reads: a reader outside the call that made a same-tensor
op, where that call (or a call on the way out to the reader) does not return the op's result,
reads the op's operand instead, which is the same tensor in eager torch. Reads that go through
a call's result are the code's own wiring and stay as they are.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from trama_torch.capture.tree import Call, CallTree, tensor_leaves

__all__ = ["unshare_aliases"]

aten = torch.ops.aten

#: Ops that, in eager torch, return their first argument itself (or a view of all of it).
_ALWAYS_SAME = frozenset({aten.alias.default, aten.detach.default})
#: Ops that return their first argument itself when the value already is what they ask for.
_SAME_WHEN_UNCHANGED = frozenset(
    {
        aten.to.dtype,
        aten.to.dtype_layout,
        aten.to.device,
        aten.to.other,
        aten.type_as.default,
        aten.contiguous.default,
    }
)


def unshare_aliases(tree: CallTree) -> int:
    """Redirect outside reads of same-tensor ops to their operands; the number of reads moved.

    Nodes are visited last to first, so a chain of such ops (a no-op cast of a no-op cast)
    moves its readers all the way back to the first operand."""
    moved = 0
    results: dict[Call, set[fx.Node]] = {}
    for node in reversed(list(tree.graph.nodes)):
        source = same_tensor_operand(node)
        if source is None:
            continue
        owner = tree.owner.get(node)
        if owner is None:
            continue
        for reader in list(node.users):
            if reader.op != "call_function" or not _leaks(tree, node, owner, reader, results):
                continue
            reader.replace_input_with(node, source)
            moved += 1
    return moved


def same_tensor_operand(node: fx.Node) -> fx.Node | None:
    """The operand ``node`` returns itself in eager torch, or ``None`` when it makes a new tensor."""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], fx.Node):
        return None
    operand = node.args[0]
    if node.target in _ALWAYS_SAME:
        return operand
    if node.target not in _SAME_WHEN_UNCHANGED or node.kwargs.get("copy"):
        return None
    before, after = operand.meta.get("val"), node.meta.get("val")
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
        return None
    if before.dtype != after.dtype or before.device != after.device or before.layout != after.layout:
        return None
    if node.target is aten.contiguous.default and not _contiguous(before):
        return None
    return operand


def _contiguous(value: torch.Tensor) -> bool:
    try:
        return bool(value.is_contiguous())
    except Exception:  # a symbolic stride torch cannot decide: assume a copy is made
        return False


def _leaks(tree: CallTree, node: fx.Node, owner: Call, reader: fx.Node, results: dict[Call, set[fx.Node]]) -> bool:
    """Whether ``reader`` reaches ``node`` past a call that does not return it."""
    call: Call | None = owner
    while call is not None and not tree.inside(reader, call):
        returned = results.get(call)
        if returned is None:
            returned = results[call] = {leaf.node for leaf in tensor_leaves(call.result)}
        if node not in returned:
            return True
        call = call.parent
    return False
