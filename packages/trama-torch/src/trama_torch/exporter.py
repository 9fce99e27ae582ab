"""The torch.nn exporter: any ``nn.Module`` as a node, chosen by what the module is.

The plugin offers every module without ``to_node`` to :func:`export_module`, which picks:

* a catalog leaf (``nn.Linear``, ``nn.GRU``…): the leaf's node (:mod:`trama_torch.leaves`);
* ``nn.Sequential`` whose children all read ``x`` and give ``y``: the catalog's ``Sequential``,
  children ``0``, ``1``, … chained;
* ``nn.TransformerEncoder`` of ``TransformerEncoderLayer``\\ s: the catalog's
  ``TransformerEncoder``, children ``layers_0``, … and ``norm``;
* anything else: a ``Graph`` traced from its ``forward`` (:mod:`trama_torch.fx.graph`), whose
  submodule calls come back here, one level down each time.

Nothing the user wrote needs to change, and no registry has to be passed: the exporter is
discovered with the plugin. What cannot be captured is an :class:`~trama.ExportError` naming
the module's path and class and what to do about it.

The export is of the model in eval mode, as the catalog defines ops: the outermost module is
switched to ``eval()`` while it is exported and every module's ``training`` flag is restored
afterwards (:func:`trama_torch.fx.submodule_calls.export_state`), so exporting a model in the middle of
training neither fails nor disturbs the training.
"""

from __future__ import annotations

import torch
from torch import nn

from trama.conversion import ExportContext, NodeFragment
from trama.errors import ExportError
from trama.format import INPUT, Ref
from trama_torch import leaves
from trama_torch.fx.graph import export_traced
from trama_torch.fx.submodule_calls import (
    CallSite,
    Wire,
    bind_module_call,
    call_child,
    current_state,
    export_running,
    export_state,
    module_kind,
    site_from_ports,
)
from trama_torch.fx.trace import described

__all__ = ["export_module"]


def export_module(module: nn.Module, ctx: ExportContext) -> NodeFragment:
    """The node of ``module`` at ``ctx.node_id`` (see the module docstring for the choice)."""
    ctx.record_framework("torch", torch.__version__)
    if ctx.example_inputs is not None and module_kind(module) not in ("leaf", "exportable"):
        from trama_torch.capture import export_captured  # loads torch.export only when asked for

        with export_state(module):
            return export_captured(module, ctx)
    outermost = not export_running()  # the root's export, before any state is opened
    try:
        return _export_traced_path(module, ctx)
    except ExportError as exc:
        if not outermost or not _capture_would_help(exc):
            raise
        hint = CAPTURE_HINT_BRANCH if isinstance(exc.__cause__, torch.fx.proxy.TraceError) else CAPTURE_HINT
        hinted = ExportError(f"{exc.message}; {hint}", node_id=exc.node_id)
        raise hinted.with_traceback(exc.__traceback__) from exc.__cause__


#: Said by the errors of the fx path, which sees no shapes: capture by running the model can.
CAPTURE_HINT = (
    "or pass example_inputs= to trama.export_model, which then captures the model with torch.export "
    '(docs/torch.md, "Capture with example inputs")'
)
#: The same for Python control flow, which capture resolves only when it reads shapes or settings.
CAPTURE_HINT_BRANCH = (
    "if the branch reads only shapes, dtypes or settings, pass example_inputs= to trama.export_model: "
    'capture with torch.export resolves it (docs/torch.md, "Capture with example inputs")'
)


def _capture_would_help(exc: ExportError) -> bool:
    """Whether capturing with torch.export could avoid this error: not when a catalog leaf
    refused its module (capture exports leaves the same way)."""
    origin: BaseException = exc
    while isinstance(origin.__cause__, ExportError):
        origin = origin.__cause__
    return not isinstance(origin, leaves.LeafRefusal)


def _export_traced_path(module: nn.Module, ctx: ExportContext) -> NodeFragment:
    with export_state(module) as state:
        site = state.pending.pop(ctx.node_id, None) or site_from_ports(module, ctx)
        state.constants[ctx.node_id] = dict(site.constants)
        kind = module_kind(module)
        if kind == "leaf":
            op = leaves.leaf_op(module)
            assert op is not None
            state.results[ctx.node_id] = leaves.leaf_result_structure(op)
            return leaves.export_leaf(module, ctx, site.constants or None)
        if kind == "sequential":
            assert isinstance(module, nn.Sequential)
            return _export_sequential(module, ctx)
        if kind == "transformer_encoder":
            assert isinstance(module, nn.TransformerEncoder)
            return _export_transformer_encoder(module, ctx)
        return export_traced(module, ctx, site)


def _only_port(ctx: ExportContext, module: nn.Module, port: str) -> dict[str, Ref]:
    """The node's inputs as its op names them, from what the caller wired: a model exported
    with ``inputs=["tokens"]`` gets a ``Sequential`` whose port ``x`` reads ``tokens``."""
    if port in ctx.inputs:
        return {port: ctx.inputs[port]}
    if len(ctx.inputs) != 1:
        raise ExportError(
            f"{described(module, ctx.node_id)} takes one input {port!r}, but it is given {sorted(ctx.inputs)}",
            node_id=ctx.node_id,
        )
    return {port: next(iter(ctx.inputs.values()))}


def _export_sequential(sequential: nn.Sequential, ctx: ExportContext) -> NodeFragment:
    """The catalog's ``Sequential``: each child reads the previous one's ``y``."""
    inputs = _only_port(ctx, sequential, "x")
    current = Wire(Ref(INPUT, "x"))
    # Not named_children(): it skips a module met before, and nn.Sequential(l, act, l) runs l twice.
    entries: dict[str, nn.Module | None] = dict(sequential._modules)  # torch allows None entries
    for name, child in entries.items():
        if child is None:
            continue
        result = call_child(ctx, name, child, bind_module_call(child, f"{ctx.node_id}.{name}", (current,), {}))
        if not isinstance(result, Wire):
            raise ExportError(
                f"{described(child, f'{ctx.node_id}.{name}')} returns several values inside the Sequential "
                f"{ctx.node_id!r}, whose children must each return one tensor",
                node_id=ctx.node_id,
            )
        current = result
    current_state().results[ctx.node_id] = "y"
    return NodeFragment("Sequential", inputs=inputs, outputs=["y"], output_bindings={"y": current.ref})


_ENCODER_PORTS = {"src": "src", "mask": "src_mask", "src_key_padding_mask": "src_key_padding_mask"}


def _export_transformer_encoder(encoder: nn.TransformerEncoder, ctx: ExportContext) -> NodeFragment:
    """The catalog's ``TransformerEncoder``: layers ``layers_0``, … each reading the previous
    one's ``y`` and the encoder's masks, then ``norm`` when torch has one."""
    inputs = dict(ctx.inputs) if set(ctx.inputs) <= set(_ENCODER_PORTS) else _only_port(ctx, encoder, "src")
    if "src" not in inputs:
        raise ExportError(f"{described(encoder, ctx.node_id)} needs its input 'src'", node_id=ctx.node_id)
    current = Ref(INPUT, "src")
    masks = {_ENCODER_PORTS[port]: Ref(INPUT, port) for port in inputs if port != "src"}
    for index, layer in enumerate(encoder.layers):
        name = f"layers_{index}"
        ports = {"src": Wire(current), **{port: Wire(ref) for port, ref in masks.items()}}
        result = call_child(ctx, name, layer, CallSite(ports, {}))
        assert isinstance(result, Wire)
        current = result.ref
    if encoder.norm is not None:
        result = call_child(
            ctx, "norm", encoder.norm, bind_module_call(encoder.norm, f"{ctx.node_id}.norm", (Wire(current),), {})
        )
        if not isinstance(result, Wire):
            raise ExportError(
                f"the norm of {described(encoder, ctx.node_id)} returns several values", node_id=ctx.node_id
            )
        current = result.ref
    current_state().results[ctx.node_id] = "y"
    return NodeFragment(
        "TransformerEncoder",
        inputs=inputs,
        outputs=["y"],
        parameters={"enable_nested_tensor": bool(encoder.enable_nested_tensor), "mask_check": bool(encoder.mask_check)},
        output_bindings={"y": current},
    )
