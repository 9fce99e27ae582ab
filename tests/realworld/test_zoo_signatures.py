"""A scope's ports are its module's signature: no node returns more than its module's ``forward``.

For every zoo model, forward hooks count what each module call returned in eager torch: the
tensors of the result, and the ``None`` positions of a returned tuple or list (``nn.MultiheadAttention``
returns ``(attn_output, None)`` without weights, and its catalog op has those two outputs).
Each node of the captured document that stands for a module (its id, with the ``torch_name``
of escaped segments, is a path of the model) may declare at most that many outputs. A node with
more returns a value the module computed but did not return, which torch.export shared with
another module: the tree would no longer say what the code says.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import trama
from realworld.captures import ZooCapture


def _returned(value: Any) -> int:
    """How many values a module call gave: tensors, and ``None`` positions of a sequence."""
    if isinstance(value, torch.Tensor):
        return 1
    if isinstance(value, (tuple, list)):
        return sum(1 if item is None else _returned(item) for item in value)
    if isinstance(value, dict):
        return sum(_returned(item) for item in value.values())
    to_tuple = getattr(value, "to_tuple", None)  # a transformers ModelOutput
    return _returned(to_tuple()) if callable(to_tuple) else 0


def eager_returns(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, int]:
    """Each called module's path, with the most values one of its calls returned."""
    counts: dict[str, int] = {}
    handles = []
    for name, module in model.named_modules():

        def hook(_module: nn.Module, _args: Any, result: Any, name: str = name) -> None:
            counts[name] = max(counts.get(name, 0), _returned(result))

        handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return counts


def module_paths(document: trama.Model) -> dict[str, trama.Node]:
    """Each node by the module path its id spells (the root is ``""``)."""
    paths: dict[str, str] = {}
    found: dict[str, trama.Node] = {}
    for node in document.nodes:
        original = (node.metadata or {}).get("torch_name")
        segment = original if isinstance(original, str) else node.id.rsplit(".", 1)[-1]
        if node.parent is None:
            path = ""
        elif node.parent in paths:
            base = paths[node.parent]
            path = f"{base}.{segment}" if base else segment
        else:
            continue
        paths[node.id] = path
        found[path] = node
    return found


def test_no_node_returns_more_than_its_module_did(zoo_capture: ZooCapture) -> None:
    if zoo_capture.document is None:
        return  # a refused model: test_zoo_capture checks its reason
    args, kwargs = zoo_capture.inputs()
    returned = eager_returns(zoo_capture.model, args, kwargs)
    checked = 0
    extra = []
    for path, node in module_paths(zoo_capture.document).items():
        if path not in returned:
            continue  # a function op, a container, a module never called
        checked += 1
        if len(node.outputs) > returned[path]:
            extra.append(f"{node.id}: {node.outputs} where forward returned {returned[path]}")
    assert checked >= 2, "no node of the document was matched to a module of the model"
    assert not extra, "\n".join(extra)
