"""What a JAX op implementation builds: a leaf's computation as a pure function.

A numpy or torch kernel binds its parameters when it is built. A JAX kernel must not: training
differentiates with respect to the parameters, and ``jax.jit`` should see them as arguments, not
as constants baked into the compiled program. So a :class:`JaxKernel` keeps the node's
*settings* (ints, bools, strings, lists: they decide shapes and control flow, and are closed over
at build time) apart from its *tensors*, which are passed at every call, by slot name.

Recurrent ops (GRU, LSTM) also provide ``step`` and ``initial_state``, so that a runtime's
``State`` can carry their hidden state from one call to the next, explicitly, as a value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Apply", "JaxKernel", "Step"]

#: ``apply(tensors, inputs) -> outputs``: tensors by slot name, inputs by port name (optional
#: ports left unconnected are absent), outputs by output name. Pure and traceable by ``jax.jit``.
Apply = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
#: ``step(tensors, inputs, state) -> (outputs, new_state)``; ``state`` may be ``None`` (zeros).
Step = Callable[[Mapping[str, Any], Mapping[str, Any], Any], tuple[dict[str, Any], Any]]


@dataclass(frozen=True, slots=True)
class JaxKernel:
    """One leaf node's computation, with its settings bound and its tensors left as arguments.

    ``tensor_slots`` names the node's slots that hold tensors (present and not null): the keys
    ``apply`` expects in ``tensors``. ``step`` and ``initial_state`` are set for recurrent ops
    only; ``initial_state()`` may return ``None``, meaning zeros shaped from the first input.
    """

    apply: Apply
    tensor_slots: tuple[str, ...] = ()
    step: Step | None = None
    initial_state: Callable[[], Any] | None = None

    @property
    def stateful(self) -> bool:
        return self.step is not None
