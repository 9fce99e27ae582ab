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

__all__ = ["SizedModule"]


class SizedModule(nn.Module):
    """Calls the module its leaf is for the sizes of the run in progress."""

    def __init__(self, sized: SizedNode) -> None:
        super().__init__()
        self.sized = sized

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        built = self.sized.current()
        first = next((arg for arg in args if hasattr(arg, "device")), None)
        if first is not None and isinstance(built, nn.Module):
            built.to(first.device)
        return built(*args, **kwargs)

    def extra_repr(self) -> str:
        return f"{self.sized.node.op}, sizes from {', '.join(self.sized.symbols)}"
