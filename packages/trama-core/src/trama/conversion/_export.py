"""Turning a tree of framework objects into a :class:`~trama.Model`.

Export walks the object tree top-down. Each object describes its own node through
``to_node(ctx)`` (the :class:`~trama.ExportableOp` protocol) or through an exporter registered in
the :class:`~trama.OpRegistry`; composites export their children with ``ctx.child(...)`` and
bind their outputs to the references it returns. The context owns naming and sharing, so that
one weight object used by two modules becomes a single table entry, and one module object used
in two places becomes one node and a *calling node* to it (``docs/format.md``, "Calling nodes").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from trama.conversion._protocols import NodeFragment, Param
from trama.errors import ExportError, TramaError
from trama.format._model import INPUT, Model, Node, Parameter, Ref, ValueFact
from trama.format._names import MAX_NODE_DEPTH
from trama.format._sizes import SizeExpr, SymbolRange
from trama.format._specs import OpRegistry
from trama.format._stack import StackRoom
from trama.format._tensor import Tensor
from trama.version import __version__

__all__ = ["ExportContext", "export_model"]


class _ExportSession:
    """State shared by every context of one export: nodes, table, sharing keys."""

    def __init__(self, registry: OpRegistry | None) -> None:
        self.registry = registry
        self.nodes: list[Node | None] = []
        self.parameters: dict[str, Parameter] = {}
        # id(key) -> (key, entry name); the key is kept alive so its id cannot be reused.
        self.shared: dict[int, tuple[Any, str]] = {}
        # id(object) -> (object, node id) for every object exported so far, kept alive likewise.
        self.exported: dict[int, tuple[Any, str]] = {}
        # Finished nodes by id, for calls to find their target.
        self.by_id: dict[str, Node] = {}
        # The nodes being exported now, outermost first (the ancestors of the next node), with
        # their objects' ids: an object among them that is exported again contains itself.
        self.active: list[tuple[str, int]] = []
        # The frameworks exporters recorded, outermost object's first: name -> version.
        self.frameworks: dict[str, str] = {}
        # What the caller gave for capturing the root object by running it (export_model's
        # example_inputs and dynamic_shapes), and the facts an exporter learnt while capturing.
        self.root = ""
        self.example_inputs: tuple[Any, ...] | dict[str, Any] | None = None
        self.dynamic_shapes: dict[str, dict[int, str]] | None = None
        self.facts: tuple[list[ValueFact | None] | None, list[ValueFact | None] | None] = (None, None)
        self.symbols: dict[str, SymbolRange] | None = None
        # The model's inputs, in order: the caller's, with any the root exporter replaced
        # (ExportContext.replace_input) by the inputs that stand for it.
        self.inputs: list[str] = []
        self.replaced: dict[str, list[str]] = {}
        # Room on the stack for the exporters' recursion, while export_model runs.
        self.room: StackRoom | None = None

    def add(self, slot: int, node: Node) -> None:
        """Put a finished node in its reserved place."""
        self.nodes[slot] = node
        self.by_id[node.id] = node

    def entry(self, default_name: str, value: Any) -> str:
        """Add (or find) the table entry for one slot value and return its name."""
        param = value if isinstance(value, Param) else Param(value)
        key = param.key if param.key is not None else _identity_key(param.value)
        if key is not None and id(key) in self.shared:
            return self.shared[id(key)][1]
        converted = _to_parameter_value(param.value, default_name)
        if param.name is not None:
            existing = self.parameters.get(param.name)
            if existing is not None:
                if existing != Parameter(converted, param.learnable):
                    raise ExportError(f"parameter name {param.name!r} is used for two different values")
                return param.name
            name = param.name
        else:
            name = self._unique(default_name)
        self.parameters[name] = Parameter(converted, param.learnable)
        if key is not None:
            self.shared[id(key)] = (key, name)
        return name

    def _unique(self, name: str) -> str:
        candidate, n = name, 1
        while candidate in self.parameters:
            candidate, n = f"{name}_{n}", n + 1
        return candidate


def _identity_key(value: Any) -> Any:
    """Arrays share by identity; scalars never do (small ints are interned by Python)."""
    if isinstance(value, (np.ndarray, Tensor)) or hasattr(value, "__array__"):
        return value
    return None


def _to_parameter_value(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str, Tensor, SizeExpr)):
        return value
    if isinstance(value, int):
        return int(value)  # an IntEnum reads back as a plain int: store that, so the round trip is equal
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExportError(f"parameter {where!r} is {value}; JSON has no such number, store it as a 0-d tensor")
        return float(value)  # numpy.float64 is a float subclass; it reads back as a plain float
    if isinstance(value, (list, tuple)):
        return [_to_parameter_value(item, where) for item in value]
    if isinstance(value, (np.generic, np.ndarray)) or hasattr(value, "__array__"):
        try:
            return Tensor.from_array(value)
        except TramaError as exc:
            raise ExportError(f"parameter {where!r}: {exc.message}") from None
    raise ExportError(
        f"parameter {where!r} has a value of type {type(value).__name__}, which the format cannot "
        "store (tensors, bool, int, float, str, None, sizes (trama.SizeExpr) and lists of them are allowed)"
    )


class ExportContext:
    """What an object being exported sees: its node id, its inputs, and how to add children.

    ``inputs`` holds the references the parent wired into this node; ``output_names`` holds the
    outputs the parent asked for (or ``None`` to let the object decide).
    """

    def __init__(
        self,
        session: _ExportSession,
        node_id: str,
        inputs: Mapping[str, Ref],
        output_names: list[str] | None,
    ) -> None:
        self._session = session
        self.node_id = node_id
        self.inputs: dict[str, Ref] = dict(inputs)
        self.output_names = output_names

    @property
    def registry(self) -> OpRegistry | None:
        return self._session.registry

    def input(self, name: str) -> Ref:
        """Reference to one of this node's own inputs, for use inside a composite."""
        if name not in self.inputs:
            raise ExportError(f"{self.node_id} has no input {name!r} (it has {sorted(self.inputs)})")
        return Ref(INPUT, name)

    def child(
        self,
        name: str,
        obj: Any,
        inputs: Mapping[str, Ref],
        outputs: Iterable[str] | None = None,
    ) -> dict[str, Ref]:
        """Export ``obj`` as the child ``name`` of this node and return refs to its outputs.

        ``inputs`` maps the child's input ports to refs in this scope (``ctx.input("x")`` or an
        earlier child's output). Children must be added in an order where every reference
        points to an earlier child.

        An object this export has already exported (the same object, by identity) becomes a
        calling node to the node it was exported as (:meth:`call`), so ``Sequential(l, relu, l)``
        gives ``root.2`` calling ``root.0``: one module, run twice. That needs the same
        connected ports and outputs as the first use; where they differ, the object is
        exported again instead (a node of its own, sharing its parameter entries). An object
        that is one of this node's ancestors (a module containing itself) is an
        :class:`~trama.ExportError`.
        """
        node_id = f"{self.node_id}.{name}"
        wanted = list(outputs) if outputs is not None else None
        session = self._session
        for ancestor, key in session.active:
            if key == id(obj):
                raise ExportError(
                    f"{type(obj).__qualname__} at {node_id!r} is the object being exported at {ancestor!r}, "
                    "one of its ancestors: a module cannot contain itself",
                    node_id=node_id,
                )
        earlier = self.exported(obj)
        if earlier is not None:
            target = session.by_id[earlier]
            if set(inputs) == set(target.inputs) and (wanted is None or wanted == target.outputs):
                return self.call(name, earlier, inputs)
        return _export_object(session, obj, node_id, inputs, wanted)

    def claimed(self, obj: Any, *, before: Callable[..., Any] | None = None) -> bool:
        """Whether one of this export's exporters would handle ``obj``, asked in priority order
        up to (not including) ``before``; nothing is added to this export.

        A capturing exporter asks this of each object it meets inside the one it captures, so
        that a pack's exporter for a class (another library's included) wins there as it does
        when the object is handed to :meth:`child`. An exporter answers cheaply through a
        ``claims(obj) -> bool`` attribute where it has one; otherwise it is called on a scratch
        context of its own, and a fragment or a trama error (it claims the object but cannot
        export it here) counts as handling it; any other exception does not."""
        registry = self._session.registry
        for exporter in registry.exporters if registry is not None else ():
            if exporter is before:
                return False
            claims = getattr(exporter, "claims", None)
            try:
                if callable(claims):
                    if claims(obj):
                        return True
                    continue
                scratch = _ExportSession(registry)
                if exporter(obj, ExportContext(scratch, self.node_id, self.inputs, None)) is not None:
                    return True
            except TramaError:
                return True
            except Exception:  # a defect of that exporter: the real export names it if it matters
                continue
        return False

    def call(
        self,
        name: str,
        target: str,
        inputs: Mapping[str, Ref],
        outputs: Iterable[str] | None = None,
    ) -> dict[str, Ref]:
        """Add the child ``name`` as a call of the node ``target`` and return refs to its outputs.

        The calling node computes what ``target`` computes, on ``inputs`` (refs in this scope,
        as for :meth:`child`, connecting the same ports as the target). Its op and outputs are
        the target's; ``outputs``, when given, must equal them. The target must have been
        exported already, anywhere in the tree, and must not be this node or one of its
        ancestors (a call cannot recurse). A target that is itself a call is followed to the
        node it calls.
        """
        session = self._session
        node_id = f"{self.node_id}.{name}"
        _level(node_id)
        if any(active == target for active, _ in session.active):
            raise ExportError(
                f"{node_id!r} cannot call {target!r}: that node is being exported and would contain its own "
                "call (a call cannot recurse)",
                node_id=node_id,
            )
        node = session.by_id.get(target)
        if node is None:
            raise ExportError(
                f"{node_id!r} calls {target!r}, which has not been exported (a call's target must be exported first)",
                node_id=node_id,
            )
        if node.calls is not None:
            node = session.by_id[node.calls]
        wanted = list(outputs) if outputs is not None else None
        if wanted is not None and wanted != node.outputs:
            raise ExportError(
                f"{node_id!r} asks for outputs {wanted}, but {node.id!r}, which it calls, has {node.outputs}",
                node_id=node_id,
            )
        if set(inputs) != set(node.inputs):
            raise ExportError(
                f"{node_id!r} connects ports {sorted(inputs)}, but {node.id!r}, which it calls, connects "
                f"{sorted(node.inputs)}",
                node_id=node_id,
            )
        session.nodes.append(None)
        session.add(
            len(session.nodes) - 1,
            Node(node_id, node.op, dict(inputs), list(node.outputs), {}, None, None, calls=node.id),
        )
        return {output: Ref(node_id, output) for output in node.outputs}

    def exported(self, obj: Any) -> str | None:
        """The id of the node ``obj`` (this very object) was exported as earlier in this export,
        or ``None``. Objects still being exported (this node and its ancestors) are not there yet."""
        found = self._session.exported.get(id(obj))
        return found[1] if found is not None else None

    @property
    def example_inputs(self) -> tuple[Any, ...] | dict[str, Any] | None:
        """The example inputs given to :func:`export_model`, for the root object only (``None``
        for every other node, and when none were given): a tuple in the order of the model's
        inputs, or a dict keyed by input names. An exporter that captures by running the object
        (trama-torch's, on ``torch.export``) calls it with them."""
        return self._session.example_inputs if self.node_id == self._session.root else None

    @property
    def dynamic_shapes(self) -> dict[str, dict[int, str]] | None:
        """``{input name: {axis: symbol}}``: the sizes the caller wants kept symbolic, for the
        root object only (see :attr:`example_inputs`)."""
        return self._session.dynamic_shapes if self.node_id == self._session.root else None

    def record_facts(
        self,
        inputs: list[ValueFact | None] | None = None,
        outputs: list[ValueFact | None] | None = None,
        symbols: Mapping[str, SymbolRange] | None = None,
    ) -> None:
        """Facts about the model's inputs and outputs that the exporter learnt (the shapes and
        dtypes of a capture, with symbols for dynamic sizes, and the range of each symbol where
        the capture bounds it); the facts given to :func:`export_model` take precedence."""
        self._session.facts = (inputs, outputs)
        self._session.symbols = dict(symbols) if symbols else None

    def replace_input(self, name: str, replacements: Sequence[str]) -> list[Ref]:
        """Make the model input ``name`` several inputs of the document, ``replacements``, in its
        place, and return refs to them (in this, the root's, scope); for the root object only.

        The format's values are tensors and tuples; a framework input that is something else
        (a dict of tensors, as transformers models take ``batch``) cannot be one input, but its
        tensors can. The document's inputs, the root node's ports and the input facts an
        exporter records (:meth:`record_facts`) are then the replacements, in this order, where
        ``name`` was; :attr:`example_inputs` and :attr:`dynamic_shapes` stay keyed by the
        caller's names. Each replacement must be a valid name (``[A-Za-z0-9_]+``) not taken by
        another model input, and ``name`` must be one of the model inputs (an input is
        replaced once).
        """
        from trama.format._validation import NAME  # local: validation imports the model layer

        session = self._session
        if self.node_id != session.root:
            raise ExportError(
                f"{self.node_id!r} asks to replace the model input {name!r}: only the root object "
                f"({session.root!r}) can replace model inputs",
                node_id=self.node_id,
            )
        if name not in session.inputs:
            earlier = session.replaced.get(name)
            why = f"it was already replaced by {earlier}" if earlier is not None else f"they are {session.inputs}"
            raise ExportError(
                f"cannot replace {name!r}: it is not one of the model inputs ({why})", node_id=self.node_id
            )
        if isinstance(replacements, str):
            raise ExportError(
                f"replace_input({name!r}, ...) needs a list of names, got the string {replacements!r}",
                node_id=self.node_id,
            )
        new = list(replacements)
        if not new:
            raise ExportError(f"cannot replace the model input {name!r} by no inputs", node_id=self.node_id)
        others = set(session.inputs) - {name}
        seen: set[str] = set()
        for each in new:
            if not isinstance(each, str) or NAME.match(each) is None:
                raise ExportError(
                    f"cannot replace the model input {name!r} by {each!r}: an input name is one or more of "
                    "[A-Za-z0-9_]",
                    node_id=self.node_id,
                )
            if each in others or each in seen:
                raise ExportError(
                    f"cannot replace the model input {name!r} by {new}: {each!r} would name two model inputs",
                    node_id=self.node_id,
                )
            seen.add(each)
        at = session.inputs.index(name)
        session.inputs[at : at + 1] = new
        session.replaced[name] = new
        refs = [Ref(INPUT, each) for each in new]
        ports: dict[str, Ref] = {}
        for port, ref in self.inputs.items():
            ports.update(zip(new, refs, strict=True) if port == name else [(port, ref)])
        self.inputs = ports
        return refs

    def record_framework(self, name: str, version: str) -> None:
        """Say which framework the object being exported belongs to (``"torch"``, ``"2.13.0"``).

        :func:`export_model` writes the first framework recorded, the outermost object's, as the
        document's ``metadata.framework``, which is what ``trama.import_model(doc)`` without a
        registry imports with. Exporters of framework objects call this; a pack whose objects
        are plain Python need not."""
        if not isinstance(name, str) or not name or not isinstance(version, str):
            raise ExportError(
                f"record_framework needs a framework name and a version string, got {name!r}, {version!r}"
            )
        self._session.frameworks.setdefault(name, version)

    def parameter(self, value: Any, *, slot: str) -> str:
        """Add a value to the table now and return its entry name (rarely needed: values in
        ``NodeFragment.parameters`` are added automatically)."""
        return self._session.entry(f"{self.node_id}.{slot}", value)


def _level(node_id: str) -> int:
    """How deep ``node_id`` nests (1 at the top); an ExportError past what a document may."""
    level = node_id.count(".") + 1
    if level > MAX_NODE_DEPTH:
        raise ExportError(
            f"the object tree nests deeper than {MAX_NODE_DEPTH} levels, the most a document may "
            "(docs/format.md, section 7)",
            node_id=node_id,
        )
    return level


def _fragment_for(obj: Any, ctx: ExportContext) -> NodeFragment:
    to_node = getattr(obj, "to_node", None)
    if callable(to_node):
        fragment = to_node(ctx)
    else:
        fragment = None
        registry = ctx.registry
        # An exporter that fails with a trama error has claimed the object and says why it cannot
        # export it. Any other exception is a defect of that exporter: it must not keep the
        # next exporters (other packs' objects) from being asked, so it is remembered, and named
        # only if no exporter handles the object.
        broken: list[str] = []
        for exporter in registry.exporters if registry is not None else ():
            try:
                fragment = exporter(obj, ctx)
            except TramaError:
                raise
            except Exception as error:  # a defect of that exporter: named below if nothing handles obj
                broken.append(f"{_callable_name(exporter)} raised {type(error).__name__}: {error}")
                continue
            if fragment is not None:
                break
        if fragment is None:
            because = f"; exporters that failed on it: {'; '.join(broken)}" if broken else ""
            raise ExportError(
                f"cannot export {type(obj).__module__}.{type(obj).__qualname__} at "
                f"{ctx.node_id!r}: it has no to_node method (trama.ExportableOp) and no "
                "registered exporter handles it; implement to_node, or register an exporter "
                f"through the plugin hooks{because}",
                node_id=ctx.node_id,
            )
    if not isinstance(fragment, NodeFragment):
        raise ExportError(
            f"to_node of {type(obj).__qualname__} returned {type(fragment).__name__}, expected trama.NodeFragment",
            node_id=ctx.node_id,
        )
    return fragment


def _callable_name(function: Any) -> str:
    module = getattr(function, "__module__", None) or "?"
    name = getattr(function, "__qualname__", None) or type(function).__qualname__
    return f"{module}.{name}"


def _export_object(
    session: _ExportSession,
    obj: Any,
    node_id: str,
    inputs: Mapping[str, Ref],
    output_names: list[str] | None,
) -> dict[str, Ref]:
    level = _level(node_id)
    if session.room is not None:
        session.room.at_level(level)
    slot = len(session.nodes)
    session.nodes.append(None)  # the parent comes before its children: reserve its place
    ctx = ExportContext(session, node_id, inputs, output_names)
    session.active.append((node_id, id(obj)))
    try:
        fragment = _fragment_for(obj, ctx)
    finally:
        session.active.pop()
    outputs = list(fragment.outputs if fragment.outputs is not None else output_names or [])
    if output_names is not None and outputs != output_names:
        raise ExportError(
            f"{type(obj).__qualname__} declares outputs {outputs} but {output_names} were asked for",
            node_id=node_id,
        )
    parameters = {
        slot_name: session.entry(f"{node_id}.{slot_name}", value) for slot_name, value in fragment.parameters.items()
    }
    session.add(
        slot,
        Node(
            id=node_id,
            op=fragment.op,
            inputs=dict(fragment.inputs if fragment.inputs is not None else ctx.inputs),
            outputs=outputs,
            parameters=parameters,
            output_bindings=dict(fragment.output_bindings) if fragment.output_bindings is not None else None,
            metadata=fragment.metadata,
        ),
    )
    session.exported.setdefault(id(obj), (obj, node_id))
    return {name: Ref(node_id, name) for name in outputs}


def export_model(
    module: Any,
    *,
    inputs: list[str],
    outputs: list[str],
    registry: OpRegistry | None = None,
    root: str = "root",
    metadata: Mapping[str, Any] | None = None,
    input_facts: list[ValueFact | None] | None = None,
    output_facts: list[ValueFact | None] | None = None,
    opsets: Mapping[str, int] | None = None,
    example_inputs: Sequence[Any] | Mapping[str, Any] | None = None,
    dynamic_shapes: Mapping[str, Mapping[int, str]] | None = None,
) -> Model:
    """Export ``module`` as the top-level node ``root`` of a new model.

    ``example_inputs`` — a tuple in the order of ``inputs``, or a dict keyed by names in
    ``inputs`` (keyword arguments, as transformers models take ``input_ids=``) — lets an exporter
    capture ``module`` by running it (trama-torch captures through ``torch.export``);
    ``dynamic_shapes`` (``{"tokens": {0: "batch", 1: "seq"}}``) names the sizes to keep symbolic.

    The model's inputs feed the root's ports of the same names (an input the root's exporter
    replaced, :meth:`ExportContext.replace_input`, by the inputs standing for it); its outputs
    are the root's outputs named in ``outputs``. The registry's exporters handle objects without ``to_node``,
    and the result is checked against its specs. Without ``registry``, the discovered one
    (:func:`trama.registry`: every installed plugin's specs and exporters) is used, and ops it
    does not know are left unchecked. The result is always structurally valid: a broken
    exporter is reported here, not when the file is read back. Unless ``opsets`` is given, the
    document records the opset version of each installed namespace its ops use. The metadata
    names the framework the exported objects belong to, as their exporter recorded it
    (:meth:`ExportContext.record_framework`), so that ``trama.import_model(doc)`` imports with it;
    ``metadata`` given here is merged over that.
    """
    from trama.extension._plugins import plugin_host
    from trama.format._validation import validate  # local: validation imports the model layer only

    discovered = registry is None
    if registry is None:
        registry = plugin_host().registry(None)
    session = _ExportSession(registry)
    session.root = root
    session.example_inputs = _checked_examples(example_inputs, inputs)
    session.dynamic_shapes = _checked_dynamic_shapes(dynamic_shapes, inputs)
    session.inputs = list(inputs)
    with StackRoom(MAX_NODE_DEPTH) as session.room:  # exporters recurse, a few frames per level
        _export_object(session, module, root, {name: Ref(INPUT, name) for name in inputs}, list(outputs))
    session.room = None
    captured_inputs, captured_outputs = session.facts
    if input_facts is not None and session.replaced and len(input_facts) != len(session.inputs):
        raise ExportError(
            f"input_facts gives {len(input_facts)} facts, but the exporter replaced "
            + ", ".join(f"{old!r} by {new}" for old, new in session.replaced.items())
            + f", so the model's inputs are {session.inputs}: give one fact for each"
        )
    input_facts = input_facts if input_facts is not None else captured_inputs
    output_facts = output_facts if output_facts is not None else captured_outputs
    nodes = [node for node in session.nodes if node is not None]
    _rename_clashing_parameters(nodes, session.parameters)
    producer: dict[str, Any] = {"producer": {"name": "trama", "version": __version__}}
    if session.frameworks:
        name, version = next(iter(session.frameworks.items()))
        producer["framework"] = {"name": name, "version": version}
    model = Model(
        inputs=list(session.inputs),
        outputs=[Ref(root, name) for name in outputs],
        nodes=nodes,
        parameters=session.parameters,
        metadata={**producer, **(metadata or {})},
        opsets=dict(opsets) if opsets is not None else _opsets_used(nodes, plugin_host().opsets(), registry),
        input_facts=input_facts,
        output_facts=output_facts,
        symbols=session.symbols,
        source_format_version=None,
    )
    try:
        validate(model, registry=registry, allow_unknown_ops=discovered)
    except TramaError as exc:
        raise ExportError(f"the exported model is not valid: {exc}", node_id=exc.node_id) from exc
    return model


def _checked_examples(
    examples: Sequence[Any] | Mapping[str, Any] | None, inputs: list[str]
) -> tuple[Any, ...] | dict[str, Any] | None:
    """``example_inputs`` as a tuple (one per input, in order) or a dict of known input names."""
    if examples is None:
        return None
    if isinstance(examples, Mapping):
        unknown = [name for name in examples if name not in inputs]
        if unknown:
            raise ExportError(f"example_inputs names {unknown}, which are not among the inputs {inputs}")
        return dict(examples)
    if isinstance(examples, (str, bytes)) or not isinstance(examples, Sequence):
        raise ExportError(
            f"example_inputs must be a tuple (one value per input, in the order of {inputs}) or a dict "
            f"keyed by input names, got {type(examples).__name__}"
        )
    if len(examples) != len(inputs):
        raise ExportError(f"example_inputs has {len(examples)} values, but there are {len(inputs)} inputs {inputs}")
    return tuple(examples)


def _checked_dynamic_shapes(
    dynamic: Mapping[str, Mapping[int, str]] | None, inputs: list[str]
) -> dict[str, dict[int, str]] | None:
    """``dynamic_shapes`` checked: known input names, axes as ints ≥ 0, symbols as identifiers."""
    if dynamic is None:
        return None
    if not isinstance(dynamic, Mapping):
        raise ExportError(f"dynamic_shapes must map input names to {{axis: symbol}}, got {type(dynamic).__name__}")
    checked: dict[str, dict[int, str]] = {}
    for name, axes in dynamic.items():
        if name not in inputs:
            raise ExportError(f"dynamic_shapes names {name!r}, which is not among the inputs {inputs}")
        if not isinstance(axes, Mapping):
            raise ExportError(f"dynamic_shapes[{name!r}] must map axes to symbols, got {type(axes).__name__}")
        for axis, symbol in axes.items():
            if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
                raise ExportError(f"dynamic_shapes[{name!r}]: axis {axis!r} is not an int ≥ 0")
            if not isinstance(symbol, str) or not symbol.isidentifier():
                raise ExportError(f"dynamic_shapes[{name!r}][{axis}]: symbol {symbol!r} is not an identifier")
        checked[name] = dict(axes)
    return checked


def _opsets_used(nodes: list[Node], known: Mapping[str, int], registry: OpRegistry) -> dict[str, int]:
    """The opset each installed namespace the nodes' ops belong to needs: the highest ``since``
    of the ops used (so a document of opset-1 ops still reads as opset 1 once opset 2 exists),
    or the installed version where an op does not say when it came."""
    from trama.format._specs import op_namespace

    needed: dict[str, int] = {}
    for node in nodes:
        namespace = op_namespace(node.op)
        if namespace not in known:
            continue
        spec = registry.get(node.op)
        since = spec.since if spec is not None and spec.since is not None else known[namespace]
        needed[namespace] = max(needed.get(namespace, 0), min(since, known[namespace]))
    return dict(sorted(needed.items()))


def _rename_clashing_parameters(nodes: list[Node], table: dict[str, Parameter]) -> None:
    """Parameter names must not equal node ids; rename the few automatic names that do."""
    node_ids = {node.id for node in nodes}
    clashes = [name for name in table if name in node_ids]
    if not clashes:
        return
    renames: dict[str, str] = {}
    for name in clashes:
        candidate, n = f"{name}_param", 1
        while candidate in table or candidate in node_ids or candidate in renames.values():
            candidate, n = f"{name}_param{n}", n + 1
        renames[name] = candidate
    items = [(renames.get(k, k), v) for k, v in table.items()]
    table.clear()
    table.update(items)
    for node in nodes:
        node.parameters = {s: renames.get(k, k) for s, k in node.parameters.items()}
