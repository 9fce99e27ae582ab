"""Streaming through torch's recurrent modules: ``GRU`` and ``LSTM`` nodes carry their hidden
state from one :meth:`trama.execution._runtime.State.run` to the next.

An imported document calls ``nn.GRU`` / ``nn.LSTM`` like torch code does: with an ``hx`` when
the node's ``h0`` (``c0``) port is connected, without one (zeros) otherwise. Streaming needs
the second case to start from the previous call's final state instead. Rather than replacing
the modules (which would change the document module's structure and parameter names), a pair
of hooks is put on each recurrent module:

* before it runs, when a state is active and the call gives no ``hx``, the carried state is
  passed as ``hx`` (an explicitly connected ``h0`` takes precedence, as in the numpy kernels);
* after it runs, when a state is active, ``h_n`` (``(h_n, c_n)``) is stored as the new carried
  state.

The active state is per thread, so one runnable can stream several states from several threads;
with no state active (a plain ``run``) the hooks change nothing and every call starts fresh.
Stored states are copies: an output the caller modifies in place cannot change a state, and
state entries are replaced, never modified, so a :class:`trama.execution._runtime.FrozenState` may share
them.

A bidirectional layer cannot continue from a carried state (its reverse direction starts at the
end of the sequence, which a chunk does not have), so that is refused rather than computed
wrongly; streaming it from the initial state, one whole sequence per state, works.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from trama.errors import ExecutionError, ImportModelError
from trama.format import Model

__all__ = ["RECURRENT_OPS", "RecurrentStreaming"]

#: Ops whose modules carry state between streamed calls.
RECURRENT_OPS = frozenset({"GRU", "LSTM"})

States = dict[str, Any]


class _Run:
    """What one thread's streamed run knows: the states, and how often each recurrent module has
    been called so far in this run (a called module runs once per node using it)."""

    __slots__ = ("calls", "key", "states")

    def __init__(self, states: States) -> None:
        self.states = states
        self.calls: dict[int, int] = {}
        self.key: dict[int, str] = {}


class RecurrentStreaming:
    """The streaming hooks of one document module's recurrent nodes (see the module doc).

    A recurrent module may run for several nodes: its own and the nodes calling it. Each of
    those calls is a stream of its own, so states are kept per call, in the order the calls
    happen within a run (which is fixed: the document module's code has no branches): the k-th
    call of a module continues from the k-th call of the previous run. The k-th state is stored
    under the id of the k-th node using the module, in document order."""

    def __init__(self, root: nn.Module, model: Model, node_modules: Mapping[str, str]) -> None:
        self._local = threading.local()
        users: dict[int, list[str]] = {}  # module -> the ids of the nodes running it
        modules: dict[int, tuple[nn.Module, str]] = {}
        for node in model.nodes:
            if node.op not in RECURRENT_OPS or node.is_composite or node.id not in node_modules:
                continue
            module = root.get_submodule(node_modules[node.id])
            if not isinstance(module, nn.RNNBase):
                raise ImportModelError(
                    f"cannot stream {node.op}: its module is a {type(module).__name__}, not a torch recurrent module",
                    node_id=node.id,
                )
            users.setdefault(id(module), []).append(node.id)
            modules.setdefault(id(module), (module, node.op))
        #: The ids under which states are stored.
        self.node_ids = [node_id for ids in users.values() for node_id in ids]
        for key, (module, op) in modules.items():
            # First of the module's hooks, whenever they are added: the carried state must join the
            # arguments before a placement hook moves them to the module's device, and h_n must be
            # stored before a placement hook moves the results away from it.
            module.register_forward_pre_hook(self._before(users[key], op), with_kwargs=True, prepend=True)
            module.register_forward_hook(self._after(), prepend=True)

    @contextmanager
    def active(self, states: States | None) -> Iterator[None]:
        """Make ``states`` the carried state of this thread's calls for the ``with`` block
        (``None``: no streaming, every recurrent node starts from zeros)."""
        previous = getattr(self._local, "run", None)
        self._local.run = None if states is None else _Run(states)
        try:
            yield
        finally:
            self._local.run = previous

    def _before(self, node_ids: list[str], op: str) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            run: _Run | None = getattr(self._local, "run", None)
            if run is None:
                return None
            index = run.calls.get(id(module), 0)
            run.calls[id(module)] = index + 1
            node_id = node_ids[index] if index < len(node_ids) else f"{node_ids[0]}#{index}"
            run.key[id(module)] = node_id
            given = args[1] if len(args) > 1 else kwargs.get("hx")
            carried = run.states.get(node_id)
            if given is not None or carried is None:
                return None
            if getattr(module, "bidirectional", False):
                raise ExecutionError(
                    f"a bidirectional {op} cannot continue from a carried state: its reverse direction starts "
                    "at the end of the sequence; stream it one whole sequence per state",
                    node_id=node_id,
                )
            if len(args) > 1:
                return (args[0], carried, *args[2:]), kwargs
            return args, {**kwargs, "hx": carried}

        return hook

    def _after(self) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            run: _Run | None = getattr(self._local, "run", None)
            if run is not None:
                run.states[run.key[id(module)]] = _copy(output[1])

        return hook


def _copy(value: Any) -> Any:
    """A private copy of ``h_n`` or ``(h_n, c_n)``."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return tuple(_copy(item) for item in value)
