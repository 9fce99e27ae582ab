"""The document of a captured program: one node per module call, the tree the user wrote.

:mod:`trama_torch.capture.tree` says which module call made each graph node, and what each call
took and gave. This module writes the nodes:

* a catalog leaf call (``nn.Linear``, ``nn.LayerNorm``, ``nn.MultiheadAttention``…) is its op with
  its constructor settings (:func:`trama_torch.leaves.export_leaf`); its whole inside collapses,
  its ports are its ``forward`` arguments and its outputs what it returned;
* an ``nn.TransformerEncoder`` of ``TransformerEncoderLayer``\\ s running torch's ``forward`` is
  the catalog's ``TransformerEncoder`` composite of its layers' leaves (:func:`encoder_fragment`);
* any other call is a ``Graph`` named after the module's attribute, whose children are its
  submodule calls and the catalog function ops of the aten ops it runs itself
  (:mod:`trama_torch.capture.aten`); its ports are named after ``forward``'s parameters and its
  outputs after the returned structure (``y``; ``y0``, ``y1``; a dict's keys); an
  ``nn.Sequential`` whose children chain ``x`` to ``y`` is the catalog's ``Sequential``;
* items of a ``ModuleList``/``ModuleDict`` sit in a container node (:mod:`trama_torch.capture.plan`);
  where the items of two containers interleave, they are the scope's own children, each keeping
  its torch path (``attentions_0`` with ``{"torch_name": "attentions.0"}``);
* a module registered under several names (T5's ``shared``, also ``encoder.embed_tokens``) is a
  node where it is called, and the scope that holds both names says the others
  (``{"torch_aliases": {"shared": "encoder.embed_tokens"}}``), so the import registers it again;
* a module called again is a calling node when its second call computes what the first did
  (same graph, same settings), else a node of its own sharing the parameter entries;
* parameters and buffers are read from the module objects, never from the program's copies, and
  keyed by the tensor, so tied weights are one entry and ``state_dict`` keys survive; a state
  tensor that ``forward`` never reads (a sliced-off layer) is still written, as a ``constant``
  child of the module that holds it (inside ``Graph`` nodes named after the modules on the way).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import hashlib
import inspect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx as fx
from torch import nn
from torch.export.graph_signature import InputKind
from torch.utils import _pytree as pytree

from trama import INPUT, ExportContext, ExportError, NodeFragment, Ref, SymbolRange, ValueFact
from trama_torch import leaves
from trama_torch.capture import aten, decompose
from trama_torch.capture.plan import Group, Unit, plan_units
from trama_torch.capture.program import Captured, source_line
from trama_torch.capture.sharing import unshare_aliases
from trama_torch.capture.sizes import naming
from trama_torch.capture.tree import (
    Call,
    CallTree,
    Symbolic,
    TensorArg,
    WrappedRegionError,
    inline_wrapped,
    plain_encoder,
    tensor_leaves,
)
from trama_torch.capture.values import ConstTensor, Several, StateTensor, Sym, Wire
from trama_torch.fragments import Fixed, export_dormant
from trama_torch.names import TORCH_NAME, Names, is_segment, local_name
from trama_torch.tensors import export_tensor
from trama_torch.walk import submodules
from trama_torch.wiring import TORCH_ALIASES

__all__ = ["Capture"]

_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"})

#: Node metadata key for a buffer that is not part of its module's ``state_dict``.
TORCH_PERSISTENT = "torch_persistent"


@dataclass
class Interface:
    """What a module call takes and gives, as ports and outputs of its node."""

    #: tensor values it takes, by port name (a node may feed several ports)
    ports: list[tuple[str, fx.Node]]
    #: symbolic sizes it reads from outside (passed by value, never ports)
    by_value: list[fx.Node]
    #: values it gives, by output name
    outputs: list[tuple[str, fx.Node]]
    #: leaf calls: the call-site constants its op records (``need_weights``)
    constants: dict[str, Any] = field(default_factory=dict)
    sequential: bool = False


@dataclass
class _First:
    """The node a module was first exported as, to call again."""

    node_id: str
    fingerprint: Any
    ports: list[str]
    outputs: list[str]


@dataclass
class _ScopePlan:
    units: list[Unit]
    root: Group
    names: dict[Unit, str]
    #: (reader, node) -> the unit whose value of node it reads (None: from outside the scope)
    source: dict[tuple[Unit, fx.Node], Unit | None]
    #: node -> its definitions in the scope, by position
    defs: dict[fx.Node, list[tuple[float, Unit]]]
    reads: dict[Unit, list[fx.Node]]
    #: each call's path below the scope's module as torch names it, split (``("attentions", "0")``),
    #: whatever its place became; ``()`` where the module is not below it
    origins: dict[Unit, tuple[str, ...]] = field(default_factory=dict)

    def latest(self, node: fx.Node, position: float = float("inf")) -> Unit | None:
        found = self.defs.get(node)
        if not found:
            return None
        index = bisect.bisect_left([place for place, _ in found], position)
        return found[index - 1][1] if index > 0 else None


@dataclass
class _Held:
    """Where the document holds the model's modules, by their torch paths (``encoder.layers.0``).

    A module torch registers under several names is a node where it is called; each scope then
    says which of its other names no node holds (:meth:`Capture.aliases`)."""

    #: each scope call's path in the model as the document holds it (``None``: not known)
    scopes: dict[Call, str | None] = field(default_factory=dict)
    #: the paths of the modules that a node holds (a call's node, a container's)
    paths: set[str] = field(default_factory=set)
    #: the paths some scope's ``torch_aliases`` gives
    aliased: set[str] = field(default_factory=set)
    #: the paths of modules whose whole state a node writes (a leaf's), or whose place is not known
    whole: set[str] = field(default_factory=set)
    #: the ``state_dict`` keys of the tensors a scope reads, each written as a ``constant`` there
    keys: set[str] = field(default_factory=set)

    def scope(self, call: Call) -> str | None:
        """The torch path at which the document holds ``call``'s module (``""``: the model)."""
        return self.scopes.get(call) if call.parent is not None else ""

    def writes(self, key: str) -> bool:
        """Whether a node writes the model's ``state_dict`` key ``key`` (as far as is known: a key
        below a module whose place is not known counts as written)."""
        if key in self.keys:
            return True
        parts = key.split(".")
        return any(
            ".".join(parts[:end]) in self.whole or ".".join(parts[:end]) in self.aliased for end in range(1, len(parts))
        )


def _join(prefix: str, path: str) -> str:
    return f"{prefix}.{path}" if prefix and path else prefix or path


def _runs(place: tuple[str, ...], origin: tuple[str, ...]) -> list[tuple[str, ...]] | None:
    """The parts of ``origin`` (a torch path, split) each part of ``place`` was joined from with
    ``_`` (``("attentions_0",)`` from ``("attentions", "0")``), in order, or ``None`` where
    ``place`` is not ``origin``'s start so joined. Each run is the only one: a longer one joins
    to a longer string."""
    runs: list[tuple[str, ...]] = []
    start = 0
    for part in place:
        end = start + 1
        while end <= len(origin) and "_".join(origin[start:end]) != part:
            end += 1
        if end > len(origin):
            return None
        runs.append(origin[start:end])
        start = end
    return runs


def _walk(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """The leaves of an argument or result structure with their paths (keys and indices)."""
    if isinstance(value, (TensorArg, Symbolic)) or value is None or isinstance(value, (bool, int, float, str)):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, (*path, str(key)))
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from _walk(item, (*path, index))
    else:
        leaves_ = pytree.tree_leaves(value, is_leaf=lambda leaf: isinstance(leaf, (TensorArg, Symbolic)))
        if len(leaves_) == 1 and leaves_[0] is value:
            yield path, value
        else:
            for index, item in enumerate(leaves_):
                yield (*path, index), item


def _holds_dict(value: Any) -> bool:
    """Whether a user input is or holds (in its tuples and lists) a dict."""
    if isinstance(value, Mapping):
        return True
    return isinstance(value, (tuple, list)) and any(_holds_dict(item) for item in value)


def _structure(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """The leaves of a user input's dicts, tuples and lists with their paths (keys, indices), in
    the dict's and the sequence's order: the same paths for the captured input and its example."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _structure(item, (*path, key))
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from _structure(item, (*path, index))
    else:
        yield path, value


def _result_name(path: tuple[Any, ...]) -> str:
    if not path:
        return "y"
    parts = [f"y{part}" if index == 0 and isinstance(part, int) else str(part) for index, part in enumerate(path)]
    return "_".join(parts)


#: The ops torch.export adds to check a value (a cast's metadata, a size's range): they
#: compute nothing, so a check that lands outside a module does not make the value an output.
_CHECKS = frozenset(
    {
        torch.ops.aten._assert_tensor_metadata.default,
        torch.ops.aten._assert_scalar.default,
        torch.ops.aten.sym_constrain_range_for_size.default,
        torch.ops.aten.sym_constrain_range.default,
    }
)


def _finite(bound: Any) -> int | None:
    """A range bound as a number, ``None`` for torch's infinities."""
    try:
        return int(bound) if bool(bound.is_integer) and bool(bound.is_finite) else None
    except (TypeError, ValueError, AttributeError):
        return None


def _is_check(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target in _CHECKS and not node.users


def _is_symbolic(node: fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)) and not isinstance(
        value, torch.Tensor
    )


class Capture:
    """One capture's document: the root's fragment, and every node below it."""

    def __init__(
        self, model: nn.Module, captured: Captured, where: str, dynamic: Mapping[str, Mapping[int, str]] | None
    ) -> None:
        self.model = model
        self.dynamic = {name: dict(axes) for name, axes in (dynamic or {}).items()}
        self.captured = captured
        self.where = where
        self.program = captured.program
        try:
            copies = inline_wrapped(self.program.graph_module)
        except WrappedRegionError as exc:
            raise ExportError(
                f"cannot export {where}: its forward switches {exc} on, which casts dtypes, and a dtype cast has "
                "no catalog op for it yet"
            ) from None
        self.tree = CallTree.build(captured.recorder, self.program.graph, copies)
        unshare_aliases(self.tree)
        self.interfaces: dict[Call, Interface] = {}
        self.plans: dict[Call, _ScopePlan] = {}
        self.first: dict[int, _First] = {}
        #: absolute module path -> (ctx, names) of the node holding that module's children
        self.scopes: dict[str, tuple[ExportContext, Names, nn.Module]] = {}
        self.covered: set[int] = set()
        #: buffers that are not in their module's state_dict (non-persistent), by tensor id
        self.transient: set[int] = set()
        self.placeholders: dict[fx.Node, Any] = {}
        #: the example tensor of each model input a dict input was flattened into
        self.flat_examples: dict[str, Any] = {}
        self._names_by_tensor: dict[int, list[str]] | None = None
        #: the program's constants by value (:meth:`same_value`)
        self.constant_values: dict[tuple[str, tuple[int, ...], bytes], np.ndarray] = {}
        self._classify_placeholders()

    # -- placeholders ---------------------------------------------------------------------

    def _classify_placeholders(self) -> None:
        by_name = {node.name: node for node in self.program.graph.nodes if node.op == "placeholder"}
        for spec in self.program.graph_signature.input_specs:
            node = by_name.get(getattr(spec.arg, "name", ""))
            if node is None or spec.target is None:
                continue
            if spec.kind == InputKind.PARAMETER:
                self.placeholders[node] = ("state", spec.target, self.model.get_parameter(spec.target))
            elif spec.kind == InputKind.BUFFER:
                buffer = self.model.get_buffer(spec.target)
                self.placeholders[node] = ("state", spec.target, buffer)
                if spec.persistent is False:
                    self.transient.add(id(buffer))
            elif spec.kind == InputKind.CONSTANT_TENSOR:
                value = self.program.constants[spec.target]
                if isinstance(value, torch.Tensor):
                    self.placeholders[node] = ("const", spec.target, value)

    def placeholder_value(self, node: fx.Node, call: Call) -> Any:
        """A state or constant placeholder as seen from ``call``'s scope."""
        found = self.placeholders.get(node)
        if found is None:
            raise self.error(call, f"reads {node.name!r}, a value that is neither an input nor a tensor of the model")
        kind, target, tensor = found
        if kind == "const":
            return ConstTensor(tensor, target)
        prefix = f"{call.path}." if call.path else ""
        if not target.startswith(prefix):  # a tied tensor: torch names it once, maybe elsewhere
            target = next((name for name in self._state_names(tensor) if name.startswith(prefix)), target)
        if target.startswith(prefix):
            return StateTensor(tensor, target[len(prefix) :], below=True)
        return StateTensor(tensor, target, below=False)

    def _state_names(self, tensor: torch.Tensor) -> list[str]:
        """Every name of a parameter or buffer in the model, tied ones included."""
        if self._names_by_tensor is None:
            found: dict[int, list[str]] = {}
            for name, parameter in self.model.named_parameters(remove_duplicate=False):
                found.setdefault(id(parameter), []).append(name)
            for name, buffer in self.model.named_buffers(remove_duplicate=False):
                found.setdefault(id(buffer), []).append(name)
            self._names_by_tensor = found
        return self._names_by_tensor.get(id(tensor), [])

    def same_value(self, array: np.ndarray) -> np.ndarray:
        """The first constant of the capture equal to ``array`` (same dtype, shape and bytes):
        the key under which a program's constants share one table entry. An attention mask or a
        position index that every layer folds to the same tensor is stored once."""
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).digest()
        return self.constant_values.setdefault((array.dtype.str, array.shape, digest), array)

    # -- errors ---------------------------------------------------------------------------

    def error(self, call: Call, message: str, node_id: str | None = None) -> ExportError:
        return ExportError(f"cannot export {call.described()}: {message}", node_id=node_id)

    # -- interfaces -------------------------------------------------------------------------

    def inside(self, call: Call) -> list[fx.Node]:
        nodes = [node for each in call.walk() for node in each.nodes]
        nodes.sort(key=lambda node: self.tree.order[node])
        return nodes

    def _boundary(self, call: Call) -> tuple[list[fx.Node], list[fx.Node]]:
        """The nodes ``call`` reads from outside, and those of its own read outside, in order."""
        inside = self.inside(call)
        members = set(inside)
        entering: dict[fx.Node, None] = {}
        escaping: dict[fx.Node, None] = {}
        for node in inside:
            for used in node.all_input_nodes:
                if used not in members:
                    entering[used] = None
            readers = (user for user in node.users if user not in members and not _is_check(user))
            if any(readers) and not _is_symbolic(node):
                escaping[node] = None  # sizes are no outputs: every scope reads them by value
        order = self.tree.order
        return sorted(entering, key=lambda n: order.get(n, -1.0)), sorted(escaping, key=lambda n: order[n])

    def interface(self, call: Call) -> Interface:
        found = self.interfaces.get(call)
        if found is None:
            found = self._interface(call)
            self.interfaces[call] = found
        return found

    def _interface(self, call: Call) -> Interface:
        entering, escaping = self._boundary(call)
        by_value = [node for node in entering if node.op != "placeholder" and _is_symbolic(node)]
        wires = [node for node in entering if node not in self.placeholders and node not in by_value]
        if call.opaque == "leaf":
            return self._leaf_interface(call, wires, by_value, escaping)
        if call.opaque == "encoder":
            return self._encoder_interface(call, wires, escaping)
        ports = self._forward_ports(call)
        taken = Names({name for name, _ in ports})
        bound = {node for _, node in ports}
        ports += [(taken.fresh(local_name(node.name)), node) for node in wires if node not in bound]
        names = Names()
        outputs: list[tuple[str, fx.Node]] = []
        for path, leaf in _walk(call.result):
            if isinstance(leaf, TensorArg):
                outputs.append((names.fresh(_result_name(path)), leaf.node))
        given = {node for _, node in outputs}
        outputs += [(names.fresh(local_name(node.name)), node) for node in escaping if node not in given]
        interface = Interface(ports, by_value, outputs)
        if call.opaque is None and self._is_chain(call, interface):
            interface.ports = [("x", ports[0][1])]
            interface.outputs = [("y", outputs[0][1])]
            interface.sequential = True
        return interface

    def _forward_ports(self, call: Call) -> list[tuple[str, fx.Node]]:
        """Ports named after ``forward``'s parameters (``x``; ``hx_0`` for a tuple's first item;
        each key of ``**kwargs``)."""
        try:
            signature = inspect.signature(call.module.forward)
            bound: dict[str, Any] = dict(signature.bind(*call.args, **call.kwargs).arguments)
            kinds = {name: parameter.kind for name, parameter in signature.parameters.items()}
        except (TypeError, ValueError):
            bound = {f"arg{index}": value for index, value in enumerate(call.args)} | dict(call.kwargs)
            kinds = {}
        names = Names()
        ports: list[tuple[str, fx.Node]] = []
        for parameter, value in bound.items():
            kind = kinds.get(parameter)
            if kind is inspect.Parameter.VAR_KEYWORD and isinstance(value, Mapping):
                items = [(str(key), item) for key, item in value.items()]
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                items = [(f"{parameter}_{index}", item) for index, item in enumerate(value)]
            else:
                items = [(parameter, value)]
            for base, item in items:
                for path, leaf in _walk(item):
                    if isinstance(leaf, TensorArg):
                        suffix = "".join(f"_{part}" for part in path)
                        ports.append((names.fresh(f"{base}{suffix}"), leaf.node))
        return ports

    def _leaf_interface(
        self, call: Call, wires: list[fx.Node], by_value: list[fx.Node], escaping: list[fx.Node]
    ) -> Interface:
        op = leaves.leaf_op(call.module)
        assert op is not None

        def port_value(leaf: Any) -> Any:
            if isinstance(leaf, Symbolic):
                raise self.error(call, "is called with a symbolic size as an argument, which its op cannot take")
            return _PortArg(leaf.node) if isinstance(leaf, TensorArg) else leaf

        args, kwargs = pytree.tree_map(
            port_value, (call.args, call.kwargs), is_leaf=lambda leaf: isinstance(leaf, (TensorArg, Symbolic))
        )
        try:
            bound, constants = leaves.bind_leaf_call(op, tuple(args), dict(kwargs))
        except ExportError as exc:
            raise self.error(call, exc.message) from exc
        ports: list[tuple[str, fx.Node]] = []
        for port, value in bound.items():
            if not isinstance(value, _PortArg):
                raise self.error(call, f"is given {value!r} as its input {port!r}, which is not a tensor")
            ports.append((port, value.node))
        outputs: list[tuple[str, fx.Node]] = []
        self._match(leaves.leaf_result_structure(op), call.result, outputs, call)
        stray = [node.name for node in wires if node not in {node for _, node in ports}]
        given = {node for _, node in outputs}
        leaked = [node.name for node in escaping if node not in given]
        if stray or leaked:
            raise self.error(
                call,
                f"its computation reads {stray} or leaves {leaked} outside its arguments and result, which its "
                f"op {op} cannot record",
            )
        return Interface(ports, by_value, outputs, constants=dict(constants))

    def _encoder_interface(self, call: Call, wires: list[fx.Node], escaping: list[fx.Node]) -> Interface:
        """An ``nn.TransformerEncoder`` as the catalog's composite: ports ``src``, ``mask`` and
        ``src_key_padding_mask`` as ``forward`` names them (``is_causal`` is a hint about the mask,
        which the node holds itself), output ``y``."""
        ports = self._forward_ports(call)
        names = [name for name, _ in ports]
        if "src" not in names or not set(names) <= set(_ENCODER_LAYER_PORTS):
            raise self.error(
                call, f"is called with the tensors {names}, where TransformerEncoder takes {_ENCODER_PORTS}"
            )
        if not isinstance(call.result, TensorArg):
            raise self.error(call, f"returned {type(call.result).__name__}, where TransformerEncoder gives one tensor")
        result = call.result.node
        stray = [node.name for node in wires if node not in {node for _, node in ports}]
        leaked = [node.name for node in escaping if node is not result]
        if stray or leaked:
            raise self.error(
                call,
                f"its computation reads {stray} or leaves {leaked} outside its arguments and result, which the "
                "catalog's TransformerEncoder cannot record",
            )
        return Interface(ports, [], [("y", result)])

    def _match(self, structure: Any, value: Any, outputs: list[tuple[str, fx.Node]], call: Call) -> None:
        if isinstance(structure, str):
            if isinstance(value, TensorArg):
                outputs.append((structure, value.node))
            elif value is not None:
                raise self.error(call, f"returned {value!r} as its output {structure!r}, which is not a tensor")
            return
        if not isinstance(value, (tuple, list)) or len(value) != len(structure):
            raise self.error(call, f"returned {type(value).__name__}, not the structure {structure} of its op")
        for part, item in zip(structure, value, strict=True):
            self._match(part, item, outputs, call)

    def _is_chain(self, call: Call, interface: Interface) -> bool:
        """Whether ``call`` is an ``nn.Sequential`` whose children chain ``x`` to ``y``: the
        catalog's ``Sequential``, which imports as an ``nn.Sequential`` again."""
        module = call.module
        if not isinstance(module, nn.Sequential) or type(module).forward is not nn.Sequential.forward:
            return False
        items = [item for item in module._modules.values() if item is not None]
        children = call.children
        if not children or call.nodes or len(children) != len(items):
            return False
        if any(child.module is not item for child, item in zip(children, items, strict=True)):
            return False
        if len(interface.ports) != 1 or len(interface.outputs) != 1 or interface.by_value:
            return False
        current = interface.ports[0][1]
        for child in children:
            inner = self.interface(child)
            if [name for name, _ in inner.ports] != ["x"] or [name for name, _ in inner.outputs] != ["y"]:
                return False
            if inner.ports[0][1] is not current or child.opaque == "exportable":
                return False
            current = inner.outputs[0][1]
        return interface.outputs[0][1] is current

    # -- planning -----------------------------------------------------------------------------

    def plan(self, call: Call) -> _ScopePlan:
        found = self.plans.get(call)
        if found is None:
            found = self._plan(call)
            self.plans[call] = found
        return found

    def _places(self, call: Call) -> dict[Call, tuple[tuple[str, ...], tuple[str, ...]]]:
        """Each child call's place below ``call``'s module (its container path and name) and its
        path there as torch names it, split: the same, except where the place had to be one name
        (a module below another that is called itself, ``block.0`` beside ``block``, is
        ``block_0``, its origin ``("block", "0")``), and ``()`` for a module not below it."""
        relative: dict[int, str] = {}
        for name, module in call.module.named_modules(remove_duplicate=False):
            if name:
                relative.setdefault(id(module), name)
        places: dict[Call, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        for child in call.children:
            path = relative.get(id(child.module))
            if path is None:
                name = child.path.replace(".", "_") if child.path else type(child.module).__name__
                places[child] = ((name,), ())
            else:
                places[child] = (tuple(path.split(".")), tuple(path.split(".")))
        called = {".".join(place) for place, _ in places.values()}
        for child, (place, origin) in places.items():
            if any(".".join(place[:k]) in called for k in range(1, len(place))):
                places[child] = (("_".join(place),), origin)
        return places

    def _plan(self, call: Call) -> _ScopePlan:
        order = self.tree.order
        units: list[Unit] = []
        reads: dict[Unit, list[fx.Node]] = {}
        defines: dict[Unit, list[fx.Node]] = {}
        for node in call.nodes:
            if _is_check(node):  # computes nothing; its operand may be no value of this scope
                continue
            unit = Unit(node, order[node])
            units.append(unit)
            reads[unit] = list(node.all_input_nodes)
            defines[unit] = [node]
        origins: dict[Unit, tuple[str, ...]] = {}
        chain = self.interface(call).sequential
        for child, (place, origin) in self._places(call).items():
            if not chain and _passes_through(child, place):
                continue  # readers of its result read its argument: the same tensor
            interface = self.interface(child)
            unit = Unit(child, child.position, place)
            origins[unit] = origin
            units.append(unit)
            reads[unit] = [node for _, node in interface.ports] + list(interface.by_value)
            defines[unit] = [node for _, node in interface.outputs]
        units.sort(key=lambda unit: unit.position)
        defs: dict[fx.Node, list[tuple[float, Unit]]] = {}
        for unit in units:
            for node in defines[unit]:
                defs.setdefault(node, []).append((unit.position, unit))
        plan = _ScopePlan(units, Group(()), {}, {}, defs, reads, origins)
        for unit in units:
            for node in reads[unit]:
                source = plan.latest(node, unit.position)
                plan.source[(unit, node)] = source
                if source is not None and source is not unit:
                    unit.reads.add(source)
                    source.users.add(unit)
        try:
            planned = plan_units(units)
        except RuntimeError as exc:
            raise self.error(call, f"its submodule calls cannot be ordered as one scope ({exc})") from exc
        plan.root = planned.root
        plan.names = planned.names
        return plan

    # -- the document -------------------------------------------------------------------------

    def root_fragment(self, ctx: ExportContext) -> NodeFragment:
        """The root node: the model's inputs as ports, the asked outputs, everything below; the
        sizes read on the way written over the caller's names for the dynamic axes."""
        with naming(self.symbol_names(self.tree.root)):
            return self._root_fragment(ctx)

    def _root_fragment(self, ctx: ExportContext) -> NodeFragment:
        root = self.tree.root
        names = Names()
        seeds = self._input_seeds(ctx, root, names)
        asked = list(ctx.output_names or [])
        results = tensor_leaves(root.result)
        if not asked:
            asked = ["y"] if len(results) == 1 else [f"y{index}" for index in range(len(results))]
        if len(results) != len(asked):
            raise ExportError(
                f"{root.described()} returns {len(results)} tensor(s), but the outputs {asked} were asked for",
                node_id=ctx.node_id,
            )
        interface = Interface([], [], [(name, leaf.node) for name, leaf in zip(asked, results, strict=True)])
        self.interfaces[root] = interface
        encoder = self._root_encoder(ctx, root, asked)
        if encoder is not None:
            ctx.record_facts(*self._facts(ctx, root))
            return encoder
        chained = self._root_chain(ctx, root, seeds, asked)
        if chained is not None:
            seeds = {chained: Wire(Ref(INPUT, "x"))}
            interface.ports, interface.sequential = [("x", chained)], True
        fragment = self.scope_fragment(ctx, root, seeds, names)
        if chained is not None:
            fragment.inputs = {"x": next(iter(ctx.inputs.values()))}
        self.place_dormant()
        ctx.record_facts(*self._facts(ctx, root))
        return fragment

    def _root_encoder(self, ctx: ExportContext, root: Call, asked: list[str]) -> NodeFragment | None:
        """The model itself as the catalog's ``TransformerEncoder`` when it is a
        :func:`~trama_torch.capture.tree.plain_encoder` called with model inputs as its tensors
        and asked for its one output ``y``, else ``None`` (a ``Graph``)."""
        encoder = root.module
        if asked != ["y"] or not plain_encoder(encoder) or not isinstance(root.result, TensorArg):
            return None
        assert isinstance(encoder, nn.TransformerEncoder)
        given = {node: name for node, name in self._root_inputs(root)}
        if len(given) != len(ctx.inputs):
            return None  # an input that is not one tensor
        try:
            bound = inspect.signature(encoder.forward).bind(*root.args, **root.kwargs).arguments
        except TypeError:
            return None
        inputs: dict[str, Ref] = {}
        for port, value in bound.items():
            if isinstance(value, TensorArg):
                if port not in _ENCODER_LAYER_PORTS or value.node not in given:
                    return None
                inputs[port] = ctx.inputs[given[value.node]]
        if "src" not in inputs:
            return None
        fragment = encoder_fragment(encoder, ctx, list(inputs))
        fragment.inputs = inputs
        self.covered.update(id(tensor) for tensor in encoder.state_dict(keep_vars=True).values())
        return fragment

    def _root_chain(
        self, ctx: ExportContext, root: Call, seeds: dict[fx.Node, Any], asked: list[str]
    ) -> fx.Node | None:
        """The input node of a root ``nn.Sequential`` that chains one input to the output ``y``
        (the catalog's ``Sequential``), else ``None``."""
        if len(ctx.inputs) != 1 or asked != ["y"] or len(seeds) != 1 or not isinstance(root.module, nn.Sequential):
            return None
        (node,) = seeds
        result = tensor_leaves(root.result)
        probe = Interface([("x", node)], [], [("y", result[0].node)])
        return node if self._is_chain(root, probe) else None

    def _input_seeds(self, ctx: ExportContext, root: Call, names: Names) -> dict[fx.Node, Any]:
        """Each user input's graph node, as the root's port of its name (a tuple's items through
        ``tuple_get`` nodes)."""
        seeds: dict[fx.Node, Any] = {}
        examples = self.captured.examples
        values: dict[str, Any]
        if self.captured.kwargs:
            values = {name: root.kwargs.get(name) for name in examples}
        else:
            values = dict(zip(examples, root.args, strict=False))
        for name, value in values.items():
            if _holds_dict(value) and tensor_leaves(value):
                self._flatten(ctx, name, value, seeds)
            else:
                self._seed(ctx, names, name, Wire(Ref(INPUT, name)), value, seeds, root)
        return seeds

    def _flatten(self, ctx: ExportContext, name: str, value: Any, seeds: dict[fx.Node, Any]) -> None:
        """A user input holding a dict (``batch={"input_ids": ..., "mask": ...}``) as one model
        input per tensor in it, in the dict's order: the format has no dict values, so the
        document's inputs are ``batch_input_ids``, ``batch_mask`` (keys and indices joined by
        ``_``, escaped to ``[A-Za-z0-9_]``, with ``_1``, … where a name is taken)."""
        taken = Names(set(ctx.inputs) - {name})
        paths = [(path, leaf) for path, leaf in _structure(value) if isinstance(leaf, TensorArg)]
        flat = [taken.fresh("_".join([name, *(str(part) for part in path)])) for path, _ in paths]
        examples = dict(_structure(self.captured.examples.get(name)))
        refs = ctx.replace_input(name, flat)
        for (path, leaf), flat_name, ref in zip(paths, flat, refs, strict=True):
            seeds.setdefault(leaf.node, Wire(ref))
            self.flat_examples[flat_name] = examples.get(path)

    def _seed(
        self,
        ctx: ExportContext,
        names: Names,
        name: str,
        wire: Wire,
        value: Any,
        seeds: dict[fx.Node, Any],
        root: Call,
    ) -> None:
        if isinstance(value, TensorArg):
            seeds.setdefault(value.node, wire)
        elif isinstance(value, (tuple, list)):
            for index, item in enumerate(value):
                if not tensor_leaves(item):
                    continue
                fragment = NodeFragment("tuple_get", outputs=["y"], parameters={"index": index})
                local = names.fresh(f"{name}_{index}")
                refs = ctx.child(local, _made(fragment), {"x": wire.ref}, ["y"])
                self._seed(ctx, names, local, Wire(refs["y"]), item, seeds, root)

    def scope_fragment(
        self, ctx: ExportContext, call: Call, seeds: Mapping[fx.Node, Any], names: Names
    ) -> NodeFragment:
        """The ``Graph`` (or ``Sequential``) node of one module call."""
        interface = self.interface(call)
        plan = self.plan(call)
        self.scopes.setdefault(call.path, (ctx, names, call.module))
        level = _Level(self, ctx, call, plan, names, {(None, node): value for node, value in seeds.items()})
        needed = {(plan.latest(node), node) for _, node in interface.outputs}
        level.run(plan.root, needed)
        bindings: dict[str, Ref] = {}
        for output, node in interface.outputs:
            value = level.lookup(plan.latest(node), node)
            bindings[output] = level.materialize(value, output, call).ref
        metadata: dict[str, Any] = {"class": call.cls}
        if interface.sequential:
            return NodeFragment("Sequential", outputs=["y"], output_bindings=bindings, metadata=metadata)
        path = self.held.scope(call)
        aliases = self.aliases(path) if path is not None else {}
        if aliases:
            metadata[TORCH_ALIASES] = aliases
        return NodeFragment("Graph", outputs=list(bindings), output_bindings=bindings, metadata=metadata)

    # -- modules of several names ---------------------------------------------------------

    @functools.cached_property
    def held(self) -> _Held:
        """Where the document holds the model's modules, filled in as their nodes are written."""
        return _Held()

    @functools.cached_property
    def _module_names(self) -> tuple[list[tuple[str, int]], dict[int, list[str]]]:
        """The modules torch registers under several names: their paths in the model's order
        (``named_modules(remove_duplicate=False)``, parents first), and each one's paths."""
        found: dict[int, list[str]] = {}
        order: list[tuple[str, int]] = []
        for path, module in submodules(self.model, remove_duplicate=False):
            if path:
                found.setdefault(id(module), []).append(path)
                order.append((path, id(module)))
        several = {key: paths for key, paths in found.items() if len(paths) > 1}
        return [(path, key) for path, key in order if key in several], several

    def aliases(self, path: str) -> dict[str, str]:
        """The ``torch_aliases`` of the scope whose module is at ``path``: each other name below
        it (relative to it) of a module a node below it holds, with the name it is held under
        (``{"shared": "encoder.embed_tokens"}``). A name some scope below gave already, or below
        a name given (its module comes with it), is left out. Called as each scope's node is
        finished: every node below it is written by then."""
        order, several = self._module_names
        if not order:
            return {}
        held = self.held
        prefix = f"{path}." if path else ""
        found: dict[str, str] = {}
        for name, key in order:
            if not name.startswith(prefix) or name in held.paths or name in held.aliased:
                continue
            parts = name.split(".")
            if any(".".join(parts[:end]) in held.aliased for end in range(1, len(parts))):
                continue
            target = next((other for other in several[key] if other.startswith(prefix) and other in held.paths), None)
            if target is None:
                continue
            found[name[len(prefix) :]] = target[len(prefix) :]
            held.aliased.add(name)
        return found

    def fingerprint(self, call: Call, kinds: tuple[Any, ...]) -> Any:
        """What a call computes, modulo its inputs: equal for two calls that one node can stand for."""
        interface = self.interface(call)
        inside = self.inside(call)
        local = {node: index for index, node in enumerate(inside)}
        ports = {node: index for index, (_, node) in reversed(list(enumerate(interface.ports)))}

        def norm(value: Any) -> Any:
            if isinstance(value, fx.Node):
                if value in local:
                    return ("n", local[value])
                if value in ports:
                    return ("p", ports[value])
                found = self.placeholders.get(value)
                if found is not None:
                    return ("s", id(found[2]))
                return ("v", str(value.meta.get("val")))
            if isinstance(value, (list, tuple)):
                return tuple(norm(item) for item in value)
            if isinstance(value, dict):
                return tuple((key, norm(item)) for key, item in value.items())
            return ("c", repr(value))

        def chain(node: fx.Node) -> tuple[int, ...]:
            owners: list[int] = []
            owner: Call | None = self.tree.owner[node]
            while owner is not None and owner is not call:
                owners.append(id(owner.module))
                owner = owner.parent
            return tuple(owners)

        body = tuple((str(node.target), norm(node.args), norm(node.kwargs), chain(node)) for node in inside)
        empty = tuple(
            (id(each.module), norm([leaf.node for leaf in tensor_leaves((each.args, each.kwargs))]))
            for each in call.walk()
            if each is not call and not each.nodes
        )
        outputs = tuple(norm(node) for _, node in interface.outputs)
        return (id(call.module), kinds, body, empty, outputs, len(interface.ports))

    # -- unused state -----------------------------------------------------------------------

    def place_dormant(self) -> None:
        """Every state tensor of the model that no node holds yet (a layer ``forward`` never
        calls, a buffer it never reads), as a ``constant`` child of the node of the module that
        holds it, inside ``Graph`` nodes for the modules on the way, so that the imported
        ``state_dict`` is the original's, whole."""
        seen: set[int] = set()
        tries: dict[str, dict[str, Any]] = {}
        for key, tensor in self.model.state_dict(keep_vars=True).items():
            # A tied tensor's other key that no node writes (T5's ``shared.weight``, the weight of an
            # ``nn.Embedding`` never called, which ``encoder.embed_tokens`` reads) is a constant too,
            # sharing the tensor's entry.
            if (id(tensor) in seen or id(tensor) in self.covered) and self.held.writes(key):
                continue
            seen.add(id(tensor))
            owner, _, attribute = key.rpartition(".")
            segments = owner.split(".") if owner else []
            depth = len(segments)
            while depth > 0 and ".".join(segments[:depth]) not in self.scopes:
                depth -= 1
            anchor = ".".join(segments[:depth])
            if anchor not in self.scopes:
                continue
            node = tries.setdefault(anchor, {})
            for segment in segments[depth:]:
                node = node.setdefault(segment, {})
            node[attribute] = tensor
        for anchor, trie in tries.items():
            ctx, names, module = self.scopes[anchor]
            export_dormant(ctx, module, trie, names.fresh)

    # -- facts --------------------------------------------------------------------------------

    def symbol_names(self, root: Call) -> dict[str, str]:
        """torch's name of each dynamic axis's symbol (``"s70"``) -> the caller's (``"seq"``); an
        axis torch kept at its example size is an error, since the document could not run at
        another size."""
        symbols: dict[str, str] = {}
        for node, name in self._root_inputs(root):
            meta = node.meta.get("val")
            if isinstance(meta, torch.Tensor):
                for axis, symbol in self.dynamic.get(name, {}).items():
                    size: Any = meta.shape[axis]
                    if not isinstance(size, torch.SymInt):
                        raise ExportError(
                            f"{self.where}: torch.export kept axis {axis} of {name!r} ({symbol!r}) at its example "
                            f"size {int(size)}, so the document could not run at another size: the model fixes "
                            "that size (a weight, a reshape to a number); leave the axis out of dynamic_shapes"
                        )
                    symbols.setdefault(str(size.node.expr), symbol)
        return symbols

    def symbol_ranges(self, symbols: Mapping[str, str]) -> dict[str, SymbolRange]:
        """The sizes torch.export allows each named symbol, where it bounds them (a position table
        of 64 rows: ``seq <= 64``); a lower bound of 0 or 1 and no upper bound say nothing."""
        ranges: dict[str, SymbolRange] = {}
        for symbol, bounds in getattr(self.program, "range_constraints", {}).items():
            name = symbols.get(str(symbol))
            if name is None:
                continue
            low_int, high_int = _finite(bounds.lower), _finite(bounds.upper)
            low_int = low_int if low_int is not None and low_int > 1 else None
            if low_int is not None or high_int is not None:
                ranges[name] = SymbolRange(low_int, high_int)
        return ranges

    def _facts(
        self, ctx: ExportContext, root: Call
    ) -> tuple[list[ValueFact | None], list[ValueFact | None], dict[str, SymbolRange]]:
        """Input facts from the examples (dynamic axes as their symbols, the others at their
        example size, since the capture may have specialised them) and output facts from the
        program, with torch's symbols named as the caller named them, and their ranges."""
        symbols = self.symbol_names(root)
        inputs: list[ValueFact | None] = []
        for name in ctx.inputs:
            example = self.flat_examples[name] if name in self.flat_examples else self.captured.examples.get(name)
            if not isinstance(example, torch.Tensor):
                inputs.append(None)
                continue
            axes = self.dynamic.get(name, {})
            shape: list[int | str] = [axes.get(axis, int(size)) for axis, size in enumerate(example.shape)]
            inputs.append(ValueFact(_dtype(example.dtype), tuple(shape)))
        outputs: list[ValueFact | None] = []
        for leaf in tensor_leaves(root.result):
            meta = leaf.node.meta.get("val")
            if not isinstance(meta, torch.Tensor):
                outputs.append(None)
                continue
            dims: list[int | str] = []
            sizes: list[Any] = list(meta.shape)
            for each in sizes:
                if isinstance(each, torch.SymInt):
                    named = symbols.get(str(each.node.expr))
                    if named is None:
                        break  # a size torch derived (2 * batch): no name for it
                    dims.append(named)
                else:
                    dims.append(int(each))
            outputs.append(ValueFact(_dtype(meta.dtype), tuple(dims) if len(dims) == len(sizes) else None))
        return inputs, outputs, self.symbol_ranges(symbols)

    def _root_inputs(self, root: Call) -> list[tuple[fx.Node, str]]:
        if self.captured.kwargs:
            pairs = [(root.kwargs.get(name), name) for name in self.captured.examples]
        else:
            pairs = list(zip(root.args, self.captured.examples, strict=False))
        return [(value.node, name) for value, name in pairs if isinstance(value, TensorArg)]


#: The ports of the catalog's ``TransformerEncoder`` (``forward``'s names) and the port of each
#: layer that reads them.
_ENCODER_LAYER_PORTS = {"src": "src", "mask": "src_mask", "src_key_padding_mask": "src_key_padding_mask"}
_ENCODER_PORTS = "(src, [mask], [src_key_padding_mask])"


def encoder_fragment(encoder: nn.TransformerEncoder, ctx: ExportContext, ports: list[str]) -> NodeFragment:
    """The catalog's ``TransformerEncoder`` (a :func:`trama_torch.capture.tree.plain_encoder`):
    children ``layers_0``, … each reading the previous one's ``y`` and the encoder's masks, then
    ``norm``, each exported as its leaf; ``ports`` are the encoder's connected ports."""
    masks = {_ENCODER_LAYER_PORTS[port]: Ref(INPUT, port) for port in ports if port != "src"}
    current = Ref(INPUT, "src")
    for index, layer in enumerate(encoder.layers):
        leaf = Fixed(functools.partial(_leaf_fragment, layer))
        current = ctx.child(f"layers_{index}", leaf, {"src": current, **masks})["y"]
    if encoder.norm is not None:
        current = ctx.child("norm", Fixed(functools.partial(_leaf_fragment, encoder.norm)), {"x": current})["y"]
    return NodeFragment(
        "TransformerEncoder",
        outputs=["y"],
        parameters={"enable_nested_tensor": bool(encoder.enable_nested_tensor), "mask_check": bool(encoder.mask_check)},
        output_bindings={"y": current},
    )


def _leaf_fragment(module: nn.Module, ctx: ExportContext) -> NodeFragment:
    return leaves.export_leaf(module, ctx, None)


def _made(fragment: NodeFragment) -> Fixed:
    """An object whose node is ``fragment`` (a function op, a constant)."""
    return Fixed(lambda _: fragment)


def _with_meta(fragment: NodeFragment, extra: dict[str, Any]) -> NodeFragment:
    if extra:
        fragment.metadata = {**(fragment.metadata or {}), **extra}
    return fragment


def _dtype(dtype: torch.dtype) -> str | None:
    name = str(dtype).removeprefix("torch.")
    return name if name in _DTYPES else None


@dataclass(frozen=True)
class _PortArg:
    """A tensor argument of a leaf call, for :func:`trama_torch.leaves.bind_leaf_call` (not a
    tuple, so never taken for a structure)."""

    node: fx.Node


class _Level:
    """Emits the units of one composite node (a module's scope, or a container in it)."""

    def __init__(
        self,
        capture: Capture,
        ctx: ExportContext,
        call: Call,
        plan: _ScopePlan,
        names: Names,
        incoming: dict[tuple[Unit | None, fx.Node], Any],
    ) -> None:
        self.capture = capture
        self.ctx = ctx
        self.call = call
        self.plan = plan
        self.names = names
        self.values: dict[tuple[Unit | None, fx.Node], Any] = dict(incoming)
        self.constants: dict[int, Wire] = {}
        #: A container's level (a ModuleList's items) sits below its module's node: a submodule's
        #: state read here cannot keep its path as a torch name.
        self.in_container = False

    # -- values -------------------------------------------------------------------------------

    def lookup(self, source: Unit | None, node: fx.Node) -> Any:
        found = self.values.get((source, node), _MISSING)
        if found is not _MISSING:
            return found
        if source is None:
            if node.op == "placeholder":
                return self.capture.placeholder_value(node, self.call)
            if _is_symbolic(node):
                return aten.size_value(node)
        raise self.capture.error(self.call, f"reads {node.name!r} before it is computed", self.ctx.node_id)

    def source(self, unit: Unit, node: fx.Node) -> Any:
        return self.lookup(self.plan.source.get((unit, node)), node)

    def materialize(self, value: Any, name: str, call: Call) -> Wire:
        """A value as a wire of this scope: a tensor known at capture becomes a ``constant``."""
        if isinstance(value, Wire):
            return value
        if isinstance(value, aten.Emit):
            return self.emit_op(value, name, call)
        if isinstance(value, (ConstTensor, StateTensor)):
            key = id(value.tensor)
            wire = self.constants.get(key)
            if wire is None:
                metadata: dict[str, Any] = {}
                if isinstance(value, ConstTensor):
                    metadata[TORCH_PERSISTENT] = False  # computed by the program: no module's state
                if isinstance(value, StateTensor):
                    self.capture.covered.add(key)
                    scope = self.capture.held.scope(self.call)
                    if value.below and scope is not None:
                        self.capture.held.keys.add(_join(scope, value.name))
                    if key in self.capture.transient:
                        metadata[TORCH_PERSISTENT] = False
                    nested = "." in value.name and value.below and not self.in_container
                    if nested or ("." not in value.name and not is_segment(value.name)):
                        metadata[TORCH_NAME] = value.name  # a submodule's state keeps its path
                tensor = export_tensor(value.tensor)
                if isinstance(value, ConstTensor):  # a value, not an object: equal ones share one entry
                    tensor = dataclasses.replace(tensor, key=self.capture.same_value(tensor.value))
                fragment = NodeFragment(
                    "constant", outputs=["y"], parameters={"value": tensor}, metadata=metadata or None
                )
                local = self.names.fresh(value.name.replace(".", "_"))
                refs = self.ctx.child(local, _made(fragment), {}, ["y"])
                wire = Wire(refs["y"])
                self.constants[key] = wire
            return wire
        if isinstance(value, Sym):
            raise self.capture.error(
                call,
                "gives or passes on a size known only at run time (aten.sym_size.int has no catalog op for it yet)",
            )
        if isinstance(value, (bool, int, float)):
            fragment = NodeFragment("constant", outputs=["y"], parameters={"value": value})
            refs = self.ctx.child(self.names.fresh(name), _made(fragment), {}, ["y"])
            return Wire(refs["y"])
        raise self.capture.error(call, f"gives {type(value).__name__} where a tensor is needed ({name!r})")

    # -- units --------------------------------------------------------------------------------

    def run(self, group: Group, needed: set[tuple[Unit | None, fx.Node]]) -> None:
        self.group = group
        self._reserve(group)
        for unit in group.units:
            if isinstance(unit, Group):
                self.container(unit, needed)
            elif unit.is_call:
                self.module_call(unit)
            else:
                self.op(unit)

    def _reserve(self, group: Group) -> None:
        """Module and container names first (the model's own attribute names), valid ones before
        escaped ones, so that a name never depends on what the program's op nodes are called."""
        wanted: list[tuple[Unit | Group, str]] = []
        for unit in group.units:
            if isinstance(unit, Group):
                wanted.append((unit, unit.name))
            elif unit.is_call:
                wanted.append((unit, self.plan.names[unit]))
        self.reserved: dict[int, str] = {}
        #: the units that got their name first (a second call of one module is not one)
        self.first_named: set[int] = set()
        used: set[str] = set()
        for valid in (True, False):
            for unit, name in wanted:
                if is_segment(name) != valid:
                    continue
                if name in used:  # a second call of one module: a name of its own
                    continue
                used.add(name)
                self.reserved[id(unit)] = self.names.fresh(name)
                self.first_named.add(id(unit))
        for unit, name in wanted:
            if id(unit) not in self.reserved:
                self.reserved[id(unit)] = self.names.fresh(name)

    def _node_name(self, unit: Unit | Group) -> tuple[str, dict[str, Any]]:
        """A call's or container's node name, and the metadata that keeps its torch name where
        the name is not it: an escaped one (``{"torch_name": "block1-0"}``), or the torch path
        a name was joined from (``attentions_0``, an item of a ``ModuleList`` whose calls
        interleave with another's: ``{"torch_name": "attentions.0"}``, so the import writes its
        keys as ``attentions.0.weight``). A second call's node of its own does not claim it."""
        name = self.reserved[id(unit)]
        original = unit.name if isinstance(unit, Group) else self.plan.names[unit]
        found = self._origin(unit)
        if found is not None and len(found[0]) > 1 and id(unit) in self.first_named:
            return name, {TORCH_NAME: ".".join(found[0])}
        return name, ({TORCH_NAME: original} if not is_segment(original) else {})

    def _origin(self, unit: Unit | Group) -> tuple[tuple[str, ...], str | None] | None:
        """A call's or container's torch path below this level (the parts its name was joined
        from) and its module's path in the model, where the document holds it (``None`` where
        the scope's is not known), or ``None`` where the name was made up otherwise."""
        if isinstance(unit, Group):
            first = min(unit.members, key=lambda member: member.position)
            origin, place, whole = self.plan.origins.get(first, ()), unit.path, False
        else:
            origin, place, whole = self.plan.origins.get(unit, ()), (*self.group.path, self.plan.names[unit]), True
        runs = _runs(place, origin) if origin else None
        if not runs or (whole and sum(len(run) for run in runs) != len(origin)):
            return None
        scope = self.capture.held.scope(self.call)
        used = origin[: sum(len(run) for run in runs)]
        return runs[-1], (_join(scope, ".".join(used)) if scope is not None else None)

    def _hold(self, unit: Unit | Group) -> str | None:
        """Note that a node holds ``unit``'s module at its torch path; that path, or ``None``."""
        found = self._origin(unit)
        path = found[1] if found is not None else None
        if path is not None:
            self.capture.held.paths.add(path)
        return path

    def op(self, unit: Unit) -> None:
        node: fx.Node = unit.item
        owner = self.capture.tree.owner.get(node, self.call)

        def value(arg: Any) -> Any:
            return self.source(unit, arg)

        args = fx.node.map_arg(node.args, value)
        kwargs = fx.node.map_arg(node.kwargs, value)
        if aten.inplace_hazard(node) is not None:
            written = self._functionalized(unit, node, args, kwargs, owner)
            if written is not None:
                self.values[(unit, node)] = written
                return
        self.values[(unit, node)] = self.translate_node(node, args, kwargs, owner, node)

    def _functionalized(self, unit: Unit, node: fx.Node, args: Any, kwargs: Any, owner: Call) -> Any:
        """An in-place op whose write is read afterwards, written as values: its pure form gives
        the written tensor's new value, ``slice_scatter`` puts it back into each tensor it is a
        slice of, and every tensor of the chain is read from then on at its new value
        (``b = bias.clone(); b[n:2 * n].zero_(); f(b)``: ``f`` reads the scattered ``b``).
        ``None`` where that cannot be said so: a write through a view other than a slice, a
        slice bound known only at run time, or a view of the storage made before the write and
        read after it."""
        target = aten.mutated_argument(node)
        if target is None:
            return None
        chain: list[fx.Node] = []  # the slices and in-place results the write goes through
        base = target
        while base.op == "call_function":
            if base.target is torch.ops.aten.slice.Tensor:
                chain.append(base)
                base = base.args[0]  # type: ignore[assignment]
            elif aten.mutated_argument(base) is not None:  # an in-place op's result is its input
                chain.append(base)
                base = aten.mutated_argument(base)  # type: ignore[assignment]
            else:
                break
        if aten.is_view(base):
            return None
        if not self._no_stale_view(node, base, chain):
            return None
        slices = {view: aten.slice_bounds(view) for view in chain if view.target is torch.ops.aten.slice.Tensor}
        if any(bound is None for bound in slices.values()):
            return None
        try:
            mapped = aten.translate_pure(node, args, kwargs)
        except aten.MissingOp:
            return None
        result = self._result(mapped, node, owner)
        value = result
        for view in chain:
            self._rebind(unit, view, value)
            bound = slices.get(view)
            if bound is None:  # an in-place result: the same tensor as its input
                continue
            parent: fx.Node = view.args[0]  # type: ignore[assignment]
            dim, start, end, step = bound
            scatter = aten.Emit(
                "slice_scatter",
                {"x": self._current(unit, parent), "src": value},
                {"dim": dim, "start": start, "end": end, "step": step},
            )
            value = self.emit_op(scatter, f"{parent.name}_written", owner)
        self._rebind(unit, base, value)
        return result

    def _no_stale_view(self, node: fx.Node, base: fx.Node, chain: list[fx.Node]) -> bool:
        """Whether no view of ``base``'s storage made before ``node``, other than those of
        ``chain``, is read after it: it would still read the old values. Views made after the
        write are taken from the new values, as they are translated later."""
        order = {each: index for index, each in enumerate(node.graph.nodes)}
        here = order[node]
        allowed = {base, *chain, node}
        return not any(
            member not in allowed and order[member] < here and any(order[user] > here for user in member.users)
            for member in aten.aliases(base)
        )

    def _current(self, unit: Unit, node: fx.Node) -> Any:
        """The value of ``node`` in this level now (at ``unit``'s place)."""
        source = self.plan.latest(node, unit.position)
        return self.lookup(source, node)

    def _rebind(self, unit: Unit, node: fx.Node, value: Any) -> None:
        """From now on, ``node`` reads as ``value`` in this level (a written tensor's new value)."""
        self.values[(self.plan.latest(node, unit.position), node)] = value

    def translate_node(
        self, node: fx.Node, args: Any, kwargs: Any, owner: Call, origin: fx.Node, depth: int = 0
    ) -> Any:
        """The value of one aten call in this scope: folded at capture, a catalog op, or, where the
        catalog has none, torch's decomposition of it (:mod:`trama_torch.capture.decompose`).
        ``origin`` is the program's node the call comes from (for the source line of an error)."""
        folded = self._fold(node, args, kwargs)
        if folded is not _MISSING:
            return folded
        try:
            mapped = aten.translate(node, args, kwargs)
        except aten.MissingOp as missing:
            decomposable = depth < _DECOMPOSE_DEPTH and not isinstance(missing, aten.InPlaceHazard)
            decomposed = self._decomposed(node, args, kwargs, owner, origin, depth) if decomposable else None
            if decomposed is not None:
                return decomposed
            where = source_line(origin.meta.get("stack_trace"))
            at = f" (at {where})" if where else ""
            inside = f" (in torch's decomposition of {aten.op_name(origin.target)})" if depth else ""
            raise self.capture.error(owner, f"{missing.what} {missing.why}{inside}{at}", self.ctx.node_id) from None
        return self._result(mapped, node, owner)

    def _decomposed(self, node: fx.Node, args: Any, kwargs: Any, owner: Call, origin: fx.Node, depth: int) -> Any:
        """A ``Graph`` node computing ``node`` by torch's decomposition of its op, or ``None``
        where there is none; its ports are the call's tensor arguments (``x0``, ``x1``, …)."""
        found = decompose.decomposition(node)
        if found is None:
            return None
        local = self.names.fresh(local_name(node.name))
        arguments = decompose.tensor_arguments(args, kwargs, found.tensors)
        inputs = {
            f"x{index}": self.materialize(argument, f"{local}_x{index}", owner).ref
            for index, argument in enumerate(arguments)
        }
        result = node.meta.get("val")
        several = isinstance(result, (tuple, list))
        outputs = [f"y{index}" for index in range(len(result))] if isinstance(result, (tuple, list)) else ["y"]
        what = aten.op_name(node.target)

        def make(child: ExportContext) -> NodeFragment:
            level = _Level(self.capture, child, self.call, self.plan, Names(), {})
            bindings = level.run_decomposition(found, owner, origin, depth + 1, outputs)
            return NodeFragment(
                "Graph", outputs=outputs, output_bindings=bindings, metadata={decompose.DECOMPOSED: what}
            )

        refs = self.ctx.child(local, Fixed(make), inputs, outputs)
        if several:
            return Several(tuple(Wire(refs[output]) for output in outputs))
        return Wire(refs["y"])

    def run_decomposition(
        self, found: decompose.Decomposition, owner: Call, origin: fx.Node, depth: int, outputs: list[str]
    ) -> dict[str, Ref]:
        """Emit the nodes of a decomposition's graph into this (fresh) scope; its outputs' refs."""
        values: dict[fx.Node, Any] = {}
        placeholders = [node for node in found.graph.nodes if node.op == "placeholder"]
        for index, placeholder in enumerate(placeholders):
            values[placeholder] = Wire(Ref(INPUT, f"x{index}"))
        result: Any = None
        for node in found.graph.nodes:
            if node.op == "call_function":
                args = fx.node.map_arg(node.args, values.__getitem__)
                kwargs = fx.node.map_arg(node.kwargs, values.__getitem__)
                values[node] = self.translate_node(node, args, kwargs, owner, origin, depth)
            elif node.op == "output":
                result = fx.node.map_arg(node.args[0], values.__getitem__)
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        if isinstance(result, Several):
            items = list(result.items)
        if len(items) != len(outputs):
            raise self.capture.error(
                owner,
                f"torch's decomposition of {aten.op_name(node_target(origin))} gives {len(items)} results, "
                f"not {len(outputs)}",
            )
        return {output: self.materialize(item, output, owner).ref for output, item in zip(outputs, items, strict=True)}

    def _result(self, mapped: Any, node: fx.Node, owner: Call) -> Any:
        if isinstance(mapped, aten.Emit) and len(mapped.outputs) > 1:  # an op giving a tuple (``topk``)
            return Several(self._emitted(mapped, node.name, owner))
        if isinstance(mapped, aten.Emit):
            return self.emit_op(mapped, node.name, owner)
        if isinstance(mapped, aten.Alias):
            value = mapped.value
            return self.emit_op(value, node.name, owner) if isinstance(value, aten.Emit) else value
        if isinstance(mapped, Several):
            return mapped
        return None

    def _fold(self, node: fx.Node, args: Any, kwargs: Any) -> Any:
        """A node whose inputs are all known at capture is computed now (a mask from
        ``torch.ones``, an ``arange`` of a fixed length): a constant of the document."""
        flat = pytree.tree_leaves((args, kwargs))
        if any(isinstance(leaf, (Wire, StateTensor, Sym, Several, aten.Emit)) for leaf in flat):
            return _MISSING
        if not aten.foldable(node):
            return _MISSING
        real_args, real_kwargs = pytree.tree_map(
            lambda leaf: leaf.tensor if isinstance(leaf, ConstTensor) else leaf, (args, kwargs)
        )
        try:
            with torch.no_grad():
                result = node.target(*real_args, **real_kwargs)  # type: ignore[operator]
        except Exception:
            return _MISSING
        if isinstance(result, torch.Tensor):
            return ConstTensor(result, local_name(node.name))
        if isinstance(result, (tuple, list)) and all(isinstance(item, torch.Tensor) for item in result):
            local = local_name(node.name)
            return Several(tuple(ConstTensor(item, f"{local}_{index}") for index, item in enumerate(result)))
        if isinstance(result, (bool, int, float)) or result is None:
            return result
        return _MISSING

    def emit_op(self, emit: aten.Emit, name: str, owner: Call) -> Wire:
        """The node of a one-output op (``y``); its value."""
        (wire,) = self._emitted(emit, name, owner)
        return wire

    def _emitted(self, emit: aten.Emit, name: str, owner: Call) -> tuple[Wire, ...]:
        """The node of ``emit``; the values of its outputs, in their order."""
        local = self.names.fresh(local_name(name))
        inputs = {port: self.materialize(value, f"{local}_{port}", owner).ref for port, value in emit.ports.items()}
        fragment = NodeFragment(emit.op, parameters=dict(emit.parameters))
        refs = self.ctx.child(local, _made(fragment), inputs, list(emit.outputs))
        return tuple(Wire(refs[output]) for output in emit.outputs)

    # -- module calls -------------------------------------------------------------------------

    def module_call(self, unit: Unit) -> None:
        call: Call = unit.item
        capture = self.capture
        interface = capture.interface(call)
        name, extra = self._node_name(unit)
        path = capture.held.scopes[call] = self._hold(unit)
        if path is None or call.opaque in ("leaf", "encoder", "exportable"):
            # Its node writes the module's whole state (or where is not known: taken as whole).
            capture.held.whole.add(call.path if path is None else path)
        values = [(port, self.source(unit, node)) for port, node in interface.ports]
        if call.opaque in ("leaf", "encoder"):
            refs = self._leaf(call, name, extra, values, interface)
        elif call.opaque == "exportable":
            inputs = {port: self.materialize(value, port, call).ref for port, value in values}
            got = self.ctx.child(name, call.module, inputs)
            # Its exporter wrote the module's state: no dormant constants of it elsewhere.
            self.capture.covered.update(id(tensor) for tensor in call.module.state_dict(keep_vars=True).values())
            outputs = list(got.values())
            results = [node for _, node in interface.outputs]
            if len(outputs) != len(results):
                raise capture.error(
                    call, f"its to_node gives {len(outputs)} outputs, but forward returned {len(results)}"
                )
            refs = {output: ref for (output, _), ref in zip(interface.outputs, outputs, strict=True)}
        else:
            refs = self._graph_call(call, unit, name, extra, values, interface)
        for output, node in interface.outputs:
            self.values[(unit, node)] = Wire(refs[output])

    def _can_call(self, first: _First) -> bool:
        own = self.ctx.node_id
        return not (own == first.node_id or own.startswith(f"{first.node_id}."))

    def _leaf(
        self, call: Call, name: str, extra: dict[str, Any], values: list[tuple[str, Any]], interface: Interface
    ) -> dict[str, Ref]:
        inputs = {port: self.materialize(value, port, call).ref for port, value in values}
        fingerprint = ("leaf", id(call.module), tuple(sorted(inputs)), repr(sorted(interface.constants.items())))
        first = self.capture.first.get(id(call.module))
        if first is not None and first.fingerprint == fingerprint and self._can_call(first):
            return self.ctx.call(name, first.node_id, inputs)
        module = call.module
        constants = interface.constants or None

        def make(child: ExportContext) -> NodeFragment:
            if isinstance(module, nn.TransformerEncoder) and call.opaque == "encoder":
                fragment = encoder_fragment(module, child, list(inputs))
            else:
                fragment = leaves.export_leaf(module, child, constants)
            return _with_meta(fragment, extra)

        refs = self.ctx.child(name, Fixed(make), inputs)
        self.capture.covered.update(id(tensor) for tensor in module.state_dict(keep_vars=True).values())
        if first is None:
            self.capture.first[id(module)] = _First(f"{self.ctx.node_id}.{name}", fingerprint, list(inputs), list(refs))
        return refs

    def _graph_call(
        self,
        call: Call,
        unit: Unit,
        name: str,
        extra: dict[str, Any],
        values: list[tuple[str, Any]],
        interface: Interface,
    ) -> dict[str, Ref]:
        capture = self.capture
        kinds: list[Any] = []
        wires: dict[str, Ref] = {}
        seeds: dict[fx.Node, Any] = {}
        owned = {id(tensor) for tensor in call.module.state_dict(keep_vars=True).values()}
        for (port, node), (_, value) in zip(interface.ports, values, strict=True):
            if isinstance(value, StateTensor) and id(value.tensor) not in owned:
                # State of this scope handed to the call (a parametrization's originals): its
                # constant belongs here, where the module holding it is, so the keys survive.
                value = self.materialize(value, port, call)
            if isinstance(value, Wire):
                kinds.append("w")
                wires[port] = value.ref
                seeds.setdefault(node, Wire(Ref(INPUT, port)))
            else:
                kinds.append(("v", id(getattr(value, "tensor", value))))
                seeds.setdefault(node, value)
        for node in interface.by_value:
            seeds.setdefault(node, self.source(unit, node))
        fingerprint = capture.fingerprint(call, tuple(kinds))
        first = capture.first.get(id(call.module))
        if first is not None and first.fingerprint == fingerprint and self._can_call(first):
            own = [port for port, _ in interface.ports if port in wires]
            inputs = {target: wires[port] for target, port in zip(first.ports, own, strict=True)}
            got = self.ctx.call(name, first.node_id, inputs)
            return {output: got[target] for (output, _), target in zip(interface.outputs, first.outputs, strict=True)}
        if interface.sequential:
            wires = {"x": next(iter(wires.values()))} if wires else {}

        def make(child: ExportContext) -> NodeFragment:
            fragment = capture.scope_fragment(child, call, seeds, Names())
            return _with_meta(fragment, extra)

        refs = self.ctx.child(name, Fixed(make), wires)
        if first is None:
            capture.first[id(call.module)] = _First(
                f"{self.ctx.node_id}.{name}", fingerprint, list(wires), [output for output, _ in interface.outputs]
            )
        return refs

    # -- containers ---------------------------------------------------------------------------

    def container(self, group: Group, needed: set[tuple[Unit | None, fx.Node]]) -> None:
        """A ``ModuleList``/``ModuleDict`` (or any module whose items are called while it is not)
        as a ``Graph`` node holding its items."""
        plan = self.plan
        members = group.members
        crossing: dict[tuple[Unit | None, fx.Node], None] = {}
        for unit in sorted(members, key=lambda unit: unit.position):
            for node in plan.reads[unit]:
                source = plan.source.get((unit, node))
                if source is None or source not in members:
                    crossing[(source, node)] = None
        wanted: dict[tuple[Unit | None, fx.Node], None] = {}
        for unit in plan.units:
            if unit in members:
                continue
            for node in plan.reads[unit]:
                source = plan.source.get((unit, node))
                if source is not None and source in members:
                    wanted[(source, node)] = None
        order = self.capture.tree.order
        for key in sorted(needed, key=lambda key: (key[0].position if key[0] else -1.0, order.get(key[1], -1.0))):
            if key[0] is not None and key[0] in members:
                wanted[key] = None  # in program order: ``needed`` is a set
        name, extra = self._node_name(group)
        held = self._hold(group)
        ports = Names()
        inputs: dict[str, Ref] = {}
        incoming: dict[tuple[Unit | None, fx.Node], Any] = {}
        path = ".".join(group.path)
        port_names = self._item_port_names(members)
        for key in crossing:
            value = self.lookup(*key)
            if isinstance(value, StateTensor) and not (value.below and value.name.startswith(f"{path}.")):
                # The module's own state read by its items (DeBERTa's encoder.rel_embeddings):
                # its constant stays with the module, and enters the container by a port.
                value = self.materialize(value, key[1].name, self.call)
            if isinstance(value, Wire):
                port = ports.fresh(port_names.get(key[1], local_name(key[1].name)))
                inputs[port] = value.ref
                incoming[key] = Wire(Ref(INPUT, port))
            else:
                incoming[key] = value
        holder = self.call.module.get_submodule(path) if _has_submodule(self.call.module, path) else None
        absolute = f"{self.call.path}.{path}" if self.call.path else path
        outputs: dict[tuple[Unit | None, fx.Node], str] = {}

        def make(child: ExportContext) -> NodeFragment:
            inner_names = Names()
            if holder is not None:
                self.capture.scopes.setdefault(absolute, (child, inner_names, holder))
            level = _Level(self.capture, child, self.call, plan, inner_names, incoming)
            level.in_container = True
            level.run(group, needed | set(wanted))
            bindings: dict[str, Ref] = {}
            out_names = Names()
            for key in wanted:
                output = out_names.fresh(self._item_output_name(key))
                bindings[output] = level.materialize(level.lookup(*key), output, self.call).ref
                outputs[key] = output
            metadata: dict[str, Any] = {**extra}
            if holder is not None:
                cls = type(holder)
                metadata["class"] = f"{cls.__module__}.{cls.__qualname__}"
            aliases = self.capture.aliases(held) if holder is not None and held is not None else {}
            if aliases:
                metadata[TORCH_ALIASES] = aliases
            return NodeFragment("Graph", outputs=list(bindings), output_bindings=bindings, metadata=metadata or None)

        refs = self.ctx.child(name, Fixed(make), inputs)
        for key, output in outputs.items():
            self.values[key] = Wire(refs[output])

    def _item_port_names(self, members: set[Unit]) -> dict[fx.Node, str]:
        """A container's ports are named after what its items call them: each value after the
        ``forward`` parameter of the first item call that takes it (``attention_mask``), so
        that the names do not depend on the program's op names nor on the number of items."""
        named: dict[fx.Node, str] = {}
        for unit in sorted(members, key=lambda unit: unit.position):
            if unit.is_call:
                for name, node in self.capture.interface(unit.item).ports:
                    named.setdefault(node, name)
        return named

    def _item_output_name(self, key: tuple[Unit | None, fx.Node]) -> str:
        """A container's output named as its item's (``y``), or after the op that makes it."""
        source, node = key
        if source is not None and source.is_call:
            for name, output in self.capture.interface(source.item).outputs:
                if output is node:
                    return name
        return local_name(node.name)


def _passes_through(call: Call, place: tuple[str, ...]) -> bool:
    """Whether ``call`` is an ``nn.Identity`` held as a plain attribute (``self.drop_path =
    nn.Identity()``, the stand-in for a layer a configuration leaves out), which is no node.

    It computes nothing and holds nothing, so a reviewer would read a line of noise per use
    (timm's EfficientNet has 90). In an ``nn.Sequential`` chain or a container it stays: there
    its position is part of the ``state_dict`` keys of the items after it."""
    return (
        type(call.module) is nn.Identity
        and len(place) == 1
        and not place[0].isdigit()
        and isinstance(call.result, TensorArg)
        and len(call.args) == 1
        and not call.kwargs
        and isinstance(call.args[0], TensorArg)
        and call.args[0].node is call.result.node
    )


def _has_submodule(module: nn.Module, path: str) -> bool:
    try:
        module.get_submodule(path)
    except AttributeError:
        return False
    return True


_MISSING: Any = object()


def node_target(node: fx.Node) -> Any:
    """A program node's target (a function: typed as ``Any`` for the error messages)."""
    return node.target


#: How deep decompositions may nest (a decomposed op whose parts need decomposing in turn).
_DECOMPOSE_DEPTH = 3
