"""A torch module for a leaf whose settings depend on the input sizes.

The document's sizes (``{"size": "seq + 1"}``) are numbers only in a run: the runtime binds
the symbols from the inputs (:func:`trama.execution.check_inputs`) around each call, and this
module builds the leaf's real module for those numbers when it is called
(:class:`trama.conversion.SizedNode`, which keeps one per binding) and calls it. Such leaves
are the catalog's functions of sizes (``arange``, ``reshape``, ``expand``, ``full``), which
hold no tensors, so there is no state to share between the modules built for each binding.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from trama.conversion import SizedNode
from trama.execution import bound_sizes, current_sizes, sizes_of_top_node
from trama.format import Model, Node

__all__ = ["SizedModule", "binding_sizes_when_called"]


class SizedModule(nn.Module):
    """Calls the module its leaf is for the sizes of the run in progress."""

    def __init__(self, sized: SizedNode) -> None:
        super().__init__()
        self.sized = sized

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        built = self.sized.current(example=_example_number)
        first = next((arg for arg in args if hasattr(arg, "device")), None)
        if first is not None and isinstance(built, nn.Module):
            built.to(first.device)
        return built(*args, **kwargs)

    def extra_repr(self) -> str:
        return f"{self.sized.node.op}, sizes from {', '.join(self.sized.symbols)}"


def _example_number(size: Any) -> int:
    """The number a symbolic size has in the example ``torch.export`` traces with, read without
    adding a guard (``int(size)`` would fix the size at that number in the exported program)."""
    from torch.fx.experimental.symbolic_shapes import guarding_hint_or_throw

    return int(guarding_hint_or_throw(size))


def binding_sizes_when_called(module: nn.Module, model: Model, node: Node) -> None:
    """Make the document's top module, called on its own (``trama.import_model(doc)(ids)``),
    bind the sizes its leaves read from the inputs it is given, checked against the input facts;
    a runtime binds them itself, and a module inside a run finds them bound."""
    ports = list(node.inputs)
    active: list[Any] = []

    def before(_: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if current_sizes() is not None:
            active.append(None)
            return
        given = dict(zip(ports, args, strict=False)) | kwargs
        sizes = sizes_of_top_node(model, node, given)
        context = None if sizes is None else bound_sizes(sizes)
        if context is not None:
            context.__enter__()
        active.append(context)

    def after(*_: Any) -> None:
        context = active.pop() if active else None
        if context is not None:
            context.__exit__(None, None, None)

    module.register_forward_pre_hook(before, with_kwargs=True)
    module.register_forward_hook(after, always_call=True)
