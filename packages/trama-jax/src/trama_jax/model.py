"""Imported trama documents as pure JAX functions: parameters as a pytree, wiring walked at trace time.

``trama.import_model(doc, registry=trama.registry("jax"))`` builds one :class:`JaxModule` per
node: a :class:`JaxLeaf` around each leaf's :class:`~trama_jax.kernel.JaxKernel`, a
:class:`JaxComposite` for each composite, from its children. Every module, the root included,
is a whole model of its subtree:

* ``module.params`` is a dict keyed by the document's parameter-table entry names, with one JAX
  array per *learnable* floating tensor entry. An entry shared by two slots (tied weights) is
  one leaf of the pytree, looked up by both, so its gradient sums both uses.
  Non-learnable tensors (running statistics, frozen weights, tensor constants) are
  ``module.buffers``: they are never differentiated, and they stay concrete while ``jax.jit``
  traces, so a constant bool mask can still index.
* ``module.apply(params, *inputs)`` is a pure function of its arguments: the wiring is walked in
  Python while JAX traces, each leaf's kernel is called with its tensors looked up by entry
  name, and ``jax.jit`` sees one function, compiled as one XLA program. ``jax.grad`` accepts it.
* ``module(*inputs)`` runs it with its own ``params``; assigning ``module.params`` after a
  training step changes what it computes and what it exports.
* ``trama.export_model(module, inputs=..., outputs=...)`` (through :meth:`JaxModule.to_node`)
  and :meth:`JaxModule.to_model` give the document back with the current values, its structure,
  entry names and dtypes unchanged.

A calling node (``Node.calls``) gets, from the importer, the very object built for its target,
so its parent's walk simply calls that object again on the caller's inputs: the parameters are
the same entries, and so the same pytree leaves.

The runtimes build the same modules from the whole document (:func:`build`), which also gives
them the document's own inputs, outputs and metadata, and every calling node's wiring.
"""

from __future__ import annotations

import contextlib
import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from trama import (
    ExecutionError,
    ImportModelError,
    Model,
    Node,
    NodeFragment,
    Param,
    Parameter,
    Ref,
    Tensor,
    TramaError,
)
from trama._deprecated import warn_deprecated
from trama.catalog._limits import MAX_TENSOR_BYTES, extent_problem
from trama.conversion import ExportContext, SizedNode, build_node
from trama.conversion._importer import build_order
from trama.execution import bound_sizes, current_sizes, describe_failure, sizes_of_top_node
from trama.format import INPUT, OpRegistry, children_by_parent
from trama.format._calls import check_expansion
from trama.format._lazy import is_tensor
from trama_jax._registry import implements
from trama_jax.kernel import JaxKernel

__all__ = [
    "Evaluation",
    "JaxComposite",
    "JaxLeaf",
    "JaxModule",
    "JaxProgram",
    "Member",
    "as_module",
    "build",
    "build_composite",
    "export_jax_object",
]

#: Parameters as JAX sees them: entry name -> array.
Params = dict[str, jax.Array]


# --- Evaluation -----------------------------------------------------------------------------


class Evaluation:
    """One run of a tree of modules: the tensors by entry name, and the recurrent states by the
    path of the node that owns them (``None``: no streaming, recurrent ops start from zeros).

    Modules call :meth:`module` for each child, which a runtime overrides to run a subtree as a
    separately compiled function on another device, or to time it."""

    __slots__ = ("states", "tensors")

    def __init__(self, tensors: Mapping[str, Any], states: dict[str, Any] | None = None) -> None:
        self.tensors = tensors
        self.states = states

    def module(self, module: JaxModule, path: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs of ``module`` run as the node at ``path`` on ``inputs`` (by port)."""
        return module.compute(self, path, inputs)

    def descends(self, module: JaxComposite, path: str) -> bool:
        """Whether the walk of a scope runs the composite ``module`` (at ``path``) child by child
        itself, rather than through :meth:`module`. A walk descends iteratively, so a deep tree
        costs no recursion; an evaluation that runs some composites another way (a placed
        subtree, compiled for its device) says no for those."""
        return True


# --- Modules --------------------------------------------------------------------------------


class JaxModule(ABC):
    """A node of an imported document as a JAX computation; see the module's docstring.

    Subclasses say how they compute (:meth:`compute`) and which leaves they contain; this base
    class holds what every module offers: its parameters and buffers, ``apply``, calling,
    exporting.
    """

    def __init__(self, node: Node, parameters: Mapping[str, Parameter]) -> None:
        #: The node this module was built from (for a called module, its target's node).
        self.node = node
        #: The node's table entries by slot (slots sharing an entry hold the same object).
        self.parameters = dict(parameters)
        #: The document this module is the single top-level node of, when it is known (:func:`build`,
        #: or a composite root built by ``trama.import_model``); :meth:`to_model` then keeps its
        #: metadata and inputs.
        self.document: Model | None = None
        self._params: Params | None = None
        self._buffers: Params | None = None
        self._tensor_entries: dict[str, Parameter] | None = None

    # The computation ------------------------------------------------------------------------

    @abstractmethod
    def compute(self, evaluation: Evaluation, path: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs by name, for the inputs by port, with ``evaluation``'s tensors."""

    @abstractmethod
    def leaves(self) -> Iterator[JaxLeaf]:
        """Every leaf of the subtree (a called module once per call)."""

    @abstractmethod
    def stateful_paths(self, path: str) -> Iterator[tuple[str, JaxLeaf]]:
        """The paths of the recurrent leaves under ``path`` (each call has its own), with them."""

    @property
    def input_names(self) -> list[str]:
        """The ports ``apply`` takes positionally, in order: the node's connected ports."""
        return list(self.node.inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self.node.outputs)

    # Parameters -----------------------------------------------------------------------------

    def tensor_entries(self) -> dict[str, Parameter]:
        """The table entries the subtree's kernels take at call time, by entry name."""
        if self._tensor_entries is None:
            entries: dict[str, Parameter] = {}
            for leaf in self.leaves():
                for slot in leaf.kernel.tensor_slots:
                    entries.setdefault(leaf.node.parameters[slot], leaf.parameters[slot])
            self._tensor_entries = entries
        return self._tensor_entries

    @property
    def params(self) -> Params:
        """The learnable floating tensors, by entry name: what ``jax.grad`` differentiates."""
        if self._params is None:
            self._params = {name: _array(entry) for name, entry in self.tensor_entries().items() if _trainable(entry)}
        return self._params

    @params.setter
    def params(self, params: Mapping[str, Any]) -> None:
        self._params = self._checked(params)

    def _checked(self, params: Mapping[str, Any]) -> Params:
        """``params`` as JAX arrays, refused unless they are exactly the learnable entries."""
        expected = {name for name, entry in self.tensor_entries().items() if _trainable(entry)}
        if set(params) != expected:
            missing, unknown = sorted(expected - set(params)), sorted(set(params) - expected)
            raise ExecutionError(
                f"params must have exactly the learnable entries of {self.node.id!r}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unknown {unknown}" if unknown else ""),
                node_id=self.node.id,
            )
        return {name: jnp.asarray(value) for name, value in params.items()}

    @property
    def buffers(self) -> Params:
        """The other tensors the kernels take (running statistics, frozen weights, constants)."""
        if self._buffers is None:
            self._buffers = {
                name: _array(entry) for name, entry in self.tensor_entries().items() if not _trainable(entry)
            }
        return self._buffers

    # Running --------------------------------------------------------------------------------

    def apply(self, params: Mapping[str, Any], *inputs: Any, **named: Any) -> Any:
        """The outputs for ``inputs`` (positional in :attr:`input_names` order, or by port
        name) with ``params``: one value, or a tuple when the node has several outputs. Pure:
        ``jax.jit(module.apply)`` and ``jax.grad`` accept it."""
        return self._run(Evaluation({**self.buffers, **params}), inputs, named)

    def apply_with_state(
        self, params: Mapping[str, Any], states: Mapping[str, Any], *inputs: Any, **named: Any
    ) -> tuple[Any, dict[str, Any]]:
        """Like :meth:`apply`, continuing recurrent ops from ``states`` (by node path, as
        :meth:`initial_states` gives them); returns the outputs and the new states. Pure too."""
        evaluation = Evaluation({**self.buffers, **params}, dict(states))
        return self._run(evaluation, inputs, named), evaluation.states or {}

    def _run(self, evaluation: Evaluation, inputs: Sequence[Any], named: Mapping[str, Any]) -> Any:
        """Bind the inputs, run, and shape the result: one value, or a tuple in output order.
        The document's top module called on its own binds the input sizes its nodes read."""
        ports = _bind(self.input_names, inputs, named, self.node.id)
        document = getattr(self, "document", None)
        sizes = (
            None if document is None or current_sizes() is not None else sizes_of_top_node(document, self.node, ports)
        )
        with contextlib.nullcontext() if sizes is None else bound_sizes(sizes):
            outputs = evaluation.module(self, self.node.id, ports)
        names = self.output_names
        return outputs[names[0]] if len(names) == 1 else tuple(outputs[name] for name in names)

    def initial_states(self) -> dict[str, Any]:
        """Every recurrent leaf's state before any input, by path."""
        return {path: _initial_state(leaf) for path, leaf in self.stateful_paths(self.node.id)}

    def __call__(self, *inputs: Any, **named: Any) -> Any:
        return self.apply(self.params, *inputs, **named)

    # Exporting ------------------------------------------------------------------------------

    def to_node(self, ctx: ExportContext) -> NodeFragment:
        """This module's node with its current parameter values (the :class:`trama.ExportableOp`
        protocol, so that ``trama.export_model(module, ...)`` works)."""
        ctx.record_framework("jax", jax.__version__)
        return _Export(self.params, self.buffers).fragment(self, ctx)

    def to_model(self, params: Mapping[str, Any] | None = None) -> Model:
        """The document this module computes, with ``params`` (default: its own) as the values of
        the learnable entries: the same nodes, entry names, learnable flags and dtypes.

        A program, or the single top-level module of a document (built by :func:`build` or by
        ``trama.import_model``), gives its document back, metadata, inputs, outputs and facts
        included. Any other module (a child, or a leaf at the top) is exported as the single
        top-level node, its connected ports as the model's inputs and its outputs as the model's,
        and the metadata says only who produced it."""
        values = self.params if params is None else self._checked(params)
        if self.document is not None:
            return _with_values(self.document, values)
        from trama.conversion import export_model

        root = self.node.id if "." not in self.node.id else self.node.name  # a top-level id
        exported = _Export(values, self.buffers).wrap(self)
        return export_model(exported, inputs=self.input_names, outputs=self.output_names, root=root)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.node.op} {self.node.id!r}>"


class JaxLeaf(JaxModule):
    """A leaf node: its kernel, and the table entries its slots name."""

    def __init__(self, node: Node, kernel: JaxKernel, parameters: Mapping[str, Parameter]) -> None:
        super().__init__(node, parameters)
        self.kernel = kernel

    def compute(self, evaluation: Evaluation, path: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        kernel, node = self.kernel, self.node
        held = {slot: evaluation.tensors[node.parameters[slot]] for slot in kernel.tensor_slots}
        try:
            states = evaluation.states
            if states is not None and kernel.step is not None:
                state = states[path] if path in states else _initial_state(self)
                outputs, states[path] = kernel.step(held, inputs, state)
            else:
                outputs = kernel.apply(held, inputs)
        except TramaError:
            raise
        except Exception as exc:
            raise ExecutionError(f"{node.op} failed: {describe_failure(exc)}", node_id=path) from exc
        missing = [name for name in node.outputs if name not in outputs]
        if missing:
            raise ExecutionError(f"the {node.op} kernel did not return {missing}", node_id=path)
        for name in node.outputs:
            problem = value_size_problem(outputs[name])
            if problem is not None:
                raise ExecutionError(f"{node.op} would make its output {name!r} {problem}", node_id=path)
        return outputs

    def leaves(self) -> Iterator[JaxLeaf]:
        yield self

    def stateful_paths(self, path: str) -> Iterator[tuple[str, JaxLeaf]]:
        if self.kernel.stateful:
            yield path, self


class JaxSizedLeaf(JaxLeaf):
    """A leaf whose settings depend on the input sizes: the leaf built for the sizes bound while
    the program is traced (:class:`trama.conversion.SizedNode`), so a program compiled for one
    input shape holds that shape's numbers."""

    def __init__(self, sized: SizedNode) -> None:
        tensors = tuple(slot for slot, entry in sized.parameters.items() if is_tensor(entry.value))
        super().__init__(sized.node, JaxKernel(_unbuilt, tensor_slots=tensors), sized.parameters)
        self.sized = sized

    def compute(self, evaluation: Evaluation, path: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        built = self.sized.current()
        if not isinstance(built, JaxLeaf):
            raise ImportModelError(
                f"the jax factory of leaf op {self.node.op!r} built a {type(built).__name__}, not a JaxLeaf",
                node_id=self.node.id,
            )
        return built.compute(evaluation, path, inputs)


def _unbuilt(tensors: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    raise ExecutionError("a leaf whose settings depend on the input sizes runs only with the sizes bound")


@dataclass(frozen=True, slots=True)
class Member:
    """One child of a composite as its parent's wiring sees it: the child's ``name``, the
    ``module`` computing it and the ``node`` wiring it. For a calling node, ``module`` is the
    target's (shared) module and ``node`` the caller's own, with the caller's inputs."""

    name: str
    module: JaxModule
    node: Node


class JaxComposite(JaxModule):
    """A composite node: its children, run in document order along its wiring.

    Every composite op means its wiring (``Sequential``, ``Graph``, ``TransformerEncoder``), so
    one class computes them all."""

    def __init__(self, node: Node, members: Sequence[Member], parameters: Mapping[str, Parameter]) -> None:
        super().__init__(node, parameters)
        self.members = list(members)

    @property
    def children(self) -> dict[str, JaxModule]:
        """The children by name, in document order (a called module under each of its names)."""
        return {member.name: member.module for member in self.members}

    def compute(self, evaluation: Evaluation, path: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        bindings = self.node.output_bindings or {}
        return walk(evaluation, path, self.members, inputs, bindings)

    def leaves(self) -> Iterator[JaxLeaf]:
        for _, leaf in _leaf_paths(self.members, ""):
            yield leaf

    def stateful_paths(self, path: str) -> Iterator[tuple[str, JaxLeaf]]:
        for leaf_path, leaf in _leaf_paths(self.members, f"{path}."):
            if leaf.kernel.stateful:
                yield leaf_path, leaf


def _leaf_paths(members: Sequence[Member], prefix: str) -> Iterator[tuple[str, JaxLeaf]]:
    """Every leaf under ``members`` in document order, with its path (``prefix`` + names), a
    called module once per call; iterative, so a deep tree costs no recursion. A module that is
    neither a leaf nor a :class:`JaxComposite` (an op pack's) lists its own leaves, under the
    path of the member holding it."""
    stack: list[tuple[str, JaxModule]] = [(f"{prefix}{member.name}", member.module) for member in reversed(members)]
    while stack:
        path, module = stack.pop()
        if isinstance(module, JaxLeaf):
            yield path, module
        elif isinstance(module, JaxComposite):
            stack.extend((f"{path}.{member.name}", member.module) for member in reversed(module.members))
        else:
            for leaf in module.leaves():
                yield path, leaf


class _Scope:
    """One scope being run by :func:`walk`: its members, the values computed so far, the next
    member to run."""

    __slots__ = ("bindings", "index", "inputs", "members", "path", "values")

    def __init__(
        self, path: str | None, members: Sequence[Member], inputs: Mapping[str, Any], bindings: Mapping[str, Ref]
    ) -> None:
        self.path = path
        self.members = members
        self.inputs = inputs
        self.bindings = bindings
        self.values: dict[str, Mapping[str, Any]] = {}
        self.index = 0

    def value(self, ref: Ref) -> Any:
        if ref.node != INPUT:
            return self.values[ref.node.rpartition(".")[2]][ref.output]
        if ref.output not in self.inputs:
            raise ExecutionError(f"reads its input {ref.output!r}, which is not connected", node_id=self.path)
        return self.inputs[ref.output]


def _descends(evaluation: Evaluation, module: JaxModule, path: str) -> bool:
    """Whether :func:`walk` runs ``module`` child by child: a :class:`JaxComposite` that computes
    by its wiring (a subclass with a ``compute`` of its own is called instead), where the
    evaluation lets it."""
    return (
        isinstance(module, JaxComposite)
        and type(module).compute is JaxComposite.compute
        and evaluation.descends(module, path)
    )


def walk(
    evaluation: Evaluation,
    path: str | None,
    members: Sequence[Member],
    inputs: Mapping[str, Any],
    bindings: Mapping[str, Ref],
) -> dict[str, Any]:
    """Run a scope: each member on the values its node's references name (``%input`` is
    ``inputs``, any other node an earlier sibling), then the values ``bindings`` name. ``path``
    is the scope's own (``None`` at the top level of a document).

    Composites inside are run on an explicit stack of scopes, not by recursion, so the Python
    stack (and a JAX trace) stays as deep for a tree 256 levels deep as for a flat one; leaves,
    and composites the evaluation runs its own way, go through :meth:`Evaluation.module`."""
    stack = [_Scope(path, members, inputs, bindings)]
    while True:
        scope = stack[-1]
        if scope.index < len(scope.members):
            member = scope.members[scope.index]
            child_inputs = {port: scope.value(ref) for port, ref in member.node.inputs.items()}
            child_path = member.name if scope.path is None else f"{scope.path}.{member.name}"
            module = member.module
            if _descends(evaluation, module, child_path):
                assert isinstance(module, JaxComposite)
                stack.append(_Scope(child_path, module.members, child_inputs, module.node.output_bindings or {}))
                continue
            scope.values[member.name] = evaluation.module(module, child_path, child_inputs)
            scope.index += 1
            continue
        outputs = {name: scope.value(ref) for name, ref in scope.bindings.items()}
        stack.pop()
        if not stack:
            return outputs
        parent = stack[-1]
        parent.values[parent.members[parent.index].name] = outputs
        parent.index += 1


class JaxProgram(JaxModule):
    """A whole document as one JAX function, for the runtimes: the top-level nodes run on the
    model's inputs, and ``apply`` returns the model's outputs, as a list in their order."""

    def __init__(self, model: Model, members: Sequence[Member]) -> None:
        super().__init__(Node("%model", "Graph", {name: Ref(INPUT, name) for name in model.inputs}), {})
        self.document = model
        self.members = list(members)
        self._outputs = {str(k): ref for k, ref in enumerate(model.outputs)}

    def compute(self, evaluation: Evaluation, path: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return walk(evaluation, None, self.members, inputs, self._outputs)

    @property
    def output_names(self) -> list[str]:
        return list(self._outputs)

    @property
    def bindings(self) -> dict[str, Ref]:
        """The model's outputs, by the names ``compute`` gives them (``"0"``, ``"1"``, …)."""
        return dict(self._outputs)

    def _run(self, evaluation: Evaluation, inputs: Sequence[Any], named: Mapping[str, Any]) -> list[Any]:
        outputs = evaluation.module(self, "", _bind(self.input_names, inputs, named, None))
        return [outputs[name] for name in self._outputs]

    def leaves(self) -> Iterator[JaxLeaf]:
        for _, leaf in _leaf_paths(self.members, ""):
            yield leaf

    def stateful_paths(self, path: str) -> Iterator[tuple[str, JaxLeaf]]:
        for leaf_path, leaf in _leaf_paths(self.members, ""):
            if leaf.kernel.stateful:
                yield leaf_path, leaf

    def initial_states(self) -> dict[str, Any]:
        return {path: _initial_state(leaf) for path, leaf in self.stateful_paths("")}

    def to_node(self, ctx: ExportContext) -> NodeFragment:
        raise TramaError("a whole document is not a node: export one of its top-level modules, or use to_model()")


# --- Building -------------------------------------------------------------------------------


def as_module(node: Node, built: Any, parameters: Mapping[str, Parameter]) -> Any:
    """What a jax factory built, as the registry hands it out: a :class:`JaxKernel` becomes a
    :class:`JaxLeaf` that knows its node and entries, so that a composite can wire it and collect
    its parameters; anything else (a composite module) comes back as it is."""
    return JaxLeaf(node, built, parameters) if isinstance(built, JaxKernel) else built


def bind_kernel(factory: Callable[..., Any]) -> Callable[..., Any]:
    """Deprecated since trama 0.4.0, removed in 0.5.0: ``factory`` wrapped so that the kernel it
    builds comes back as a :class:`JaxLeaf` (callable, with its node and entries), as trama 0.3's
    jax registry needed from a pack.

    The jax registry now adapts every jax factory itself, a pack's included (trama-jax's
    ``trama_factory_adapters``): register the factory that returns its :class:`JaxKernel` as it
    is. Wrapped anyway, it still works: the registry hands the module on unchanged."""
    warn_deprecated(
        "trama_jax.model.bind_kernel is deprecated since trama 0.4.0 and will be removed in 0.5.0: the jax "
        "registry now wraps every jax factory itself (trama_jax.plugin.as_jax_module, through the "
        "trama_factory_adapters hook), so register the factory that returns a trama_jax.JaxKernel as it is, "
        "and build a callable module for one node with trama.conversion.build_node(node, trama.registry('jax'), "
        "...); see docs/plugins.md, 'Migrating from 0.3 to 0.4'"
    )
    from trama_jax.plugin import as_jax_module  # the registry's own adapter: one way to wrap

    wrapped: Callable[..., Any] = as_jax_module(factory)
    return wrapped


def build(model: Model, registry: OpRegistry | None = None) -> JaxProgram:
    """The modules of a whole (valid) document, as a :class:`JaxProgram`.

    Unlike ``trama.import_model``, this sees the whole document, so a composite of any op runs by
    its wiring (no factory is needed for it), calling nodes get their own wiring, and the
    program keeps the document for :meth:`JaxModule.to_model`."""
    if registry is None:
        from trama.extension import registry as discovered

        registry = discovered("jax")
    check_expansion(model.nodes)  # tracing unrolls every call: the expansion is the cost
    children_of = children_by_parent(model.nodes)
    built: dict[str, JaxModule] = {}

    def members(scope: str | None) -> list[Member]:
        return [Member(child.name, built[child.calls or child.id], child) for child in children_of.get(scope, ())]

    # Leaves first, in document order (the first bad one is the one reported), then each
    # composite after its children and the targets its calling children call: no recursion,
    # however deep the tree.
    for node in model.nodes:
        if node.calls is None and node.output_bindings is None:
            parameters = {slot: model.parameters[key] for slot, key in node.parameters.items()}
            obj = build_node(node, registry, children={}, parameters=parameters, sized=JaxSizedLeaf)
            if not isinstance(obj, JaxLeaf):
                raise ImportModelError(
                    f"the jax factory of leaf op {node.op!r} built a {type(obj).__name__}, not a "
                    "trama_jax.JaxKernel (a leaf's jax factory returns JaxKernel(apply, tensor_slots=...))",
                    node_id=node.id,
                )
            built[node.id] = obj
    for node in build_order(model.nodes, children_of):
        if node.calls is None and node.output_bindings is not None:
            parameters = {slot: model.parameters[key] for slot, key in node.parameters.items()}
            built[node.id] = JaxComposite(node, members(node.id), parameters)

    program = JaxProgram(model, members(None))
    if len(program.members) == 1:
        program.members[0].module.document = model  # its to_model() is the whole document's
    return program


def build_composite(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> JaxComposite:
    """The import factory of a composite: the children as members, each wired by its node.

    trama-jax's own composites (``Sequential``, ``Graph``, ``TransformerEncoder``) use it, and so
    can an op pack's composite op whose meaning is its wiring: register it as the pack's JAX
    factory for that op.

    A calling child comes as its target's module, whose node is the target's, not the caller's:
    the caller's own node (its inputs) comes from ``children.nodes``, which
    ``trama.import_model`` passes along with the built objects (:class:`trama.Children`). The
    document's single top-level module also keeps ``children.model``, so that its
    :meth:`JaxModule.to_model` gives the whole document back, metadata included."""
    nodes = getattr(children, "nodes", None)
    if not isinstance(nodes, Mapping):
        raise ImportModelError(
            f"a {node.op} is built by trama.import_model, which gives it its children's nodes "
            "(children.nodes); this factory was called without them",
            node_id=node.id,
        )
    members: list[Member] = []
    for name, child in children.items():
        if not isinstance(child, JaxModule):
            raise ImportModelError(
                f"child {name!r} of {node.op} was not built by trama-jax ({type(child).__name__})", node_id=node.id
            )
        members.append(Member(name, child, nodes[name]))
    composite = JaxComposite(node, members, parameters)
    document = getattr(children, "model", None)
    if isinstance(document, Model) and node.parent is None and len(document.nodes) and _single_root(document):
        composite.document = document
    return composite


def _single_root(document: Model) -> bool:
    """Whether the document has one top-level node (so that node's module can stand for it)."""
    return sum(1 for node in document.nodes if node.parent is None) == 1


implements("Sequential", "Graph", "TransformerEncoder")(build_composite)


# --- Exporting ------------------------------------------------------------------------------


class _Export:
    """One export of a tree with given values. A module used in two places is handed to the
    export context as the same object both times, so that it becomes a node and a call."""

    def __init__(self, params: Mapping[str, Any], buffers: Mapping[str, Any]) -> None:
        self.values = {**buffers, **params}
        self._wrapped: dict[int, _Exported] = {}

    def wrap(self, module: JaxModule) -> _Exported:
        wrapped = self._wrapped.get(id(module))
        if wrapped is None:
            wrapped = self._wrapped[id(module)] = _Exported(self, module)
        return wrapped

    def fragment(self, module: JaxModule, ctx: ExportContext) -> NodeFragment:
        node = module.node
        parameters = {slot: self._param(node.parameters[slot], entry) for slot, entry in module.parameters.items()}
        if isinstance(module, JaxLeaf):
            return NodeFragment(node.op, outputs=list(node.outputs), parameters=parameters, metadata=node.metadata)
        if not isinstance(module, JaxComposite):
            raise TramaError(f"cannot export {module!r} as a node")
        refs: dict[str, dict[str, Ref]] = {}

        def here(ref: Ref) -> Ref:
            return ctx.input(ref.output) if ref.node == INPUT else refs[ref.node.rpartition(".")[2]][ref.output]

        for member in module.members:
            inputs = {port: here(ref) for port, ref in member.node.inputs.items()}
            refs[member.name] = ctx.child(member.name, self.wrap(member.module), inputs, member.node.outputs)
        bindings = {name: here(ref) for name, ref in (node.output_bindings or {}).items()}
        return NodeFragment(
            node.op, outputs=list(node.outputs), parameters=parameters, output_bindings=bindings, metadata=node.metadata
        )

    def _param(self, name: str, entry: Parameter) -> Param:
        """A slot's value as the export context takes it: the entry's name kept, its identity
        (the table entry object) deciding sharing, the current value in the entry's dtype."""
        value: Any = entry.value
        if name in self.values and isinstance(value, Tensor):
            value = _tensor_like(self.values[name], value)
        return Param(value, entry.learnable, key=entry, name=name)


class _Exported:
    """A module inside one export: it exports with that export's values."""

    def __init__(self, export: _Export, module: JaxModule) -> None:
        self._export = export
        self._module = module

    def to_node(self, ctx: ExportContext) -> NodeFragment:
        return self._export.fragment(self._module, ctx)


def export_jax_object(obj: Any, ctx: ExportContext) -> NodeFragment | None:
    """The plugin's exporter: a trama-jax module exports itself; anything else is declined."""
    return obj.to_node(ctx) if isinstance(obj, JaxModule) else None


def _with_values(document: Model, values: Mapping[str, Any]) -> Model:
    """A copy of ``document`` whose entries named in ``values`` hold those values, in their own
    dtypes; everything else (nodes, other entries, metadata, facts) is shared or copied as is."""
    table = {
        name: Parameter(_tensor_like(values[name], entry.value), entry.learnable)
        if name in values and isinstance(entry.value, Tensor)
        else entry
        for name, entry in document.parameters.items()
    }
    return Model(
        inputs=list(document.inputs),
        outputs=list(document.outputs),
        nodes=copy.deepcopy(document.nodes),
        parameters=table,
        metadata=copy.deepcopy(document.metadata),
        opsets=dict(document.opsets),
        input_facts=copy.deepcopy(document.input_facts),
        output_facts=copy.deepcopy(document.output_facts),
    )


# --- Helpers --------------------------------------------------------------------------------


def value_size_problem(value: Any) -> str | None:
    """Why a value a kernel made (a traced one, whose shape is known before XLA compiles
    anything) is refused: more than :data:`~trama.catalog._limits.MAX_TENSOR_BYTES`. XLA aborts
    the process on a shape whose byte size overflows 64 bits, so such a value must never reach
    it; one merely too large for this machine fails later, as an error. ``None`` when it fits
    (or has no shape: a Python number, a tuple of values is checked element by element)."""
    if isinstance(value, tuple | list):
        return next((p for p in map(value_size_problem, value) if p is not None), None)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        return None
    problem = extent_problem(shape, itemsize, limit=MAX_TENSOR_BYTES)
    return None if problem is None else f"with {problem}"


def _trainable(entry: Parameter) -> bool:
    """Whether an entry is a parameter JAX differentiates: learnable, and floating (a gradient of
    an integer tensor does not exist)."""
    value = entry.value
    return entry.learnable and isinstance(value, Tensor) and np.issubdtype(np.asarray(value).dtype, np.inexact)


def _array(entry: Parameter) -> jax.Array:
    return jnp.asarray(np.asarray(entry.value))


def _tensor_like(value: Any, original: Any) -> Tensor:
    """``value`` as a tensor of ``original``'s dtype and shape (JAX may hold a float64 entry as
    float32; the document keeps its dtype)."""
    array = np.asarray(jax.device_get(value)).astype(np.asarray(original).dtype)
    if array.shape != tuple(original.shape):
        raise TramaError(f"a value of shape {list(array.shape)} cannot replace one of shape {list(original.shape)}")
    return Tensor.from_array(array)


def _initial_state(leaf: JaxLeaf) -> Any:
    initial = leaf.kernel.initial_state
    return initial() if initial is not None else None


def _bind(names: Sequence[str], inputs: Sequence[Any], named: Mapping[str, Any], node_id: str | None) -> dict[str, Any]:
    """Inputs given positionally (in ``names`` order) or by name, as a dict by name."""
    if len(inputs) > len(names):
        raise ExecutionError(f"takes {len(names)} input(s) {names}, got {len(inputs)}", node_id=node_id)
    bound = dict(zip(names, inputs, strict=False))
    twice = sorted(set(bound) & set(named))
    unknown = sorted(set(named) - set(names))
    bound.update(named)
    missing = [name for name in names if name not in bound]
    if twice or unknown or missing:
        raise ExecutionError(
            f"inputs must be exactly {names}"
            + (f"; given twice {twice}" if twice else "")
            + (f"; unknown {unknown}" if unknown else "")
            + (f"; missing {missing}" if missing else ""),
            node_id=node_id,
        )
    return bound
