"""Hooks on the modules of a document's nodes, attached for one run only: to time each leaf and
note its shapes (profiles), or to find which node a failing run was in (error messages).

They are attached only for that run, because a hook on a module sends every call of it through
torch's slower hook-dispatching path; the runs that matter for speed carry none.

A module that several nodes share (a node calling another's module) is reported under the
first of them in document order: a hook sees the module, not which node called it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from trama.format import Model

__all__ = ["FailureProbe", "TimingProbe", "attached"]

Shapes = list[list[list[int]]]


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a module's arguments or results, in order (through tuples, lists, dicts)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _modules_by_node(
    root: nn.Module, model: Model, node_modules: Mapping[str, str], *, leaves_only: bool
) -> dict[str, nn.Module]:
    """Node id -> module, each module once (under the first node that names it)."""
    seen: set[int] = set()
    found: dict[str, nn.Module] = {}
    for node in model.nodes:
        if (leaves_only and node.is_composite) or node.id not in node_modules:
            continue
        module = root.get_submodule(node_modules[node.id])
        if id(module) not in seen:
            seen.add(id(module))
            found[node.id] = module
    return found


class TimingProbe:
    """Per leaf: calls, seconds and the shapes of the last call's inputs and outputs.

    ``sync`` waits for the device (CUDA and Metal run asynchronously: without it, a leaf's time
    would be the time to queue its kernels, and the next leaf would pay for them)."""

    leaves_only = True

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._clock = time.perf_counter
        self._started: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.shapes: dict[str, Shapes] = {}
        self._inputs: dict[str, list[list[int]]] = {}

    def before(self, node_id: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._inputs[node_id] = [list(t.shape) for t in _tensors((args, kwargs))]
        self._sync()
        self._started[node_id] = self._clock()

    def after(self, node_id: str, output: Any) -> None:
        self._sync()
        elapsed = self._clock() - self._started.pop(node_id)
        self.calls[node_id] = self.calls.get(node_id, 0) + 1
        self.seconds[node_id] = self.seconds.get(node_id, 0.0) + elapsed
        self.shapes[node_id] = [self._inputs.pop(node_id), [list(t.shape) for t in _tensors(output)]]


class FailureProbe:
    """The innermost node that was entered and never left: where a failing run failed."""

    leaves_only = False

    def __init__(self) -> None:
        self.open: list[str] = []

    def before(self, node_id: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.open.append(node_id)

    def after(self, node_id: str, output: Any) -> None:
        if self.open and self.open[-1] == node_id:
            self.open.pop()

    @property
    def culprit(self) -> str | None:
        return self.open[-1] if self.open else None


Probe = TimingProbe | FailureProbe


@contextmanager
def attached(probe: Probe, root: nn.Module, model: Model, node_modules: Mapping[str, str]) -> Iterator[Probe]:
    """``probe`` hooked to the node modules of ``root`` for the ``with`` block."""
    handles: list[RemovableHandle] = []
    try:
        for node_id, module in _modules_by_node(root, model, node_modules, leaves_only=probe.leaves_only).items():
            handles.append(module.register_forward_pre_hook(_before(probe, node_id), with_kwargs=True))
            handles.append(module.register_forward_hook(_after(probe, node_id)))
        yield probe
    finally:
        for handle in handles:
            handle.remove()


def _before(probe: Probe, node_id: str) -> Any:
    def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        probe.before(node_id, args, kwargs)

    return hook


def _after(probe: Probe, node_id: str) -> Any:
    def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        probe.after(node_id, output)

    return hook
