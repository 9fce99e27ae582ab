"""Lowering a trama document to ONNX, its hierarchy kept.

:func:`lower` turns a :class:`trama.Model` into an ``onnx.ModelProto``:

* **Composites are ONNX local functions** (domain :data:`FUNCTION_DOMAIN`), one per distinct
  structure (:mod:`trama_onnx._structure`): the 24 layers of a transformer are one function and 24
  nodes calling it. A function's inputs are the composite's ports, then the tensors its leaves hold
  (each instance passes its own weights, initializers of the main graph), then the sizes its
  settings need (one int64 ``[1]`` input per symbol, ``size.<symbol>``). With ``functions=False``
  every leaf is inlined into the main graph instead. Calling nodes (``calls``) are expanded first,
  so a call of a composite is one more call of its function.
* **ONNX node names are trama node ids**: ``root.model.layers.0`` for a call of the layer function,
  ``root.head`` for the first ONNX node of a leaf and ``root.head#1``, ``#2``, … for the others
  (its ``Constant`` nodes ``root.head#c``, ``root.head#c#1``, …);
  inside a function, a leaf's nodes are named by its path below the composite (``mlp.fc1``). Values
  are named likewise (a leaf's output ``y`` is ``root.head.y``). Nodes that stand for no trama node
  (the sizes read from the inputs' shapes) have names that start with ``%``.
* **Graph inputs** are the model's inputs with their facts (a symbolic axis is a ``dim_param``);
  graph outputs carry the output facts, or what the shape pass found. Weights are initializers named
  by their parameter entries (a shared entry is one initializer). ``external_data`` marks them for
  one file beside the model: ``onnx.save_model(proto, path)`` then writes them there.

Lowering a leaf
---------------

Each op is lowered by a **lowering factory**, registered for the framework ``"onnx"`` exactly as a
framework registers its kernels (``trama_op_implementations("onnx")``; this package's own live in
``trama_onnx.ops_*``, registered with ``trama_onnx._registry.lowers``). A factory is called as
``factory(node, *, children, parameters)`` (``parameters``: slot -> :class:`trama.Parameter`) and
returns a :class:`Lowering`, whose ``emit(g, inputs)`` adds the node's ONNX nodes through the
:class:`Emitter` ``g``: ``inputs`` maps each wired input port to its ONNX value's name, and
``emit`` returns each output's ONNX value name. A factory reads the catalog's checked settings with
:func:`catalog_settings`; ``emit`` reads tensors with :meth:`Emitter.tensor`, what the node reads
with :meth:`Emitter.input_info`, and sizes that may depend on the inputs with
:meth:`Emitter.int64s`. What :meth:`Emitter.input_info` says is learnt by running the document
once on the numpy runtime (:mod:`trama_onnx._shapes`), so an op pack that lowers its ops
implements them for numpy too.

``emit`` runs once per function body: when two instances share a function, it is called for the
first one only. So it must bake in nothing but what the structure digest covers: settings other
than tensors, the tensors' dtypes and shapes, and what :meth:`Emitter.input_info` says. A tensor's
values reach the graph only through :meth:`Emitter.tensor` (never :meth:`Emitter.const`).

Every failure is one :class:`LoweringError` (an :class:`trama.ExportError`) naming the node and its
op: an op without a lowering, a lowering that refuses the node's settings, a lowering that fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trama.errors import ExecutionError, ExportError, TramaError
from trama.format import INPUT, Model, Node, Parameter, Ref, SizeExpr, Tensor, ValueFact
from trama.format._calls import expand_calls
from trama.format._model import children_by_parent
from trama.format._sizes import has_sizes, resolve_sizes
from trama_onnx._shapes import ShapeFacts, ValueInfo, shape_pass
from trama_onnx._structure import structure_digests

if TYPE_CHECKING:
    from trama.catalog import Settings
    from trama.format import OpRegistry

__all__ = [
    "DEFAULT_OPSET",
    "FUNCTION_DOMAIN",
    "ONNX_DTYPES",
    "Emitter",
    "Lowering",
    "LoweringError",
    "ValueInfo",
    "catalog_settings",
    "lower",
]

#: The ONNX opset the lowering targets unless told otherwise. 18 has every op the catalog's
#: lowerings need (``LayerNormalization`` came in 17, reductions with ``axes`` as an input in 18),
#: and is read by every tool still in use (TensorRT 8.6+, older onnxruntime, converters); later
#: opsets add nothing these lowerings use, and onnxruntime 1.31 runs up to 26. A lowering may
#: read :attr:`Emitter.opset` to use a newer op when asked for a newer opset.
DEFAULT_OPSET = 18

#: The domain of the local functions that stand for composites.
FUNCTION_DOMAIN = "trama.fn"

#: The ONNX element type of each format dtype.
ONNX_DTYPES: dict[str, int] = {
    "float16": TensorProto.FLOAT16,
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "bfloat16": TensorProto.BFLOAT16,
    "int8": TensorProto.INT8,
    "int16": TensorProto.INT16,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL,
}

#: The largest constant deduplicated within one graph or function body (elements).
_SHARED_CONSTANT = 64


class LoweringError(ExportError):
    """A document, or one of its nodes, cannot be lowered to ONNX (``node_id`` names the node)."""


#: ``emit(g, inputs) -> outputs``: ONNX value names by input port, and by output.
EmitFunction = Callable[["Emitter", Mapping[str, str]], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Lowering:
    """What a lowering factory returns: the node, its parameters (by slot) and ``emit``."""

    node: Node
    parameters: Mapping[str, Parameter]
    emit: EmitFunction


# --- settings ---------------------------------------------------------------------------------

#: The sizes of the shape pass's first run, while the factories are called.
_BINDING: ContextVar[Mapping[str, int] | None] = ContextVar("trama_onnx_binding", default=None)


def catalog_settings(node: Node, parameters: Mapping[str, Parameter]) -> Settings:
    """The catalog's checked settings of ``node`` (:func:`trama.catalog.check_settings`), for the
    lowering factory of a catalog op (an op pack's lowering reads its own slots with
    :meth:`Emitter.setting`), with every default filled in and derived values (a convolution's
    ``pads``). Where a setting is a size computed from the inputs, it is checked at the
    sizes of the shape pass and holds that number here: a lowering reads such a slot with
    :meth:`Emitter.int64s`, which computes it from the inputs' shapes."""
    from trama.catalog import check_settings

    if any(has_sizes(entry.value) for entry in parameters.values()):
        binding = _BINDING.get() or {}
        try:
            parameters = {
                slot: Parameter(resolve_sizes(entry.value, binding), entry.learnable)
                for slot, entry in parameters.items()
            }
        except KeyError as missing:
            raise LoweringError(
                f"a setting depends on the size {missing}, which no input's facts name", node_id=node.id
            ) from None
    return check_settings(node, parameters)


# --- the emitter ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Leaf:
    """The trama leaf being lowered: its node, its path in the body, its parameters."""

    node: Node
    path: str
    parameters: Mapping[str, Parameter]
    count: int = 0
    first: int = 0


class Emitter:
    """The ONNX graph (or function body) being built, as a lowering's ``emit`` sees it.

    Names of values are strings; a lowering never needs to invent one: :meth:`op` names its outputs
    after the node, and :meth:`tensor`, :meth:`const` and :meth:`int64s` hand back values ready to
    use. Everything is about the trama node being lowered (:attr:`node`).
    """

    def __init__(self, builder: _Builder, scope: str | None) -> None:
        self._builder = builder
        #: The id of the composite whose function body this is, ``None`` for the main graph.
        self.scope = scope
        #: The ONNX opset of the default domain.
        self.opset: int = builder.opset
        self._nodes: list[onnx.NodeProto] = []
        #: The domains (other than the default one) the nodes use, with their versions.
        self._domains: dict[str, int] = {}
        self._node_names: set[str] = set()
        self._value_names: set[str] = set()
        self._consts: dict[tuple[Any, ...], str] = {}
        self._const_keys: dict[str, tuple[Any, ...]] = {}
        self._symbols: dict[str, str] = {}
        self._sizes: dict[str, str] = {}
        self._tensors: dict[tuple[str, str], str] = {}
        #: A function body's inputs: ports, then tensors (path, slot), then sizes.
        self._port_inputs: list[str] = []
        self._tensor_inputs: list[tuple[str, str]] = []
        self._tensor_input_names: list[str] = []
        self._symbol_inputs: list[str] = []
        self._symbol_input_names: list[str] = []
        self._leaf: _Leaf | None = None
        self._produced: set[str] = set()

    # --- what a lowering reads ------------------------------------------------------------------

    @property
    def node(self) -> Node:
        """The trama node being lowered (in a shared function, its first instance)."""
        return self._current().node

    @property
    def node_id(self) -> str:
        return self._current().node.id

    def input_info(self, port: str) -> ValueInfo:
        """The dtype, rank and shape of what input ``port`` holds (axes that change with the input
        sizes are a symbol's name or ``None``). A Python number is a 0-d int64, float32 or bool
        (:meth:`python_scalar` says which it was)."""
        leaf = self._current()
        facts = self._builder.facts
        if facts.failure is not None:
            # The node the run failed at is the one to blame, not the first lowering that asked.
            culprit = getattr(facts.error, "node_id", None)
            raise LoweringError(
                f"the document does not run on numpy, which the lowering needs to learn the dtype and rank of "
                f"each value ({leaf.node.op} at {leaf.node.id!r} asked): {facts.failure}",
                node_id=culprit or leaf.node.id,
            )
        info = facts.inputs.get(leaf.node.id, {}).get(port)
        if info is None:
            raise LoweringError(
                f"{leaf.node.op}: nothing is known of input {port!r} (it is not wired, or holds no tensor)",
                node_id=leaf.node.id,
            )
        return info

    def python_scalar(self, port: str) -> type | None:
        """``bool``, ``int`` or ``float`` where input ``port`` is a Python number (which promotes
        more weakly than a tensor), else ``None``."""
        kind = self._builder.facts.python.get((self.node_id, port))
        return kind if kind in (bool, int, float) else None

    def setting(self, slot: str, default: Any = None) -> Any:
        """A setting's value as it is in the document (``default`` where the slot is absent).
        A tensor is refused (read it with :meth:`tensor`), and so is a size computed from the
        inputs (read it with :meth:`int64s`): both are :class:`LoweringError` naming the slot."""
        leaf = self._current()
        entry = leaf.parameters.get(slot)
        if entry is None:
            return default
        if isinstance(entry.value, Tensor):
            raise LoweringError(f"{leaf.node.op}: slot {slot!r} holds a tensor, not a setting", node_id=leaf.node.id)
        if has_sizes(entry.value):
            raise LoweringError(
                f"{leaf.node.op}: slot {slot!r} depends on the input sizes, which this lowering takes only as numbers",
                node_id=leaf.node.id,
            )
        return entry.value

    @property
    def node_parameters(self) -> Mapping[str, Parameter]:
        """The current node's parameters as the document holds them (sizes as expressions)."""
        return self._current().parameters

    def has_tensor(self, slot: str) -> bool:
        """Whether the slot holds a tensor (absent and ``null`` slots hold none)."""
        entry = self._current().parameters.get(slot)
        return entry is not None and isinstance(entry.value, Tensor)

    def tensor_info(self, slot: str) -> ValueInfo:
        """A tensor slot's dtype, rank and shape."""
        value = self._tensor_value(slot)
        return ValueInfo(value.dtype, len(value.shape), tuple(value.shape))

    def tensor(self, slot: str) -> str:
        """The ONNX value of a tensor slot: the entry's initializer in the main graph, an input of
        the function inside one (each instance passes its own)."""
        self._tensor_value(slot)
        leaf = self._current()
        return self._tensor_at(leaf.path, slot)

    # --- what a lowering writes -------------------------------------------------------------------

    def op(
        self,
        op_type: str,
        inputs: Sequence[str | None],
        attrs: Mapping[str, Any] | None = None,
        *,
        outputs: int = 1,
        domain: str = "",
        name: str | None = None,
    ) -> list[str]:
        """Add an ONNX node; its outputs' names. ``None`` among ``inputs`` is an omitted optional
        input; an attribute whose value is ``None`` is left out. ``name`` defaults to the trama
        node's id (its path, in a function) for its first ONNX node and to ``<id>#k`` after."""
        if name is None:
            name = self._next_name()
        name = self._fresh_node(name)
        produced = [self._fresh_value(name if outputs == 1 else f"{name}:{k}") for k in range(outputs)]
        attributes = {key: value for key, value in (attrs or {}).items() if value is not None}
        names = [value or "" for value in inputs]
        while names and not names[-1]:  # trailing optional inputs left out, not given as ""
            names.pop()
        self._nodes.append(helper.make_node(op_type, names, produced, name=name, domain=domain or None, **attributes))
        self._produced.update(produced)
        if domain:
            self._domains.setdefault(domain, 1)
        return produced

    def op1(self, op_type: str, inputs: Sequence[str | None], attrs: Mapping[str, Any] | None = None) -> str:
        """:meth:`op` for a node with one output: its name."""
        return self.op(op_type, inputs, attrs)[0]

    def const(self, value: Any, dtype: str | None = None) -> str:
        """A constant (a ``Constant`` node). ``value``: an array, or a Python number or list (int
        becomes int64, float float32, bool bool, unless ``dtype`` says otherwise)."""
        array = _array(value, dtype)
        key: tuple[Any, ...] | None = None
        if array.size <= _SHARED_CONSTANT:
            key = (array.dtype.str, array.shape, array.tobytes())
            found = self._consts.get(key)
            if found is not None:
                return found
        name = f"{self._leaf.path}#c" if self._leaf is not None else "%const"
        produced = self.op("Constant", [], {"value": numpy_helper.from_array(array)}, name=name)[0]
        if key is not None:
            self._consts[key] = produced
            self._const_keys[produced] = key
        return produced

    def cast(self, value: str, to: str, source: str | None = None) -> str:
        """``value`` as dtype ``to`` (a format dtype name); nothing is added when ``source`` is ``to``."""
        if source == to:
            return value
        return self.op1("Cast", [value], {"to": ONNX_DTYPES[to]})

    def shape(self, value: str, start: int | None = None, end: int | None = None) -> str:
        """The int64 shape of ``value`` (axes ``start`` … ``end`` − 1 when given)."""
        return self.op1("Shape", [value], {"start": start, "end": end})

    def int64s(self, slot: str) -> str:
        """A setting that may hold sizes, as an int64 tensor: a list (``[{"size": "batch"}, -1, 64]``)
        becomes a 1-D tensor, a number or a size a 0-d one. Numbers are constants; a size is
        computed from the model inputs' shapes (``Shape``, ``Gather`` and integer arithmetic for
        ``+ - * // %``, ``min``, ``max`` and unary ``-``); inside a function, each symbol it reads is
        an input of the function."""
        leaf = self._current()
        entry = leaf.parameters.get(slot)
        if entry is None:
            raise LoweringError(f"{leaf.node.op}: slot {slot!r} is absent", node_id=leaf.node.id)
        value = entry.value
        if isinstance(value, SizeExpr):
            return self.op1("Reshape", [self.size(value), self.const(np.zeros(0, np.int64))])
        if isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
            raise LoweringError(f"{leaf.node.op}: slot {slot!r} holds no integers: {value!r}", node_id=leaf.node.id)
        if isinstance(value, int):
            return self.const(np.asarray(value, np.int64))
        parts: list[str] = []
        run: list[int] = []
        for item in value:
            if isinstance(item, SizeExpr):
                if run:
                    parts.append(self.const(np.asarray(run, np.int64)))
                    run = []
                parts.append(self.size(item))
            elif isinstance(item, int) and not isinstance(item, bool):
                run.append(item)
            else:
                raise LoweringError(
                    f"{leaf.node.op}: slot {slot!r} holds {item!r} where an integer or a size belongs",
                    node_id=leaf.node.id,
                )
        if run or not parts:
            parts.append(self.const(np.asarray(run, np.int64)))
        return parts[0] if len(parts) == 1 else self.op1("Concat", parts, {"axis": 0})

    def size(self, expr: SizeExpr) -> str:
        """A size as an int64 tensor of shape ``[1]``, computed from the symbols' sizes."""
        found = self._sizes.get(expr.text)
        if found is None:
            found = self._sizes[expr.text] = self._size_tree(expr._tree, expr.text)
        return found

    def symbol(self, name: str) -> str:
        """A symbol's size, an int64 tensor of shape ``[1]``: read from the shape of the first model
        input whose fact names it, or, in a function, the function's input ``size.<name>``."""
        found = self._symbols.get(name)
        if found is not None:
            return found
        if self.scope is not None:
            found = self._fresh_value(f"size.{name}")
            self._symbol_inputs.append(name)
            self._symbol_input_names.append(found)
        else:
            found = self._builder.read_symbol(self, name)
        self._symbols[name] = found
        return found

    # --- internals --------------------------------------------------------------------------------

    def _current(self) -> _Leaf:
        if self._leaf is None:
            raise LoweringError("this Emitter method is for a lowering's emit, while a node is lowered")
        return self._leaf

    def _tensor_value(self, slot: str) -> Tensor:
        leaf = self._current()
        entry = leaf.parameters.get(slot)
        if entry is None or not isinstance(entry.value, Tensor):
            raise LoweringError(f"{leaf.node.op}: slot {slot!r} holds no tensor", node_id=leaf.node.id)
        return entry.value

    def _tensor_at(self, path: str, slot: str) -> str:
        """The value of the tensor of slot ``slot`` of the node at ``path`` (relative to this body)."""
        key = (path, slot)
        found = self._tensors.get(key)
        if found is not None:
            return found
        if self.scope is None:
            found = self._builder.initializer(path, slot)
        else:
            found = self._fresh_value(f"{path}.{slot}")
            self._tensor_inputs.append(key)
            self._tensor_input_names.append(found)
        self._tensors[key] = found
        return found

    def _next_name(self) -> str:
        leaf = self._current()
        name = leaf.path if leaf.count == 0 else f"{leaf.path}#{leaf.count}"
        leaf.count += 1
        return name

    def _fresh_node(self, name: str) -> str:
        return _fresh(name, self._node_names, "#")

    def _fresh_value(self, name: str) -> str:
        return _fresh(name, self._value_names, "~")

    def _reserve(self, names: Sequence[str]) -> None:
        self._value_names.update(names)

    def _relative(self, node_id: str) -> str:
        return node_id if self.scope is None else node_id[len(self.scope) + 1 :]

    def _begin(self, node: Node, parameters: Mapping[str, Parameter]) -> None:
        self._leaf = _Leaf(node, self._relative(node.id), parameters, 0, len(self._nodes))

    def _end(self, outputs: Mapping[str, str]) -> dict[str, str]:
        """Name the leaf's outputs ``<path>.<output>`` where its own nodes produced them."""
        leaf = self._current()
        self._leaf = None
        mine = self._nodes[leaf.first :]
        made = {value for proto in mine for value in proto.output}
        renamed: dict[str, str] = {}
        result: dict[str, str] = {}
        for output, value in outputs.items():
            if value in made and value not in renamed:
                new = self._fresh_value(f"{leaf.path}.{output}")
                renamed[value] = new
            result[output] = renamed.get(value, value)
        if renamed:
            for proto in mine:
                for k, value in enumerate(proto.input):
                    if value in renamed:
                        proto.input[k] = renamed[value]
                for k, value in enumerate(proto.output):
                    if value in renamed:
                        proto.output[k] = renamed[value]
            for old, new in renamed.items():
                self._produced.discard(old)
                self._value_names.discard(old)
                self._produced.add(new)
            for old, new in renamed.items():
                key = self._const_keys.pop(old, None)
                if key is not None:
                    self._consts[key] = new
                    self._const_keys[new] = key
        return result

    def _size_tree(self, tree: Any, text: str) -> str:
        """One node of a size expression's tree (:mod:`trama.format._sizes`), as ``[1]`` int64."""
        if isinstance(tree, (bool, float)):
            raise LoweringError(f"size {text!r}: only integer sizes are lowered", node_id=self.node_id)
        if isinstance(tree, int):
            return self.const(np.asarray([tree], np.int64))
        operator = tree[0]
        if operator == "sym":
            return self.symbol(tree[1])
        values = [self._size_tree(each, text) for each in tree[1:]]
        if operator == "neg":
            return self.op1("Neg", values)
        if operator in ("min", "max"):
            return values[0] if len(values) == 1 else self.op1(operator.capitalize(), values)
        a, b = values
        simple = {"+": "Add", "-": "Sub", "*": "Mul"}
        if operator in simple:
            return self.op1(simple[operator], [a, b])
        if operator == "%":
            return self.op1("Mod", [a, b], {"fmod": 0})  # Python's modulo: the sign of the divisor
        if operator == "//":  # Python's floor division: (a − a mod b) / b is exact
            return self.op1("Div", [self.op1("Sub", [a, self.op1("Mod", [a, b], {"fmod": 0})]), b])
        raise LoweringError(f"size {text!r}: {operator!r} is not lowered (sizes are integers)", node_id=self.node_id)


def _fresh(name: str, taken: set[str], separator: str) -> str:
    """``name``, or ``name<separator>k`` for the first ``k`` not in ``taken``; added to ``taken``."""
    candidate, k = name, 1
    while candidate in taken:
        candidate = f"{name}{separator}{k}"
        k += 1
    taken.add(candidate)
    return candidate


def _array(value: Any, dtype: str | None) -> np.ndarray:
    from trama.format import numpy_dtype

    if dtype is not None:
        return np.asarray(value, dtype=numpy_dtype(dtype))
    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(value)
    if isinstance(value, bool):
        return np.asarray(value, np.bool_)
    if isinstance(value, int):
        return np.asarray(value, np.int64)
    if isinstance(value, float):
        return np.asarray(value, np.float32)
    array = np.asarray(value)
    if array.dtype.kind == "f":
        return array.astype(np.float32)
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    return array


# --- the builder ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Function:
    """A built local function: what each call passes, in order."""

    name: str
    ports: list[str]
    outputs: list[str]
    tensors: list[tuple[str, str]]
    symbols: list[str]
    proto: onnx.FunctionProto


class _Builder:
    """One lowering: the expanded nodes, the shape facts, the functions and the initializers."""

    def __init__(self, model: Model, registry: OpRegistry, facts: ShapeFacts, *, functions: bool, opset: int) -> None:
        self.model = model
        self.registry = registry
        self.facts = facts
        self.functions_on = functions
        self.opset = opset
        self.nodes, self.origin = expand_calls(model)
        self.by_id = {node.id: node for node in self.nodes}
        self.children = children_by_parent(self.nodes)
        self.initializers: dict[str, onnx.TensorProto] = {}
        self.functions: dict[str, _Function] = {}
        self.function_order: list[_Function] = []
        self._function_names: set[str] = set()
        self._lowerings: dict[str, Lowering] = {}
        self.digests: dict[str, str] = {}

    # --- checks and factories -----------------------------------------------------------------

    def check_lowerings(self) -> None:
        """One error for the first leaf whose op has no lowering, naming every op that has none."""
        missing: dict[str, list[str]] = {}
        for node in self.nodes:
            if node.output_bindings is not None:
                continue
            spec = self.registry.get(node.op)
            if spec is None or spec.factory is None:
                missing.setdefault(node.op, []).append(node.id)
        if not missing:
            return
        (op, ids), *_others = missing.items()
        count = sum(len(found) for found in missing.values()) - 1
        extra = ""
        if count:
            ops = ", ".join(sorted(missing))
            verb = "does" if count == 1 else "do"
            extra = f" (nor {verb} {count} other node{'s' if count > 1 else ''}; ops without a lowering: {ops})"
        raise LoweringError(
            f"op {op!r} has no ONNX lowering{extra}; an op pack lowers its ops by registering lowering factories for "
            f"the framework 'onnx' (trama_op_implementations)",
            node_id=ids[0],
        )

    def lowering(self, node: Node) -> Lowering:
        found = self._lowerings.get(node.id)
        if found is not None:
            return found
        spec = self.registry[node.op]
        parameters = {slot: self.model.parameters[key] for slot, key in node.parameters.items()}
        factory = spec.factory
        build = getattr(factory, "from_node", factory)
        token = _BINDING.set(self.facts.binding)
        try:
            with _failures(node):
                lowering = build(node, children={}, parameters=parameters)
        finally:
            _BINDING.reset(token)
        if not isinstance(lowering, Lowering):
            raise LoweringError(
                f"the ONNX lowering factory of {node.op} returned {type(lowering).__name__}, not a Lowering",
                node_id=node.id,
            )
        self._lowerings[node.id] = lowering
        return lowering

    # --- values ---------------------------------------------------------------------------------

    def initializer(self, node_id: str, slot: str) -> str:
        """The initializer of the tensor entry that ``node_id``'s slot names (its entry's name)."""
        entry_name = self.by_id[node_id].parameters[slot]
        if entry_name not in self.initializers:
            value = self.model.parameters[entry_name].value
            assert isinstance(value, Tensor)
            self.initializers[entry_name] = numpy_helper.from_array(np.asarray(value), entry_name)
        return entry_name

    def read_symbol(self, g: Emitter, symbol: str) -> str:
        """``[1]`` int64: the size of the first input axis the facts name ``symbol``."""
        for name, fact in zip(self.model.inputs, self.model.input_facts or (), strict=False):
            if fact is None or fact.shape is None:
                continue
            for axis, size in enumerate(fact.shape):
                if size == symbol:
                    return g.op("Shape", [name], {"start": axis, "end": axis + 1}, name=f"%size.{symbol}")[0]
        raise LoweringError(f"a size reads the symbol {symbol!r}, which no input's facts name")

    # --- bodies ---------------------------------------------------------------------------------

    def emit_scope(self, g: Emitter, scope: str | None, ports: Mapping[str, str]) -> Callable[[Ref], str | None]:
        """Emit the children of ``scope`` (``None``: the top level) in an order that puts producers
        first; composites become calls of their functions. Returns how a reference of the scope
        resolves to a value (``None`` for one that has none: a Python value)."""
        values: dict[tuple[str, str], str] = {}
        absent: set[tuple[str, str]] = set()

        def resolve(ref: Ref) -> str | None:
            if ref.node == INPUT:
                return ports.get(ref.output)
            return values.get((ref.node, ref.output))

        for child in _ordered(self.children.get(scope, [])):
            inputs: dict[str, str] = {}
            for port, ref in child.inputs.items():
                value = resolve(ref)
                if value is None:
                    raise LoweringError(
                        f"{child.op}: input {port!r} reads {ref}, which has no ONNX value ({_what(self, ref, absent)})",
                        node_id=child.id,
                    )
                inputs[port] = value
            produced = self.call(g, child, inputs) if child.output_bindings is not None else self.leaf(g, child, inputs)
            for output in child.outputs:
                if output in produced:
                    values[(child.id, output)] = produced[output]
                else:
                    absent.add((child.id, output))
        return resolve

    def leaf(self, g: Emitter, node: Node, inputs: Mapping[str, str]) -> dict[str, str]:
        lowering = self.lowering(node)
        g._begin(node, lowering.parameters)
        try:
            with _failures(node):
                produced = dict(lowering.emit(g, inputs))
            unknown = sorted(set(produced) - set(node.outputs))
            if unknown:
                raise LoweringError(f"the lowering of {node.op} gave outputs {unknown} the node does not have")
        except LoweringError as error:
            g._leaf = None
            if error.node_id is None:
                error.node_id = node.id
            raise
        return g._end(produced)

    def call(self, g: Emitter, node: Node, inputs: Mapping[str, str]) -> dict[str, str]:
        """A composite: a call of its function, or, without functions, its leaves inlined."""
        if not self.functions_on:
            resolve = self.emit_scope(g, node.id, inputs)
            bound: dict[str, str] = {}
            for output, ref in (node.output_bindings or {}).items():
                value = resolve(ref)
                if value is not None:
                    bound[output] = value
            return bound
        function = self.function(node)
        path = g._relative(node.id)
        arguments = [inputs[port] for port in function.ports]
        arguments += [g._tensor_at(f"{path}.{inner}", slot) for inner, slot in function.tensors]
        arguments += [g.symbol(symbol) for symbol in function.symbols]
        name = g._fresh_node(path)
        results = [g._fresh_value(f"{path}.{output}") for output in function.outputs]
        g._nodes.append(helper.make_node(function.name, arguments, results, name=name, domain=FUNCTION_DOMAIN))
        g._produced.update(results)
        g._domains[FUNCTION_DOMAIN] = 1
        return dict(zip(function.outputs, results, strict=True))

    def function(self, node: Node) -> _Function:
        """The function of ``node``'s structure, built from ``node`` the first time."""
        digest = self.digests[node.id]
        found = self.functions.get(digest)
        if found is not None:
            return found
        g = Emitter(self, node.id)
        ports = list(node.inputs)
        names = [g._fresh_value(port) for port in ports]
        g._port_inputs = names
        resolve = self.emit_scope(g, node.id, dict(zip(ports, names, strict=True)))
        outputs: list[str] = []
        exposed: list[str] = []
        for output in node.outputs:
            ref = (node.output_bindings or {})[output]
            value = resolve(ref)
            if value is None:
                raise LoweringError(
                    f"output {output!r} of this {node.op} is bound to {ref}, which has no ONNX value", node_id=node.id
                )
            if value not in g._produced or value in exposed:
                value = g.op("Identity", [value], name=f"%{output}")[0]
            outputs.append(output)
            exposed.append(value)
        inputs = [*names, *g._tensor_input_names, *g._symbol_input_names]
        name = self._function_name(node)
        opsets = [
            helper.make_opsetid("", self.opset),
            *(helper.make_opsetid(d, v) for d, v in sorted(g._domains.items())),
        ]
        proto = helper.make_function(FUNCTION_DOMAIN, name, inputs, exposed, g._nodes, opsets)
        function = _Function(name, ports, outputs, list(g._tensor_inputs), list(g._symbol_inputs), proto)
        self.functions[digest] = function
        self.function_order.append(function)
        return function

    def _function_name(self, node: Node) -> str:
        source = self.by_id.get(self.origin.get(node.id, node.id), node)
        cls = (source.metadata or {}).get("class")
        base = cls.rpartition(".")[2] if isinstance(cls, str) and cls else node.op.rpartition(".")[2]
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "Composite"
        name, k = base, 2
        while name in self._function_names:
            name = f"{base}_{k}"
            k += 1
        self._function_names.add(name)
        return name

    def build_functions(self) -> None:
        """Every composite's function, deepest first, so that no body waits for another."""
        if not self.functions_on:
            return
        self.digests = structure_digests(self.model, self.nodes, self.children, self.facts, self.origin)
        composites = [node for node in self.nodes if node.output_bindings is not None]
        composites.sort(key=lambda node: -node.id.count("."))
        for node in composites:
            self.function(node)


def _ordered(kids: Sequence[Node]) -> list[Node]:
    """Siblings with every producer before its consumers, document order kept where it allows."""
    ids = {kid.id for kid in kids}
    pending = {
        kid.id: {ref.node for ref in kid.inputs.values() if ref.node in ids and ref.node != kid.id} for kid in kids
    }
    if all(not needs for needs in pending.values()):
        return list(kids)
    done: set[str] = set()
    order: list[Node] = []
    remaining = list(kids)
    while remaining:
        ready = [kid for kid in remaining if pending[kid.id] <= done]
        if not ready:  # a cycle: validation refuses it; keep document order
            order.extend(remaining)
            break
        first = ready[0]
        order.append(first)
        done.add(first.id)
        remaining.remove(first)
    return order


def _what(builder: _Builder, ref: Ref, absent: set[tuple[str, str]]) -> str:
    if ref.node == INPUT:
        return "the enclosing scope gives no tensor there"
    node = builder.by_id.get(ref.node)
    if (ref.node, ref.output) in absent and node is not None:
        return f"{node.op} {ref.node} gives no tensor there (a Python value such as a string or null)"
    return "it is not computed before it is read"


@contextlib.contextmanager
def _failures(node: Node) -> Iterator[None]:
    """Anything a lowering raises is one :class:`LoweringError` naming the node and its op."""
    try:
        yield
    except LoweringError as error:
        if error.node_id is None:
            error.node_id = node.id
        raise
    except TramaError as error:
        raise LoweringError(f"{node.op} cannot be lowered: {error.message}", node_id=node.id) from error
    except Exception as error:
        raise LoweringError(f"lowering {node.op} failed: {type(error).__name__}: {error}", node_id=node.id) from error


# --- the model --------------------------------------------------------------------------------


def lower(
    model: Model,
    *,
    inputs: Mapping[str, Any] | None = None,
    functions: bool = True,
    opset: int = DEFAULT_OPSET,
    external_data: str | None = None,
    check: bool = True,
) -> onnx.ModelProto:
    """``model`` as an ONNX model (see the module's documentation).

    The graph inputs take their dtype and shape from the input facts. A document whose facts do not
    give both for every input is lowered for ``inputs`` (arrays by input name), each input of the
    dtype and fixed shape it has there; without them it is a :class:`LoweringError`.

    ``functions=False`` inlines every composite. ``opset`` is the default domain's version
    (:data:`DEFAULT_OPSET`). ``external_data`` marks every initializer of 1 KiB or more to be saved
    in that file (a path relative to the model's): ``onnx.save_model(proto, path)`` writes them
    there. ``check`` runs ``onnx.checker.check_model`` on the result (not for models over 2 GB).

    A model output that is a Python value (a ``constant``'s number, string or null) is no output of
    the ONNX graph: it has no ONNX form (the onnxruntime runtime returns it as it is).

    Raises :class:`LoweringError` naming the node and its op for a node that cannot be lowered, and
    the document's own validation errors.
    """
    return lowered(
        model, inputs=inputs, functions=functions, opset=opset, external_data=external_data, check=check
    ).proto


@dataclass(frozen=True, slots=True)
class Lowered:
    """A lowered model and what the runtime needs besides: the shape pass's facts, and which model
    output each graph output is (the others are Python values, in ``static``)."""

    proto: onnx.ModelProto
    facts: ShapeFacts
    outputs: tuple[int, ...]
    static: Mapping[int, Any]
    builder: Any


def lowered(
    model: Model,
    *,
    inputs: Mapping[str, Any] | None = None,
    functions: bool = True,
    opset: int = DEFAULT_OPSET,
    external_data: str | None = None,
    check: bool = True,
) -> Lowered:
    """:func:`lower`, with what the runtime needs besides the model (:class:`Lowered`)."""
    from trama.extension import registry as framework_registry
    from trama.format import validate

    onnx_registry = framework_registry("onnx")
    validate(model, onnx_registry)
    complete = facts_complete(model)
    if not complete and inputs is None:
        raise LoweringError(
            "the input facts do not give every input's dtype and shape: pass example inputs (lower(model, "
            "inputs={...})) to lower the document for inputs of their dtypes and shapes"
        )
    builder = _Builder(model, onnx_registry, ShapeFacts(), functions=functions, opset=opset)
    builder.check_lowerings()
    example = None if complete else _named_arrays(model, inputs or {})
    builder.facts = shape_pass(model, example)
    if example is not None and isinstance(builder.facts.error, ExecutionError):
        raise builder.facts.error  # the inputs given do not run: the reference says why, naming the node
    builder.build_functions()
    main = Emitter(builder, None)
    main._reserve([*model.inputs, *model.parameters])
    graph_inputs = [_input_value(model, k, name, example) for k, name in enumerate(model.inputs)]
    resolve = builder.emit_scope(main, None, {name: name for name in model.inputs})
    graph_outputs: list[onnx.ValueInfoProto] = []
    exposed: set[str] = set()
    indices: list[int] = []
    static: dict[int, Any] = {}
    for index, ref in enumerate(model.outputs):
        is_static, value_of = builder.facts.static_output(index)
        if is_static:
            static[index] = value_of  # a Python value: the runtime returns it as it is
            continue
        value = resolve(ref)
        if value is None:
            raise LoweringError(f"model output {index} ({ref}) has no ONNX value")
        if value not in main._produced or value in exposed:
            value = main.op("Identity", [value], name=f"%output.{index}")[0]
        exposed.add(value)
        indices.append(index)
        graph_outputs.append(_output_value(model, builder, index, ref, value))
    graph = helper.make_graph(
        main._nodes, _graph_name(model), graph_inputs, graph_outputs, list(builder.initializers.values())
    )
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, v) for d, v in sorted(main._domains.items()))]
    for function in builder.function_order:
        for imported in function.proto.opset_import:
            if imported.domain and all(o.domain != imported.domain for o in opsets):
                opsets.append(helper.make_opsetid(imported.domain, imported.version))
    if builder.function_order and all(o.domain != FUNCTION_DOMAIN for o in opsets):
        opsets.append(helper.make_opsetid(FUNCTION_DOMAIN, 1))
    proto = helper.make_model(
        graph,
        opset_imports=opsets,
        functions=[function.proto for function in builder.function_order],
        producer_name="trama-onnx",
        producer_version=_version(),
    )
    proto.ir_version = max(8, helper.find_min_ir_version_for(list(proto.opset_import), ignore_unknown=True))
    if check and graph_outputs and proto.ByteSize() < 2**31 - 2**20:
        try:
            onnx.checker.check_model(proto)
        except onnx.checker.ValidationError as error:
            raise LoweringError(f"the lowered model is not valid ONNX: {error}") from error
    if external_data is not None:
        from onnx.external_data_helper import convert_model_to_external_data

        convert_model_to_external_data(proto, all_tensors_to_one_file=True, location=external_data, size_threshold=1024)
    return Lowered(proto, builder.facts, tuple(indices), static, builder)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("trama-onnx")
    except Exception:  # pragma: no cover - not installed as a distribution
        return ""


def _graph_name(model: Model) -> str:
    roots = [node for node in model.nodes if node.parent is None]
    return roots[0].id if len(roots) == 1 else "trama"


def facts_complete(model: Model) -> bool:
    """Whether the input facts give every input's dtype and shape."""
    facts = model.input_facts or []
    if len(facts) < len(model.inputs):
        return not model.inputs
    return all(fact is not None and fact.dtype is not None and fact.shape is not None for fact in facts)


def _named_arrays(model: Model, inputs: Mapping[str, Any]) -> dict[str, Any]:
    missing = [name for name in model.inputs if name not in inputs]
    if missing:
        raise LoweringError(f"the example inputs lack {missing}")
    arrays: dict[str, Any] = {}
    for name in model.inputs:
        value = inputs[name]
        detach = getattr(value, "detach", None)
        if callable(detach):
            value = detach().cpu().numpy()
        arrays[name] = np.asarray(value) if not isinstance(value, np.ndarray) else value
    return arrays


def _input_value(model: Model, index: int, name: str, example: Mapping[str, Any] | None) -> onnx.ValueInfoProto:
    fact = (model.input_facts or [None] * len(model.inputs))[index] if model.input_facts else None
    if example is not None:
        array = example[name]
        from trama.execution import dtype_of

        dtype = dtype_of(array)
        if dtype not in ONNX_DTYPES:
            raise LoweringError(f"input {name!r} is of dtype {array.dtype}, which ONNX does not take")
        return helper.make_tensor_value_info(name, ONNX_DTYPES[dtype], list(array.shape))
    assert fact is not None
    assert fact.dtype is not None
    assert fact.shape is not None
    if fact.dtype not in ONNX_DTYPES:
        raise LoweringError(f"input {name!r} is of dtype {fact.dtype}, which ONNX does not take")
    return helper.make_tensor_value_info(name, ONNX_DTYPES[fact.dtype], list(fact.shape))


def _output_value(model: Model, builder: _Builder, index: int, ref: Ref, value: str) -> onnx.ValueInfoProto:
    fact: ValueFact | None = None
    if model.output_facts and index < len(model.output_facts):
        fact = model.output_facts[index]
    seen = _seen(builder, ref)
    dtype = fact.dtype if fact is not None and fact.dtype is not None else (seen.dtype if seen else None)
    shape: list[int | str | None] | None = None
    if fact is not None and fact.shape is not None:
        shape = list(fact.shape)
    elif seen is not None:
        shape = list(seen.shape)
    if dtype is None:
        return helper.make_empty_tensor_value_info(value)
    if dtype not in ONNX_DTYPES:
        raise LoweringError(f"model output {index} ({ref}) is of dtype {dtype}, which ONNX does not take")
    return helper.make_tensor_value_info(value, ONNX_DTYPES[dtype], shape)


def _seen(builder: _Builder, ref: Ref) -> ValueInfo | None:
    """What the shape pass saw at a model output (followed through composite bindings)."""
    for _ in range(len(builder.nodes) + 1):
        if ref.node == INPUT:
            return None
        node = builder.by_id.get(ref.node)
        if node is None:
            return None
        if node.output_bindings is None:
            return builder.facts.outputs.get(node.id, {}).get(ref.output)
        bound = node.output_bindings.get(ref.output)
        if bound is None:
            return None
        if bound.node == INPUT:  # the composite's port: what the scope outside gives it
            outer = node.inputs.get(bound.output)
            if outer is None:
                return None
            ref = outer
        else:
            ref = bound
    return None
