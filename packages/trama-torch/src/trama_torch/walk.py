"""Walks of a module tree that do not recurse: a document nests up to 512 levels.

torch's own walks (``named_modules``, ``eval``, ``to``) recurse once or more per level of the
module tree, and ``named_modules`` of a tree ``d`` deep passes every module it yields up through
``d`` nested generators. An imported document is as deep as its node tree, which a file decides
(up to :data:`trama.format._names.MAX_NODE_DEPTH` levels), so the importer and the runtimes walk
modules with these instead: an explicit stack, the cost of each module its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import torch
from torch import nn

__all__ = ["evaluation_mode", "module_at", "move_to", "submodules"]

ModuleT = TypeVar("ModuleT", bound=nn.Module)


def submodules(
    root: nn.Module, *, remove_duplicate: bool = True, stop: Callable[[nn.Module], bool] | None = None
) -> Iterator[tuple[str, nn.Module]]:
    """``root.named_modules()``, iteratively: every module under ``root`` (``root`` first, as
    ``""``) with its qualified name, parents before children, children in registration order;
    a module met again is left out unless ``remove_duplicate`` is false. ``stop(module)`` true
    yields that module but not what is inside it."""
    seen: set[int] = set()
    stack: list[tuple[str, nn.Module]] = [("", root)]
    while stack:
        name, module = stack.pop()
        if remove_duplicate:
            if id(module) in seen:
                continue
            seen.add(id(module))
        yield name, module
        if stop is not None and name and stop(module):
            continue
        prefix = f"{name}." if name else ""
        children = [(f"{prefix}{key}", child) for key, child in module._modules.items() if child is not None]
        stack.extend(reversed(children))


def module_at(root: nn.Module, path: str) -> nn.Module | None:
    """The submodule at dotted ``path`` (``""``: ``root``), or ``None`` where there is none (a
    name that holds a tensor, or nothing): ``get_submodule`` without its exception."""
    module = root
    for part in path.split(".") if path else ():
        child = module._modules.get(part)
        if child is None:
            return None
        module = child
    return module


def evaluation_mode(root: ModuleT) -> ModuleT:
    """``root.eval()``, iteratively; returns ``root``. A module whose class has a ``train`` of
    its own is asked through it (for its subtree, which it then owns)."""
    stack: list[nn.Module] = [root]
    seen: set[int] = set()
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        if type(module).train is not nn.Module.train:
            module.train(False)
            continue
        module.training = False
        stack.extend(child for child in module._modules.values() if child is not None)
    return root


def move_to(root: nn.Module, device: torch.device) -> nn.Module:
    """``root.to(device)``, iteratively (each module's own parameters and buffers, as
    ``Module.to`` converts them); returns ``root``."""

    def convert(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(device)

    for _, module in submodules(root):
        module._apply(convert, recurse=False)  # type: ignore[no-untyped-call]
    return root
