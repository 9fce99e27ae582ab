"""A module without an op of its own, exported as a ``Graph`` node from its traced ``forward``.

The trace (:mod:`trama_torch.fx.trace`) gives one level of the module: placeholders, the calls of
its submodules, tensor functions, reads of its own parameters and buffers, and the returned
value. Each becomes part of the node:

* a placeholder is an input port, named as the caller wired it;
* a submodule call is a child node named after the module (``root.encoder.fc1``), exported by
  its own kind (:mod:`trama_torch.fx.submodule_calls`); items of a ``ModuleList`` / ``ModuleDict`` sit in
  a container node (:mod:`trama_torch.fx.containers`);
* a tensor function is a function-op child named after the fx node (``add``, ``getitem_1``),
  mapped by :func:`trama_torch.functions.export_function_call`;
* indexing the tuple a submodule returned (``out, h = self.gru(x)``) is no node at all: it
  selects one of that child's named outputs;
* ``self.scale`` read in ``forward`` is a ``constant`` child whose entry is keyed by the tensor
  itself, so it shares one table entry with every other use of that parameter;
* the returned value gives the outputs: one tensor the single output, a tuple one output per
  tensor (nested tuples flattened), a dict one output per key.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from trama.conversion import ExportContext, NodeFragment
from trama.errors import ExportError, TramaError
from trama.format import INPUT, Ref
from trama_torch import functions
from trama_torch.fragments import dormant_trie, export_dormant
from trama_torch.fx.containers import Scope, plan_scopes
from trama_torch.fx.submodule_calls import (
    CallSite,
    Fixed,
    NameTree,
    ValueTree,
    Wire,
    bind_module_call,
    call_child,
    current_state,
    is_wire,
    names_to_wires,
    tree_leaves,
)
from trama_torch.fx.trace import (
    ForwardBinding,
    Trace,
    described,
    forward_signature,
    live_nodes,
    trace_forward,
)
from trama_torch.tensors import export_tensor

__all__ = ["export_traced"]

_WORK = ("call_module", "call_function", "call_method")


def export_traced(module: nn.Module, ctx: ExportContext, site: CallSite) -> NodeFragment:
    """The ``Graph`` node of ``module``, whose ports are ``site``'s and whose forward parameters
    are bound as ``site.binding`` says (the rest traced with their constants)."""
    binding = site.binding
    assert binding is not None
    where = described(module, ctx.node_id)
    if module._forward_hooks or module._forward_pre_hooks:
        raise ExportError(
            f"cannot export {where}: it has forward hooks, which a document cannot record (remove them, or "
            "wrap the module)",
            node_id=ctx.node_id,
        )
    trace = trace_forward(module, ctx.node_id, binding.constants)
    live = live_nodes(trace.graph)
    seeds = _placeholders(trace, live, binding, where, ctx.node_id)
    work = [node for node in live if node.op in _WORK]
    plan = plan_scopes(work, _module_places(live))
    output = live[-1]
    emitter = _Emitter(ctx, trace, plan.names, where, seeds)
    emitter.emit(plan.root)
    emitter.place_dormant(())
    result = emitter.value(output.args[0])
    names_tree, bindings = _outputs(result, ctx.output_names, where, ctx.node_id)
    current_state().results[ctx.node_id] = names_tree
    return NodeFragment(
        "Graph",
        outputs=list(bindings),
        output_bindings=bindings,
        metadata={"class": f"{type(module).__module__}.{type(module).__qualname__}"},
    )


def _placeholders(
    trace: Trace, live: list[fx.Node], binding: ForwardBinding, where: str, node_id: str
) -> dict[fx.Node, ValueTree]:
    """Each live placeholder's value: the input port that feeds its parameter.

    fx makes one placeholder per ``forward`` parameter, in signature order, including those it
    specialised on a constant (which nothing live reads) and ``*args`` / ``**kwargs``."""
    parameters = list(forward_signature(trace.module, node_id).parameters)
    placeholders = [node for node in trace.graph.nodes if node.op == "placeholder"]
    port_of = {parameter: port for port, parameter in binding.ports.items()}
    alive = set(live)
    seeds: dict[fx.Node, ValueTree] = {}
    for parameter, node in zip(parameters, placeholders, strict=True):
        if node not in alive:
            continue
        if parameter not in port_of:
            raise ExportError(
                f"cannot export {where}: its forward reads the argument {parameter!r} as a tensor, but "
                f"no input feeds it (inputs: {list(binding.ports)})",
                node_id=node_id,
            )
        seeds[node] = Wire(Ref(INPUT, port_of[parameter]))
    return seeds


def _module_places(live: list[fx.Node]) -> dict[fx.Node, tuple[str, ...]]:
    """Each module call's place below the module: its container path and name, split.

    ``layers.0`` lives in container ``layers`` as ``0``. A path through a module that is called
    itself (``encoder`` and ``encoder.fc1`` both called) cannot have a container there, since
    ``encoder``'s node is the module's own: such a call is a child of this scope under its
    flattened name, ``encoder_fc1``."""
    called = {node.target for node in live if node.op == "call_module"}
    places: dict[fx.Node, tuple[str, ...]] = {}
    for node in live:
        if node.op == "call_module":
            parts = str(node.target).split(".")
            through_called = any(".".join(parts[:k]) in called for k in range(1, len(parts)))
            places[node] = ("_".join(parts),) if through_called else tuple(parts)
    return places


class _Emitter:
    """Exports the units of one scope as children of ``ctx``'s node, in plan order, and knows the
    value of every fx node in that scope."""

    def __init__(
        self,
        ctx: ExportContext,
        trace: Trace,
        module_names: Mapping[fx.Node, str],
        where: str,
        seeds: Mapping[fx.Node, ValueTree],
    ) -> None:
        self.ctx = ctx
        self.trace = trace
        self.module_names = module_names
        self.where = where
        self.values: dict[fx.Node, ValueTree] = dict(seeds)
        self.constants: dict[str, Wire] = {}
        self.taken: set[str] = set()
        #: module (or container) name -> the module path that holds it in this scope
        self.owners: dict[str, str] = {}
        self.used: set[str] = set()
        #: the module attributes ``forward`` reads (``layers.0.weight``), and the tensors already
        #: written as unused state: shared by the emitters of one traced module
        self.reads: set[str] = {str(node.target) for node in trace.graph.nodes if node.op == "get_attr"}
        self.placed: set[int] = set()

    # -- naming --------------------------------------------------------------------------

    def _reserve(self, plan: Scope) -> None:
        """Module and container names first: they are the module's attribute names, which the
        document keeps; function nodes and constants take fx names around them."""
        for unit in plan.units:
            if isinstance(unit, Scope):
                self.owners.setdefault(unit.name, ".".join(unit.path))
            elif unit.op == "call_module":
                self.owners.setdefault(self.module_names[unit], str(unit.target))
        self.taken.update(self.owners)

    def _fresh(self, name: str) -> str:
        candidate, n = name, 1
        while candidate in self.taken:
            candidate, n = f"{name}_{n}", n + 1
        self.taken.add(candidate)
        return candidate

    # -- values ----------------------------------------------------------------------------

    def value(self, arg: Any) -> Any:
        """An fx argument with every fx node replaced by its value here (wires)."""
        if isinstance(arg, fx.Node):
            if arg.op == "get_attr":
                return self._attribute(arg)
            return self.values[arg]
        if isinstance(arg, tuple):
            return tuple(self.value(item) for item in arg)
        if isinstance(arg, list):
            return [self.value(item) for item in arg]
        if isinstance(arg, dict):
            return {key: self.value(item) for key, item in arg.items()}
        if isinstance(arg, slice):
            return slice(self.value(arg.start), self.value(arg.stop), self.value(arg.step))
        return arg

    def _attribute(self, node: fx.Node) -> Wire:
        """A parameter or buffer read in ``forward``: a ``constant`` child in this scope."""
        target = str(node.target)
        if target not in self.constants:
            tensor = self.trace.attribute(target)
            if not isinstance(tensor, torch.Tensor):
                raise ExportError(
                    f"cannot export {self.where}: its forward uses the attribute {target!r} "
                    f"({type(tensor).__name__}) as a value; only tensors can be",
                    node_id=self.ctx.node_id,
                )
            self.constants[target] = self._constant(node.name, export_tensor(tensor))
        return self.constants[target]

    def _constant(self, name: str, value: Any) -> Wire:
        """A ``constant`` child holding ``value`` (a slot value or :class:`trama.Param`)."""
        fragment = NodeFragment("constant", outputs=["y"], parameters={"value": value})
        return Wire(self.ctx.child(self._fresh(name), Fixed(lambda _: fragment), {})["y"])

    # -- units -----------------------------------------------------------------------------

    def emit(self, plan: Scope) -> None:
        self._reserve(plan)
        for unit in plan.units:
            if isinstance(unit, Scope):
                self._container(unit)
            elif unit.op == "call_module":
                self._module_call(unit)
            else:
                self._function_call(unit)

    def place_dormant(self, path: tuple[str, ...]) -> None:
        """The state of the module at ``path`` (below the traced one; ``()``: itself) that no
        node holds: not read by ``forward``, and of no submodule an exported call wrote (a
        layer ``for layer in self.layers[1:]`` skips), as children of this scope
        (:func:`trama_torch.fragments.export_dormant`), so that the ``state_dict`` is whole."""
        traced = self.trace.module
        try:
            base = traced.get_submodule(".".join(path)) if path else traced
        except AttributeError:
            return  # a flattened container's place: its items are the scope's own

        def held(key: str, tensor: torch.Tensor) -> bool:
            full = (*path, *key.split("."))
            if ".".join(full) in self.reads or id(tensor) in self.placed:
                return True
            return any(
                self.ctx.exported(traced.get_submodule(".".join(full[:end]))) is not None
                for end in range(len(path) + 1, len(full))
            )

        trie = dormant_trie(base, held)
        self.placed.update(id(tensor) for tensor in _trie_tensors(trie))
        export_dormant(self.ctx, base, trie, self._fresh)

    def _module_call(self, node: fx.Node) -> None:
        module = self.trace.module.get_submodule(str(node.target))
        name = self.module_names[node]
        if name in self.used or self.owners.get(name) != node.target:
            name = self._fresh(name)  # a second call (a calling node), or a flattened name taken
        self.used.add(name)
        child_id = f"{self.ctx.node_id}.{name}"
        args, kwargs = self.value(node.args), self.value(node.kwargs)
        site = bind_module_call(module, child_id, args, kwargs)
        self.values[node] = call_child(self.ctx, name, module, site)

    def _function_call(self, node: fx.Node) -> None:
        args, kwargs = self.value(node.args), self.value(node.kwargs)
        if node.target is operator.getitem and len(args) == 2 and not is_wire(args[0]) and not kwargs:
            self.values[node] = _select(args[0], args[1], node, self.where, self.ctx.node_id)
            return
        try:
            call = functions.export_function_call(node.op, node.target, args, kwargs, is_tensor=is_wire)
        except TramaError as exc:
            raise ExportError(
                f"cannot export {self.where}: its forward calls {exc.message} (fx node {node.name!r})",
                node_id=self.ctx.node_id,
            ) from exc
        name = self._fresh(node.name)
        inputs = {port: self._port(value, f"{name}_{port}").ref for port, value in call.ports.items()}
        fragment = NodeFragment(call.op, parameters=dict(call.parameters))
        refs = self.ctx.child(name, Fixed(lambda _: fragment), inputs, list(call.outputs))
        self.values[node] = names_to_wires(call.result, refs)

    def _port(self, value: Any, name: str) -> Wire:
        """A function's port value as a wire: a constant the catalog takes only as a port (an
        element of ``torch.cat``'s list, an index list) is fed by a ``constant`` child."""
        if is_wire(value):
            assert isinstance(value, Wire)
            return value
        if isinstance(value, (tuple, dict)) and any(is_wire(leaf) for leaf in tree_leaves(value)):
            raise ExportError(
                f"cannot export {self.where}: a function's input {name!r} is a tuple of results, not one tensor",
                node_id=self.ctx.node_id,
            )
        return self._constant(name, export_tensor(value) if isinstance(value, torch.Tensor) else value)

    def _container(self, scope: Scope) -> None:
        """A container's node: its inputs are what its items read from here; inside, a new
        emitter exports the items; its outputs are what this scope reads back."""
        reads = scope.reads()
        ports: dict[str, Ref] = {}
        seeds: dict[fx.Node, ValueTree] = {}
        for node in reads:
            seeds[node] = _rewire(self.values[node], node.name, ports)
        exposed = scope.exposed()
        result: dict[str, Any] = {}

        def inside(ctx: ExportContext) -> NodeFragment:
            emitter = _Emitter(ctx, self.trace, self.module_names, self.where, seeds)
            emitter.reads, emitter.placed = self.reads, self.placed
            emitter.emit(scope)
            emitter.place_dormant(scope.path)
            bindings: dict[str, Ref] = {}
            for node in exposed:
                result[node.name] = _name_outputs(emitter.values[node], node.name, bindings)
            return NodeFragment(
                "Graph",
                output_bindings=bindings,
                outputs=list(bindings),
                metadata=_class_of(self.trace.module, scope.path),
            )

        refs = self.ctx.child(scope.name, Fixed(inside), ports)
        for node in exposed:
            self.values[node] = names_to_wires(result[node.name], refs)


def _class_of(module: nn.Module, path: tuple[str, ...]) -> dict[str, Any] | None:
    """The metadata naming the class of the container at ``path`` (``ModuleList``), as the
    capture writes it, so that the imported scope reads as the original; ``None`` for a
    flattened container's place."""
    try:
        cls = type(module.get_submodule(".".join(path)))
    except AttributeError:
        return None
    return {"class": f"{cls.__module__}.{cls.__qualname__}"}


def _trie_tensors(trie: Mapping[str, Any]) -> Iterator[torch.Tensor]:
    for item in trie.values():
        if isinstance(item, torch.Tensor):
            yield item
        else:
            yield from _trie_tensors(item)


def _select(value: Any, index: Any, node: fx.Node, where: str, node_id: str) -> ValueTree:
    """``result[index]`` on a submodule's tuple or dict result: one of its outputs, no node."""
    try:
        selected = value[index]
    except (IndexError, KeyError, TypeError) as exc:
        raise ExportError(
            f"cannot export {where}: {node.format_node()} indexes a result with {index!r}: {exc}", node_id=node_id
        ) from exc
    if not (is_wire(selected) or isinstance(selected, (tuple, dict))):
        raise ExportError(f"cannot export {where}: {node.format_node()} selects a non-tensor", node_id=node_id)
    result: ValueTree = selected
    return result


def _rewire(tree: ValueTree, name: str, ports: dict[str, Ref]) -> ValueTree:
    """Make each wire of ``tree`` an input port of a container (``ports`` gains them, each
    referring to the wire outside) and return the tree as seen inside (``%input`` refs)."""
    inside: ValueTree = _map_leaves(tree, name, lambda port, wire: Wire(Ref(INPUT, _claim(ports, port, wire))))
    return inside


def _name_outputs(tree: ValueTree, name: str, bindings: dict[str, Ref]) -> NameTree:
    """Bind each wire of ``tree`` to an output (``bindings`` gains them); the names' tree."""
    names: NameTree = _map_leaves(tree, name, lambda output, wire: _claim(bindings, output, wire))
    return names


def _claim(names: dict[str, Ref], name: str, wire: Wire) -> str:
    """Add ``name`` (or ``name_1``, … when taken: fx names are unique, but a tuple's ``gru_1``
    may meet a second call's ``gru_1``) for ``wire``, and return the name used."""
    candidate, n = name, 1
    while candidate in names:
        candidate, n = f"{name}_{n}", n + 1
    names[candidate] = wire.ref
    return candidate


def _map_leaves(tree: Any, name: str, leaf: Any) -> Any:
    """Apply ``leaf(name_for_it, wire)`` to every wire, naming nested ones ``name_0``, ``name_key``."""
    if isinstance(tree, tuple):
        return tuple(_map_leaves(item, f"{name}_{k}", leaf) for k, item in enumerate(tree))
    if isinstance(tree, dict):
        return {key: _map_leaves(item, f"{name}_{key}", leaf) for key, item in tree.items()}
    return leaf(name, tree)


def _outputs(result: Any, asked: list[str] | None, where: str, node_id: str) -> tuple[NameTree, dict[str, Ref]]:
    """The outputs of the traced module: names and bindings for the value ``forward`` returns.

    With names asked for (the model's outputs), the returned tensors take them in order; else
    one tensor is ``y``, a tuple gives ``y0``, ``y1``, … (nested: ``y1_0``) and a dict its keys."""
    result = _tupled(result)
    wires = list(_tree_wires(result, where, node_id))
    if asked is not None:
        if len(asked) != len(wires):
            raise ExportError(
                f"{where} returns {len(wires)} tensor(s), but the outputs {asked} were asked for", node_id=node_id
            )
        names = iter(asked)
        tree: NameTree = _map_leaves(result, "", lambda _, wire: next(names))
    elif isinstance(result, tuple):
        tree = tuple(_map_leaves(item, f"y{k}", lambda output, wire: output) for k, item in enumerate(result))
    elif isinstance(result, dict):
        tree = {key: _map_leaves(item, str(key), lambda output, wire: output) for key, item in result.items()}
    else:
        tree = "y"
    bindings: dict[str, Ref] = {}
    for output, wire in zip(_tree_names(tree), wires, strict=True):
        if output in bindings:
            raise ExportError(f"{where} returns two outputs named {output!r}", node_id=node_id)
        bindings[output] = wire.ref
    return tree, bindings


def _tupled(value: Any) -> Any:
    """A returned structure with its lists as tuples (``return [a, b]`` is two outputs too)."""
    if isinstance(value, (tuple, list)):
        return tuple(_tupled(item) for item in value)
    if isinstance(value, dict):
        return {key: _tupled(item) for key, item in value.items()}
    return value


def _tree_wires(tree: Any, where: str, node_id: str) -> Iterator[Wire]:
    if isinstance(tree, (tuple, list)):
        for item in tree:
            yield from _tree_wires(item, where, node_id)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _tree_wires(item, where, node_id)
    elif isinstance(tree, Wire):
        yield tree
    else:
        raise ExportError(
            f"{where} returns {tree!r} ({type(tree).__name__}), which is not a tensor computed from its inputs",
            node_id=node_id,
        )


def _tree_names(tree: Any) -> Iterator[str]:
    if isinstance(tree, tuple):
        for item in tree:
            yield from _tree_names(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _tree_names(item)
    else:
        yield tree
