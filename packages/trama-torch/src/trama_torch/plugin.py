"""trama-torch's plugin: torch implementations of the standard catalog, the torch.nn exporter and
the torch runtimes.

Discovery imports this module whether or not anybody uses torch, so it imports neither torch nor
the rest of the package at the top: the op table loads when a torch registry is built, the
exporter when an object that is already a ``torch.nn.Module`` is exported, and the runtime
module when runtimes are listed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from trama.catalog import standard_op_names
from trama.extension import hookimpl, implementation_hooks

FRAMEWORK = "torch"


# Every catalog op, each loading the real table (and torch) when its first node is built: asking
# for the table must not import torch. A test checks the real table has them all.
trama_frameworks, trama_op_implementations = implementation_hooks(
    FRAMEWORK, "trama_torch.factories:implementations", names=standard_op_names, distribution="trama-torch"
)


def export_torch_module(obj: Any, ctx: Any) -> Any:
    """The exporter offered every object without ``to_node``: handles ``torch.nn.Module``s.

    An object can only be a torch module if torch is already imported, so a foreign object is
    declined with one dictionary lookup, and exporting a lens never imports torch."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.nn.Module):
        return None
    from trama_torch.exporter import export_module

    return export_module(obj, ctx)


@hookimpl(trylast=True)
def trama_exporters(framework: str) -> Sequence[Any] | None:
    """The tracer claims every ``torch.nn.Module``, so it is asked last: a pack's exporter for its
    own torch classes (a plain ``@hookimpl``) is asked first, whatever the discovery order."""
    return [export_torch_module] if framework == FRAMEWORK else None


def sized_module(sized: Any) -> Any:
    """A torch module for a leaf whose settings depend on the input sizes
    (:class:`trama_torch.sized.SizedModule`)."""
    from trama_torch.sized import SizedModule

    return SizedModule(sized)


@hookimpl
def trama_sized_leaf(framework: str) -> Any:
    return sized_module if framework == FRAMEWORK else None


@hookimpl
def trama_runtimes() -> Sequence[Any]:
    from trama_torch.runtime import runtimes

    return runtimes()
