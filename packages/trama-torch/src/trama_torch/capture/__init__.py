"""Capture with example inputs: a model through ``torch.export``, back as the tree the user wrote.

``trama.export_model(model, inputs=..., outputs=..., example_inputs=...)`` hands the root module
its example inputs, and :func:`trama_torch.exporter.export_module` sends it here instead of the
one-level ``torch.fx`` tracer. The pieces:

* :mod:`.program` runs ``torch.export`` (non-strict) with the examples and the dynamic shapes,
  and turns its failures into one-line :class:`trama.ExportError`\\ s;
* :mod:`.tree` records, while it runs, every module call: which graph nodes it made, what it
  took and what it gave;
* :mod:`.plan` orders each call's units and finds the ``ModuleList``/``ModuleDict`` containers;
* :mod:`.aten` maps the aten ops a module runs itself to catalog function ops;
* :mod:`.emit` writes the nodes: leaves as their ops, other modules as ``Graph`` nodes, calls of
  a module used twice as calling nodes, unused state as constants;
* :mod:`.names` makes node ids of attribute names torch allows and the format does not.

See ``docs/torch.md``, "Capture with example inputs".
"""

from __future__ import annotations

from torch import nn

from trama import ExportContext, NodeFragment
from trama_torch.capture.emit import Capture
from trama_torch.capture.program import run_export

__all__ = ["export_captured"]


def export_captured(module: nn.Module, ctx: ExportContext) -> NodeFragment:
    """The root node of ``module`` captured with ``ctx.example_inputs`` (and its whole tree)."""
    examples = ctx.example_inputs
    assert examples is not None
    cls = type(module)
    where = f"{ctx.node_id!r} ({cls.__module__}.{cls.__qualname__})"
    from trama_torch.plugin import export_torch_module

    def claimed(sub: nn.Module) -> bool:
        """Whether an exporter asked before trama-torch's own (an op pack's) handles ``sub``."""
        return ctx.claimed(sub, before=export_torch_module)

    captured = run_export(module, examples, ctx.dynamic_shapes, list(ctx.inputs), where, claimed)
    return Capture(module, captured, where, ctx.dynamic_shapes).root_fragment(ctx)
