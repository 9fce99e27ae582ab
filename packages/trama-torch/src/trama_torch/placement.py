"""Placement: run chosen subtrees of a document on other devices than the runtime's.

``placement={"root.encoder": "cuda:1", "root.head": "cpu"}`` moves the parameters of each named
node's subtree to that device once, at prepare time, and hooks the subtree's module so that
activations cross the boundary with it:

* its inputs go to its device before it runs;
* its outputs come back to the device of the code around it (the nearest placed ancestor's, or
  the runtime's), so that function ops in the parent never see tensors on two devices.

Placements nest: a child placed inside a placed parent returns its outputs to the parent's
device. A node whose subtree has no module of its own (a composite the document module inlines)
is placed through the topmost modules under it. A calling node runs the module of the node it
calls, so placing either places that one module, for both.

A parameter that the placed subtree shares with modules outside it (tied weights: an embedding
and an output layer) cannot be on two devices at once, so the subtree gets its own copy on its
device. The runtimes only run inference, which never writes a parameter, so the copies stay
equal. Doing this explicitly also makes the result the same for every pair of devices: left to
``Module.to``, a tie between CPU and GPU would be broken, but one between two GPUs would move
the shared tensor away from the modules outside.

What cannot be honoured is refused at prepare time with a :class:`trama.ExecutionError` naming
the node: an unknown node, a device that does not exist here, and one module placed on two
devices (a node and a node calling it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from trama.errors import ExecutionError
from trama.execution import resolve_placement as check_placement
from trama.format import Model
from trama_torch.devices import move, resolve_device
from trama_torch.walk import move_to, submodules

__all__ = ["place", "resolve_placement"]


def resolve_placement(model: Model, placement: Mapping[str, str]) -> dict[str, torch.device]:
    """Node id -> device for ``placement``, checked against ``model`` and this machine (before
    anything is built, so that a typo costs no import)."""
    return check_placement(model, placement, resolve_device)


def place(
    root: nn.Module, node_modules: Mapping[str, str], devices: Mapping[str, torch.device], default: torch.device
) -> None:
    """Place each node of ``devices`` (from :func:`resolve_placement`) in ``root``, whose
    parameters are already on ``default``; see the module doc."""
    if not devices:
        return
    placed: dict[str, torch.device] = {}  # qualified module name -> device
    for node_id in sorted(devices, key=lambda node_id: node_id.count(".")):  # parents before children
        device = devices[node_id]
        outer = _enclosing(node_id, devices, default)
        for name in _module_names(node_id, node_modules):
            if name in placed and placed[name] != device:
                raise ExecutionError(
                    f"cannot place {node_id!r} on {device}: its module {name!r} is already placed on {placed[name]} "
                    "(a node and a node calling it share one module)",
                    node_id=node_id,
                )
            placed[name] = device
            module = root.get_submodule(name)
            _copy_shared(root, name, device)
            move_to(module, device)
            module.register_forward_pre_hook(_inputs_to(device), with_kwargs=True)
            module.register_forward_hook(_outputs_to(outer))
    _check_parameters(root, placed, default)


def _enclosing(node_id: str, devices: Mapping[str, torch.device], default: torch.device) -> torch.device:
    """The device of the code around ``node_id``: its nearest placed ancestor's, or ``default``."""
    head = node_id
    while "." in head:
        head = head.rpartition(".")[0]
        if head in devices:
            return devices[head]
    return default


def _module_names(node_id: str, node_modules: Mapping[str, str]) -> list[str]:
    """The modules that hold ``node_id``'s subtree: its own, or else the topmost ones under it."""
    if node_id in node_modules:
        return [node_modules[node_id]]
    prefix = node_id + "."
    below = sorted((key for key in node_modules if key.startswith(prefix)), key=lambda key: key.count("."))
    topmost: list[str] = []
    for key in below:
        if not any(key.startswith(top + ".") for top in topmost):
            topmost.append(key)
    if not topmost:
        raise ExecutionError(f"cannot place {node_id!r}: no module runs it", node_id=node_id)
    return list(dict.fromkeys(node_modules[key] for key in topmost))


def _inputs_to(device: torch.device) -> Any:
    def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        return move(args, device), move(kwargs, device)

    return hook


def _outputs_to(device: torch.device) -> Any:
    def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        return move(output, device)

    return hook


def _copy_shared(root: nn.Module, name: str, device: torch.device) -> None:
    """Give the subtree ``name`` its own copy, on ``device``, of each parameter and buffer that a
    module outside it uses too (one copy per tensor, so ties inside the subtree stay)."""
    subtree = root.get_submodule(name)
    inside = {id(module) for _, module in submodules(subtree)}
    outside = {
        id(tensor)
        for _, module in submodules(root)
        if id(module) not in inside
        for tensor in (*module.parameters(recurse=False), *module.buffers(recurse=False))
    }
    copies: dict[int, torch.Tensor] = {}
    for _, module in submodules(subtree):
        tensors = [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
        for key, tensor in tensors:
            if id(tensor) in outside and tensor.device != device:
                if id(tensor) not in copies:
                    moved = tensor.detach().to(device)
                    is_parameter = isinstance(tensor, nn.Parameter)
                    copies[id(tensor)] = nn.Parameter(moved, tensor.requires_grad) if is_parameter else moved
                setattr(module, key, copies[id(tensor)])


def _check_parameters(root: nn.Module, placed: Mapping[str, torch.device], default: torch.device) -> None:
    """Refuse a parameter or buffer that is not where its module runs (a safety net: after
    :func:`_copy_shared`, none should be), rather than fail at run time with a device mismatch
    far from the cause."""
    for name, module in submodules(root, remove_duplicate=False):
        expected = _placed_device(name, placed, default)
        tensors = [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
        for tensor_name, tensor in tensors:
            if tensor.device != expected:
                qualified = f"{name}.{tensor_name}" if name else tensor_name
                raise ExecutionError(
                    f"placement failed: {qualified!r} is on {tensor.device}, but its module runs on {expected}"
                )


def _placed_device(name: str, placed: Mapping[str, torch.device], default: torch.device) -> torch.device:
    """The device of the module called ``name``: that of its innermost placed ancestor (or itself)."""
    best, length = default, -1
    for prefix, device in placed.items():
        inside = prefix == "" or name == prefix or name.startswith(prefix + ".")
        if inside and len(prefix) > length:
            best, length = device, len(prefix)
    return best
