"""Nodes whose content the exporter has already decided, and the state no call exported.

Both ways trama-torch exports a module, the fx trace (:mod:`trama_torch.fx`) and the capture
(:mod:`trama_torch.capture`), hand ``ctx.child`` objects whose node is already known
(:class:`Fixed`), and both must keep the tensors of submodules that ``forward`` never calls
(``for layer in self.layers[1:]`` leaves ``layers.0`` unused): :func:`export_dormant` writes
them as ``constant`` children inside ``Graph`` nodes named and classed after the modules on the
way, so that the imported ``state_dict`` is the original's, whole.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trama.conversion import ExportContext, NodeFragment
from trama_torch.names import TORCH_NAME, Names
from trama_torch.tensors import export_tensor

__all__ = ["Fixed", "Trie", "dormant_trie", "export_dormant"]

#: Unused state below one module: attribute name -> a tensor, or the trie of a submodule.
Trie = dict[str, Any]


class Fixed:
    """An object whose node is already known (a function op, a constant, a container scope),
    handed to ``ctx.child`` like a module; being a fresh object each time, it is never taken for
    a second use of something exported before."""

    def __init__(self, make: Callable[[ExportContext], NodeFragment]) -> None:
        self._make = make

    def to_node(self, ctx: ExportContext) -> NodeFragment:
        fragment = self._make(ctx)
        assert isinstance(fragment, NodeFragment)
        return fragment


def dormant_trie(module: nn.Module, held: Callable[[str, torch.Tensor], bool]) -> Trie:
    """The state of ``module`` that no node holds (``held(key, tensor)`` is false), as a trie of
    its ``state_dict`` keys; a tensor under two keys (tied) is taken once, at its first key."""
    trie: Trie = {}
    seen: set[int] = set()
    for key, tensor in module.state_dict(keep_vars=True).items():
        if id(tensor) in seen or held(key, tensor):
            continue
        seen.add(id(tensor))
        *path, attribute = key.split(".")
        node = trie
        for segment in path:
            node = node.setdefault(segment, {})
        node[attribute] = tensor
    return trie


def export_dormant(ctx: ExportContext, module: nn.Module, trie: Trie, fresh: Callable[[str], str]) -> None:
    """Children of ``ctx``'s node for ``trie`` (below ``module``): a ``constant`` per tensor, a
    ``Graph`` of the module's class per submodule, each named ``fresh(attribute)`` (the torch
    name kept in metadata where it had to change)."""
    for key, item in trie.items():
        name = fresh(key)
        metadata: dict[str, Any] = {} if name == key else {TORCH_NAME: key}
        if isinstance(item, torch.Tensor):
            fragment = NodeFragment(
                "constant", outputs=["y"], parameters={"value": export_tensor(item)}, metadata=metadata or None
            )
            ctx.child(name, Fixed(functools.partial(_given, fragment)), {})
        else:
            sub = module.get_submodule(key)
            ctx.child(name, Fixed(functools.partial(_dormant_module, sub, item, metadata)), {})


def _given(fragment: NodeFragment, ctx: ExportContext) -> NodeFragment:
    return fragment


def _dormant_module(module: nn.Module, trie: Trie, metadata: dict[str, Any], ctx: ExportContext) -> NodeFragment:
    export_dormant(ctx, module, trie, Names().fresh)
    cls = type(module)
    return NodeFragment(
        "Graph", outputs=[], output_bindings={}, metadata={"class": f"{cls.__module__}.{cls.__qualname__}", **metadata}
    )
