"""What a framework's op implementation builds: a kernel, one leaf node's computation.

A framework package returns, from ``trama_op_implementations(framework)``, a factory per op;
a runtime calls ``factory(node, children={}, parameters=...)`` once, when it prepares a model,
and gets a kernel. Running the model then calls each leaf's kernel with the values on its
connected input ports, by port name, and takes back its outputs by name. Parameters are bound
when the kernel is built, never passed per call, so a kernel may precompute (transpose a
weight, fold a scale) once.

Kernels that carry state across calls (a GRU's hidden state when streaming a sequence in chunks)
also implement :class:`StatefulKernel`: the runtime keeps their state in its ``State`` objects
and threads it through :meth:`StatefulKernel.step`. Composite nodes have no kernel: runtimes
execute them from their wiring.

A factory may also return a *domain object* (what ``trama.import_model`` hands its user: a lens,
a filter) that is not itself a kernel, provided it offers :class:`KernelProvider`'s
``trama_kernel()``: the graph runtimes then run the kernel it gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Kernel", "KernelProvider", "StatefulKernel", "as_kernel"]


@runtime_checkable
class Kernel(Protocol):
    """A leaf node's computation with its parameters bound."""

    def __call__(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        """Compute the outputs (by output name) from the values on the connected input ports
        (by port name; optional ports left unconnected are absent)."""
        ...


@runtime_checkable
class StatefulKernel(Protocol):
    """A kernel whose computation continues from one call to the next (recurrent state).

    ``initial_state()`` is the state before any input (zeros for a GRU). ``step`` is a pure
    function of its arguments: it returns the outputs and the new state, and never changes the
    state it was given, so a frozen state can be reused and two states never share buffers.
    """

    def initial_state(self) -> Any:
        """The state a fresh ``State`` starts from."""
        ...

    def step(self, inputs: Mapping[str, Any], state: Any) -> tuple[Mapping[str, Any], Any]:
        """Outputs and the next state; explicit initial-state inputs (``h0``) take precedence
        over ``state`` when connected."""
        ...


@runtime_checkable
class KernelProvider(Protocol):
    """A domain object that says how trama's graph runtimes run it: ``trama_kernel()`` returns
    its :class:`Kernel` (or :class:`StatefulKernel`)."""

    def trama_kernel(self) -> Any:
        """The kernel that computes this object's node."""
        ...


def as_kernel(built: Any) -> Any:
    """What a graph runtime runs for an object a factory built: its ``trama_kernel()`` when it
    offers one, else the object itself (which must then be a kernel)."""
    provider = getattr(built, "trama_kernel", None)
    return provider() if callable(provider) else built
