"""A submodule call found in a traced ``forward`` (or a ``Sequential``'s chain), made a child node.

Three things decide how one call becomes a node, and they live together here because each
depends on the others:

* the module's *kind* (:func:`module_kind`): a catalog leaf, a catalog composite
  (``Sequential``, ``TransformerEncoder``), a module with its own ``to_node``, or one traced
  again;
* how the call's arguments *bind* to the node's input ports and to constants
  (:func:`bind_module_call`), which the kind decides (a leaf's ports are its op's, a traced
  module's are its ``forward``'s parameter names);
* what a *second* call of the same module is: the core turns it into a calling node, which is
  only right when it passes the same constants; otherwise the module is exported again as a
  node of its own (sharing its parameter entries).

Because ``ctx.child`` hands the module to the core, which hands it back to this package's
exporter through the plugin hook, what the call site knows (constants, how ports bind) travels
through the :class:`ExportState` of the current export, keyed by the child's node id, and what
the child's export found out (the shape of its result: one tensor, a tuple, a dict) comes back
the same way.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from torch import nn

from trama.conversion import ExportContext, NodeFragment
from trama.errors import ExportError
from trama.format import Ref
from trama_torch import leaves
from trama_torch.fragments import Fixed
from trama_torch.fx.trace import (
    EXPORT_HINT,
    ForwardBinding,
    binding_from_call,
    binding_from_ports,
    described,
    forward_signature,
)
from trama_torch.walk import evaluation_mode, submodules

__all__ = [
    "CallSite",
    "ExportState",
    "Fixed",
    "Kind",
    "NameTree",
    "ValueTree",
    "Wire",
    "bind_module_call",
    "call_child",
    "current_state",
    "export_running",
    "export_state",
    "is_wire",
    "module_kind",
    "names_to_wires",
    "sequential_is_chain",
    "site_from_ports",
    "tree_leaves",
]


@dataclass(frozen=True)
class Wire:
    """A value of the graph being exported: a reference valid in the current scope.

    A wrapper rather than the bare :class:`trama.Ref` because ``Ref`` is a named tuple, and
    argument structures (an LSTM's ``(h0, c0)``, a tuple result) are tuples too: a wire is
    never mistaken for a structure, by this package or by the op mappers it hands arguments to.
    """

    ref: Ref


#: The value of an expression: one wire, or a tuple / dict of them (a GRU's ``(y, h_n)``).
ValueTree: TypeAlias = "Wire | tuple[ValueTree, ...] | dict[str, ValueTree]"
#: The same shape with output names at the leaves: how a node's outputs form its result.
NameTree: TypeAlias = "str | tuple[NameTree, ...] | dict[str, NameTree]"

Kind = Literal["exportable", "leaf", "sequential", "transformer_encoder", "traced"]


def is_wire(value: object) -> bool:
    """Whether an argument is a graph value (what the op mappers call ``is_tensor``)."""
    return isinstance(value, Wire)


def tree_leaves(tree: Any) -> list[Any]:
    """The leaves of a tuple/dict tree, in order (a :class:`Wire` or a name is a leaf)."""
    if isinstance(tree, tuple):
        return [leaf for item in tree for leaf in tree_leaves(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in tree_leaves(item)]
    return [tree]


def names_to_wires(names: NameTree, refs: Mapping[str, Ref]) -> ValueTree:
    """A child's result as wires: its output-name tree with each name replaced by its ref."""
    if isinstance(names, tuple):
        return tuple(names_to_wires(item, refs) for item in names)
    if isinstance(names, dict):
        return {key: names_to_wires(item, refs) for key, item in names.items()}
    return Wire(refs[names])


# -- the state of one export ---------------------------------------------------------------


@dataclass(frozen=True)
class CallSite:
    """What a call site knows about the child it is about to export."""

    ports: dict[str, Wire]
    #: leaf call: the constants :func:`leaves.bind_leaf_call` found; traced: fx concrete_args
    constants: dict[str, Any]
    #: traced modules only: which forward parameter each port feeds
    binding: ForwardBinding | None = None


@dataclass
class ExportState:
    """What the call sites and the exports of one torch export tell each other (module doc)."""

    pending: dict[str, CallSite] = field(default_factory=dict)
    #: node id -> how its outputs form the module's result
    results: dict[str, NameTree] = field(default_factory=dict)
    #: node id -> the constants its module was exported with, for its later calls
    constants: dict[str, dict[str, Any]] = field(default_factory=dict)


_STATE: contextvars.ContextVar[ExportState | None] = contextvars.ContextVar("trama_torch_export", default=None)


@contextlib.contextmanager
def export_state(module: nn.Module) -> Iterator[ExportState]:
    """The state of the current torch export, opened by its outermost module.

    The outermost module is also switched to eval mode for the whole export and each module's
    own ``training`` flag is restored afterwards: the catalog means eval-mode computation
    (``Dropout`` is the identity, ``BatchNorm`` uses its running statistics), and a custom
    ``forward`` that branches on ``self.training`` must be traced on the eval branch.
    """
    state = _STATE.get()
    if state is not None:
        yield state
        return
    modes = [(each, each.training) for _, each in submodules(module)]  # no recursion: trees run deep
    evaluation_mode(module)
    token = _STATE.set(ExportState())
    try:
        state = _STATE.get()
        assert state is not None
        yield state
    finally:
        _STATE.reset(token)
        for each, training in modes:
            each.training = training


def export_running() -> bool:
    """Whether a torch export is running now (an outer module opened :func:`export_state`)."""
    return _STATE.get() is not None


def current_state() -> ExportState:
    """The state of the export running now (opened by :func:`export_state`)."""
    state = _STATE.get()
    if state is None:  # pragma: no cover - every entry point opens one
        raise RuntimeError("no torch export is running")
    return state


# -- kinds and bindings ---------------------------------------------------------------------


def module_kind(module: nn.Module) -> Kind:
    """How ``module`` is exported (see the module docstring). ``to_node`` wins: the core calls
    it before any exporter, so a library's own op is never traced through."""
    if callable(getattr(module, "to_node", None)):
        return "exportable"
    if leaves.leaf_op(module) is not None:
        return "leaf"
    if isinstance(module, nn.Sequential) and sequential_is_chain(module):
        return "sequential"
    if isinstance(module, nn.TransformerEncoder) and all(
        leaves.leaf_op(layer) == "TransformerEncoderLayer" for layer in module.layers
    ):
        return "transformer_encoder"
    return "traced"


def sequential_is_chain(sequential: nn.Sequential) -> bool:
    """Whether the catalog's ``Sequential`` (every child reads ``x`` and gives ``y``) can hold
    this one's children. A leaf whose op reads another port (``TransformerEncoderLayer`` reads
    ``src``) or gives several outputs (``GRU``) cannot: such a Sequential is traced instead,
    which torch's own ``forward`` allows."""
    marker = Wire(Ref("%input", "x"))
    for child in sequential.children():
        kind = module_kind(child)
        if kind == "leaf":
            op = leaves.leaf_op(child)
            assert op is not None
            try:
                ports, _ = leaves.bind_leaf_call(op, (marker,), {})
            except ExportError:
                return False
            if list(ports) != ["x"] or leaves.leaf_result_structure(op) != "y":
                return False
        elif kind == "transformer_encoder":
            return False
    return True


def bind_module_call(module: nn.Module, node_id: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> CallSite:
    """Bind a call ``module(*args, **kwargs)`` (values as :class:`Wire`) to the ports of the
    node ``node_id`` it becomes, by the module's kind."""
    kind = module_kind(module)
    where = described(module, node_id)
    if kind == "leaf":
        op = leaves.leaf_op(module)
        assert op is not None
        try:
            ports, constants = leaves.bind_leaf_call(op, tuple(args), dict(kwargs))
        except ExportError as exc:
            raise ExportError(f"the call of {where}: {exc.message}", node_id=node_id) from exc
        return CallSite(_wires(ports, where, node_id), dict(constants))
    if kind == "sequential":
        if len(args) != 1 or kwargs or not is_wire(args[0]):
            raise ExportError(f"{where} is a Sequential, called with other than one tensor", node_id=node_id)
        return CallSite({"x": args[0]}, {})
    signature = forward_signature(module, node_id)
    ports, constants = binding_from_call(signature, args, kwargs, is_value=is_wire, where=where, node_id=node_id)
    if kind == "transformer_encoder":
        constants.pop("is_causal", None)  # a hint about the mask, which the document holds itself
    if kind in ("exportable", "transformer_encoder"):
        given = {name: value for name, value in constants.items() if not _is_default(signature, name, value)}
        if given:
            raise ExportError(
                f"the call of {where} passes the constants {given}, which its node cannot record "
                "(its inputs are tensors only)",
                node_id=node_id,
            )
        return CallSite(ports, {})
    binding = ForwardBinding({name: name for name in ports}, constants)
    return CallSite(ports, constants, binding)


def site_from_ports(module: nn.Module, ctx: ExportContext) -> CallSite:
    """The call site of a module whose caller only named its ports (the model's inputs, a
    ``Sequential``'s ``x``, a foreign composite's ``ctx.child``): ports bind to ``forward`` by
    name, else by position, and every other argument keeps its default."""
    ports = {name: Wire(Ref("%input", name)) for name in ctx.inputs}
    if module_kind(module) != "traced":
        return CallSite(ports, {})
    where = described(module, ctx.node_id)
    binding = binding_from_ports(
        forward_signature(module, ctx.node_id), list(ctx.inputs), where=where, node_id=ctx.node_id
    )
    return CallSite(ports, dict(binding.constants), binding)


def _wires(ports: Mapping[str, Any], where: str, node_id: str) -> dict[str, Wire]:
    for port, value in ports.items():
        if not is_wire(value):
            raise ExportError(f"the call of {where} passes a non-tensor as its input {port!r}", node_id=node_id)
    return dict(ports)


def _is_default(signature: inspect.Signature, name: str, value: Any) -> bool:
    default = signature.parameters[name].default
    return default is value or same_constant(default, value)


def same_constant(a: Any, b: Any) -> bool:
    """Equality for call constants, which may be anything (a tensor's ``==`` is not a bool)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _same_constants(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.keys() == b.keys() and all(same_constant(a[key], b[key]) for key in a)


# -- exporting the child --------------------------------------------------------------------


def call_child(ctx: ExportContext, name: str, module: nn.Module, site: CallSite) -> ValueTree:
    """Export the call of ``module`` described by ``site`` as the child ``name`` of ``ctx``'s
    node, and return its result as wires in ``ctx``'s scope.

    A module exported before becomes a calling node when the call passes the same constants
    (the core checks that the ports match too); with different constants it is exported again
    under ``name``, a node of its own that shares the module's parameter entries."""
    state = current_state()
    child_id = f"{ctx.node_id}.{name}"
    inputs = {port: wire.ref for port, wire in site.ports.items()}
    earlier = ctx.exported(module)
    target: Any = module
    if earlier is not None and not _same_constants(state.constants.get(earlier, {}), site.constants):
        target = Fixed(lambda child_ctx: _export_again(module, child_ctx))
    state.pending[child_id] = site
    try:
        refs = ctx.child(name, target, inputs=inputs)
    finally:
        state.pending.pop(child_id, None)
    result = state.results.get(child_id)
    if result is None and earlier is not None and child_id not in state.constants:
        result = state.results.get(earlier)  # a calling node: its target's result
    if result is None:  # a module with its own to_node: its outputs in order
        names = list(refs)
        result = names[0] if len(names) == 1 else tuple(names)
    return names_to_wires(result, refs)


def _export_again(module: nn.Module, ctx: ExportContext) -> NodeFragment:
    from trama_torch.exporter import export_module  # the exporter imports this module

    fragment = export_module(module, ctx)
    if fragment is None:  # pragma: no cover - export_module always answers for modules
        raise ExportError(f"cannot export {described(module, ctx.node_id)}; {EXPORT_HINT}", node_id=ctx.node_id)
    return fragment
