"""Capturing a module's ``forward`` with torch.fx, one level deep, without touching the module.

The tracer treats *every* submodule call as a leaf (a ``call_module`` node), so a trace shows
exactly one module's own wiring: which submodules it calls, on what, and which tensor functions
it applies between them. Each called submodule is then exported on its own, which is what keeps
the document's tree the module tree (``root.encoder.fc1``) instead of one flat graph.

Two departures from ``torch.fx.Tracer``'s defaults, both to leave the user's model as it was:
tensor constants that belong to no module (``torch.tensor([1.0, 2.0])`` built in ``forward``) are
kept in :attr:`Trace.constants` instead of being set as new attributes on the module, and a
module called in ``forward`` that is not installed as a submodule (``self.body[:2]`` builds a
new ``Sequential`` on each call) is traced through, down to the installed modules it holds.

In-place changes are made explicit after tracing: fx records ``y.relu_()`` as a call whose
result nobody uses, so every later read of ``y`` is pointed at that call's result instead
(:func:`_redirect_mutations`), and ``y += x`` is recorded as the in-place ``operator.iadd`` rather
than fx's ``y = y + x``, which loses the change for other names of the same tensor.

Binding a call's arguments to ``forward``'s parameters also lives here: a traced value becomes an
input port, anything else a constant that the trace is specialised on (fx ``concrete_args``), so
``self.block(x, mask=None)`` traces ``block`` with ``mask`` fixed to ``None``, as torch ran it.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from trama.errors import ExportError, TramaError

__all__ = [
    "EXPORT_HINT",
    "ForwardBinding",
    "Trace",
    "binding_from_call",
    "binding_from_ports",
    "described",
    "forward_signature",
    "live_nodes",
    "trace_forward",
]

#: What the user can do about a module trama cannot capture, appended to export errors.
EXPORT_HINT = (
    "implement to_node on the module (trama.ExportableOp), or register an exporter for its class "
    "through the plugin hooks (trama_exporters)"
)


def described(module: object, node_id: str) -> str:
    """``'root.block' (mypkg.blocks.Block)``: how every export error names a module, so that the
    user finds both the place in their model and the class to fix."""
    cls = type(module)
    return f"{node_id!r} ({cls.__module__}.{cls.__qualname__})"


@dataclass
class Trace:
    """One module's ``forward`` as an fx graph, plus the tensor constants it created."""

    module: nn.Module
    graph: fx.Graph
    #: get_attr targets that are tensors built during ``forward`` rather than module attributes.
    constants: dict[str, torch.Tensor] = field(default_factory=dict)

    def attribute(self, target: str) -> Any:
        """The object a ``get_attr`` node reads: a constant of this trace, or a dotted attribute
        path below the module (``encoder.scale``)."""
        if target in self.constants:
            return self.constants[target]
        value: Any = self.module
        for part in target.split("."):
            value = getattr(value, part)
        return value


def _augmented(function: Callable[[Any, Any], Any]) -> Callable[[fx.Proxy, Any], Any]:
    def record(self: fx.Proxy, other: Any) -> Any:
        return self.tracer.create_proxy("call_function", function, (self, other), {})

    return record


class _Proxy(fx.Proxy):
    """fx's proxy, recording ``y += x`` as the in-place ``operator.iadd`` it is for a tensor.

    fx's own proxy has no in-place operators, so Python falls back to ``y = y + x``: right for
    ``y`` but not for another name of the same tensor (``z = y; z += 1`` changes ``y`` too)."""

    __iadd__ = _augmented(operator.iadd)
    __isub__ = _augmented(operator.isub)
    __imul__ = _augmented(operator.imul)
    __itruediv__ = _augmented(operator.itruediv)
    __ifloordiv__ = _augmented(operator.ifloordiv)
    __ipow__ = _augmented(operator.ipow)


#: Augmented assignments change a tensor in place (``y += 1`` is ``y.add_(1)``).
_IN_PLACE = frozenset(
    {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.ipow}
)


class _OneLevelTracer(fx.Tracer):
    """An fx tracer for which every installed submodule is a leaf (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.constants: dict[str, torch.Tensor] = {}

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return True

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _Proxy(node, self)

    def call_module(
        self, m: nn.Module, forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            self.path_of_module(m)
        except NameError:
            return forward(*args, **kwargs)  # not installed: its installed parts become the calls
        return super().call_module(m, forward, args, kwargs)

    def create_arg(self, a: Any) -> Any:
        if isinstance(a, torch.Tensor) and not isinstance(a, nn.Parameter) and self.tensor_attrs.get(a) is None:
            name = f"_tensor_constant{len(self.constants)}"
            self.constants[name] = a
            self.tensor_attrs[a] = name  # later uses find it; fx sets no attribute for known names
        return super().create_arg(a)


def trace_forward(module: nn.Module, node_id: str, concrete_args: Mapping[str, Any]) -> Trace:
    """Trace ``module.forward`` one level deep, with the arguments in ``concrete_args`` fixed.

    Anything that stops fx (Python control flow on a traced value, a call fx cannot record) is
    an :class:`~trama.ExportError` naming the module and what to do, with fx's own error chained
    as the cause rather than shown as a traceback from inside fx.
    """
    tracer = _OneLevelTracer()
    try:
        graph = tracer.trace(module, concrete_args=dict(concrete_args) or None)
    except TramaError:
        raise
    except fx.proxy.TraceError as exc:
        raise ExportError(
            f"cannot trace {described(module, node_id)}: its forward uses a traced tensor in Python "
            f"control flow or as a concrete value ({exc}); {EXPORT_HINT}",
            node_id=node_id,
        ) from exc
    except Exception as exc:
        raise ExportError(
            f"cannot trace {described(module, node_id)}: {type(exc).__name__}: {exc}; {EXPORT_HINT}",
            node_id=node_id,
        ) from exc
    _redirect_mutations(graph, module)
    return Trace(module, graph, tracer.constants)


def _mutates(node: fx.Node, module: nn.Module) -> bool:
    """Whether the call changes its first argument in place (``x.relu_()``, ``F.relu(x,
    inplace=True)``, ``x[0] = y``, ``nn.ReLU(inplace=True)``)."""
    if node.op == "call_method":
        name = str(node.target)
    elif node.op == "call_function":
        if node.kwargs.get("inplace") is True or node.target is operator.setitem or node.target in _IN_PLACE:
            return True
        name = getattr(node.target, "__name__", "")
    elif node.op == "call_module":
        return getattr(module.get_submodule(str(node.target)), "inplace", False) is True
    else:
        return False
    return name.endswith("_") and not name.startswith("_")


def _redirect_mutations(graph: fx.Graph, module: nn.Module) -> None:
    """Make in-place calls explicit: what reads the changed value after the call reads the
    call's result instead. fx records ``y.relu_()`` as a call nobody uses, while torch's later
    reads of ``y`` see the change; redirected, the graph computes what torch computed, and the
    call (mapped to its out-of-place op) is live exactly when its change is used."""
    order = {node: position for position, node in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if not node.args or not isinstance(node.args[0], fx.Node) or not _mutates(node, module):
            continue
        changed = node.args[0]
        for user in list(changed.users):
            if user is not node and order[user] > order[node]:
                user.replace_input_with(changed, node)


def live_nodes(graph: fx.Graph) -> list[fx.Node]:
    """The nodes the output depends on, in graph order (placeholders and the output included).

    fx keeps calls nobody uses: the assertions it adds for specialised arguments, ``x.size()``
    computed and dropped. They contribute nothing to the result, so export skips them rather
    than fail on an op the catalog lacks.
    """
    output = next(node for node in reversed(graph.nodes) if node.op == "output")
    live = {output}
    stack = [output]
    while stack:
        for used in stack.pop().all_input_nodes:
            if used not in live:
                live.add(used)
                stack.append(used)
    return [node for node in graph.nodes if node in live]


def forward_signature(module: nn.Module, node_id: str) -> inspect.Signature:
    """The signature of ``module.forward`` (without ``self``)."""
    try:
        return inspect.signature(module.forward)
    except (TypeError, ValueError) as exc:
        raise ExportError(
            f"cannot read the signature of forward of {described(module, node_id)}: {exc}; {EXPORT_HINT}",
            node_id=node_id,
        ) from exc


_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True)
class ForwardBinding:
    """How one call reaches ``forward``: which parameter each input port feeds, and the fixed
    values of the others (fx ``concrete_args``: given constants, or defaults)."""

    #: port name -> forward parameter name, in port order
    ports: dict[str, str]
    #: forward parameter name -> the constant it is traced with
    constants: dict[str, Any]


def binding_from_call(
    signature: inspect.Signature,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    is_value: Callable[[Any], bool],
    where: str,
    node_id: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Bind a call's arguments to ``forward``: ``(ports, constants)``.

    ``ports`` maps each parameter that receives a traced value (``is_value``) to that value,
    named after the parameter, in call order; ``constants`` maps every other parameter to the
    constant it receives, defaults included. A traced value inside a tuple, list or dict cannot
    become one port, and a value landing in ``*args`` or ``**kwargs`` has no name to become one.
    """
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise ExportError(f"the call of {where} does not match its forward: {exc}", node_id=node_id) from exc
    ports: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if parameter.kind in _VARIADIC:
            if name in bound.arguments:
                raise ExportError(
                    f"the call of {where} passes values through *{name}/**{name}, which have no names to "
                    f"become input ports; give forward named arguments, or {EXPORT_HINT}",
                    node_id=node_id,
                )
            continue
        if name not in bound.arguments:
            constants[name] = parameter.default
            continue
        value = bound.arguments[name]
        if is_value(value):
            ports[name] = value
        elif _holds_value(value, is_value):
            raise ExportError(
                f"the call of {where} passes {type(value).__name__} holding traced tensors as {name!r}; "
                f"an input port holds one tensor: pass them as separate arguments, or {EXPORT_HINT}",
                node_id=node_id,
            )
        else:
            constants[name] = value
    return ports, constants


def _holds_value(value: Any, is_value: Callable[[Any], bool]) -> bool:
    if isinstance(value, (tuple, list)):
        return any(is_value(item) or _holds_value(item, is_value) for item in value)
    if isinstance(value, dict):
        return any(is_value(item) or _holds_value(item, is_value) for item in value.values())
    return False


def binding_from_ports(
    signature: inspect.Signature, ports: Sequence[str], *, where: str, node_id: str
) -> ForwardBinding:
    """Bind input ports that a caller named (the model's inputs, a ``Sequential``'s ``x``) to
    ``forward``'s parameters: by name when every port names a parameter, else by position, so
    that ``inputs=["tokens"]`` feeds ``forward(self, x)``. The ports keep the caller's names;
    every other parameter keeps its default, and one without a default is an error."""
    parameters = [p for p in signature.parameters.values() if p.kind not in _VARIADIC]
    names = {p.name for p in parameters}
    if all(port in names for port in ports):
        chosen = {port: port for port in ports}
    else:
        positional = [p.name for p in parameters if p.kind in _POSITIONAL]
        if len(ports) > len(positional):
            raise ExportError(
                f"{where} gets {len(ports)} inputs {list(ports)}, but its forward takes "
                f"{len(positional)} positional arguments {positional}",
                node_id=node_id,
            )
        chosen = dict(zip(ports, positional, strict=False))
    fed = set(chosen.values())
    constants: dict[str, Any] = {}
    for parameter in parameters:
        if parameter.name in fed:
            continue
        if parameter.default is inspect.Parameter.empty:
            raise ExportError(
                f"forward of {where} needs the argument {parameter.name!r}, but only the inputs "
                f"{list(ports)} are given",
                node_id=node_id,
            )
        constants[parameter.name] = parameter.default
    return ForwardBinding(chosen, constants)
