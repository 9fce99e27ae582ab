"""Nodes whose settings depend on the input sizes, built once per binding of the symbols.

A node whose settings hold a :class:`~trama.format.SizeExpr` (``arange`` up to ``seq``, a
``reshape`` to ``[batch, seq, 12, 64]``) cannot be built when the document is imported: its
settings are numbers only once the inputs are known. :class:`SizedNode` keeps what building it
needs, and :meth:`SizedNode.build` builds it for the sizes of the run in progress
(:func:`trama.execution.current_sizes`), each expression replaced by its number, with the
catalog's settings checks and the framework's factory exactly as for any other node. What it
built for one set of numbers is kept: a model served at a few lengths builds each node a few
times, and a JAX program traces each shape once anyway.

Each framework wraps a :class:`SizedNode` in its own kind of object (a numpy kernel, a torch
module, a JAX leaf) that calls :meth:`SizedNode.current` when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from trama.errors import ExecutionError
from trama.format._model import Node, Parameter
from trama.format._sizes import has_sizes, is_symbolic_int, resolve_sizes, size_symbols
from trama.format._specs import OpRegistry

__all__ = ["SizedNode", "bound_sizes", "current_sizes", "is_sized"]

_SIZES: ContextVar[Mapping[str, int] | None] = ContextVar("trama_sizes", default=None)


@contextmanager
def bound_sizes(binding: Mapping[str, int]) -> Iterator[None]:
    """Run what is inside with each symbol bound to its size (see :func:`current_sizes`)."""
    token = _SIZES.set(binding)
    try:
        yield
    finally:
        _SIZES.reset(token)


def current_sizes() -> Mapping[str, int] | None:
    """The sizes bound by the run in progress (``trama.execution.check_inputs`` binds them from
    the inputs), ``None`` outside a run."""
    return _SIZES.get()


#: How many distinct bindings one node keeps what it built for (the oldest is dropped first).
_KEPT = 32


def is_sized(parameters: Mapping[str, Parameter]) -> bool:
    """Whether some setting of a node is a size computed from the inputs."""
    return any(has_sizes(entry.value) for entry in parameters.values())


class SizedNode:
    """A node built per binding of the symbols its settings read."""

    def __init__(
        self,
        node: Node,
        registry: OpRegistry,
        parameters: Mapping[str, Parameter],
        build: Callable[[Node, OpRegistry, dict[str, Parameter], dict[str, Parameter] | None], Any],
    ) -> None:
        self.node = node
        self.registry = registry
        self.parameters = dict(parameters)
        self.sized_slots = tuple(slot for slot, entry in self.parameters.items() if has_sizes(entry.value))
        self.symbols = tuple(
            sorted({s for slot in self.sized_slots for s in size_symbols(self.parameters[slot].value)})
        )
        self._build = build
        self._built: dict[tuple[int, ...], Any] = {}

    def current(self, example: Callable[[Any], int] | None = None) -> Any:
        """What this node is for the sizes of the run in progress.

        ``example`` gives the number a symbolic size stands for in the trace in progress (the
        framework's; torch's SizedModule passes one while ``torch.export`` traces)."""
        binding = current_sizes()
        if binding is None:
            raise ExecutionError(
                f"the settings of this {self.node.op} depend on the input sizes ({', '.join(self.symbols)}), "
                "which are known only in a run: run the document with a runtime "
                "(trama.runtime_for_name(...).prepare(model).run(inputs))",
                node_id=self.node.id,
            )
        return self.build(binding, example=example)

    def build(self, binding: Mapping[str, int], *, example: Callable[[Any], int] | None = None) -> Any:
        """What this node is when each symbol has the size ``binding`` gives it.

        A binding may hold symbolic sizes (``torch.SymInt`` while ``torch.export`` traces the
        module): the node is then built with its settings symbolic, so that the framework
        records the computation of each size, not its example's number, once the catalog has
        checked the settings at the example's numbers (``example``: a symbolic size's number)."""
        missing = [symbol for symbol in self.symbols if symbol not in binding]
        if missing:
            raise ExecutionError(
                f"the settings of this {self.node.op} read {', '.join(map(repr, missing))}, which no input "
                "fact binds (the document's input_facts must name every symbol its sizes use)",
                node_id=self.node.id,
            )
        key = tuple(binding[symbol] for symbol in self.symbols)
        # Symbolic sizes (torch.export tracing the module) are built afresh: each trace is once,
        # and a symbolic integer cannot be a key.
        symbolic = any(is_symbolic_int(size) for size in key)
        built = None if symbolic else self._built.get(key)
        if built is None:
            parameters = self._resolved(binding)
            if symbolic:
                if example is None:
                    raise ExecutionError(
                        f"the sizes of this {self.node.op} are symbolic, and nothing says their example's numbers",
                        node_id=self.node.id,
                    )
                numbers = {
                    symbol: size if not is_symbolic_int(size) else example(size) for symbol, size in binding.items()
                }
                return self._build(self.node, self.registry, parameters, self._resolved(numbers))
            built = self._build(self.node, self.registry, parameters, None)
            if len(self._built) >= _KEPT:
                del self._built[next(iter(self._built))]
            self._built[key] = built
        return built

    def _resolved(self, binding: Mapping[str, Any]) -> dict[str, Parameter]:
        """The parameters with each size replaced by its value for ``binding``."""
        parameters = dict(self.parameters)
        for slot in self.sized_slots:
            entry = parameters[slot]
            try:
                value = resolve_sizes(entry.value, binding)
            except (ValueError, ArithmeticError) as exc:
                raise ExecutionError(f"setting {slot!r}: {exc}", node_id=self.node.id) from None
            parameters[slot] = Parameter(value, entry.learnable)
        return parameters
