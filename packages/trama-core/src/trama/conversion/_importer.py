"""Turning a validated :class:`~trama.Model` back into runtime objects through a registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trama.catalog._checkers import checking
from trama.conversion._sized import SizedNode, is_sized
from trama.errors import ImportModelError, RegistryError, TramaError
from trama.format._calls import check_expansion
from trama.format._model import Model, Node, Parameter, children_by_parent
from trama.format._specs import OpRegistry, OpSpec
from trama.format._validation import validate

__all__ = ["Children", "build_node", "build_order", "import_model"]


class Children(dict[str, Any]):
    """What a factory receives as ``children``: the built children by name, in document order.

    It is a plain dict of objects, as the factory contract has always said, and also carries
    what a composite needs to rebuild its wiring: ``nodes``, the children's own :class:`Node`
    objects by the same names (a calling child's node says which inputs it reads and whom it
    calls, which the built object cannot), and ``model``, the document being imported (``None``
    when a factory is called outside :func:`import_model`), for its metadata and facts.
    """

    __slots__ = ("model", "nodes")

    def __init__(
        self,
        built: Mapping[str, Any] | None = None,
        nodes: Mapping[str, Node] | None = None,
        model: Model | None = None,
    ) -> None:
        super().__init__(built or {})
        self.nodes: dict[str, Node] = dict(nodes or {})
        self.model = model


def import_model(
    model: Model, *, registry: OpRegistry | None = None, sized: Callable[[SizedNode], Any] | None = None
) -> Any:
    """Build the objects a document describes, children before parents.

    Every node's op must have a spec with a ``factory`` in ``registry``. Slots that share a
    table entry receive the same :class:`~trama.Parameter` object. Returns the object of the
    single top-level node; a document with several top-level nodes returns a dict of them by
    id, in document order. Without ``registry``, the discovered one (:func:`trama.registry`)
    of the framework the document's metadata names is used, numpy when it names none.

    A calling node builds nothing (no factory is called for it): its object is the very object
    built for the node it calls, so a parent's factory may receive one object under two names
    (``children`` stays in document order; identity tells the names apart from two equal
    modules), and a module used twice comes back as one module used twice. The target is built
    before every node that needs it, wherever it is in the document.
    """
    if registry is None:
        from trama.extension._plugins import registry as discovered

        registry = discovered(_framework_of(model))
    validate(model, registry)
    check_expansion(model.nodes)  # a model used twice runs twice: the expansion is the cost
    table: dict[str, Parameter] = model.parameters
    children_of = children_by_parent(model.nodes)
    built: dict[str, Any] = {}
    for node in build_order(model.nodes, children_of):
        if node.calls is not None:
            built[node.id] = built[node.calls]
            continue
        kids = children_of.get(node.id, ())
        built[node.id] = build_node(
            node,
            registry,
            children=Children(
                {child.name: built[child.id] for child in kids}, {child.name: child for child in kids}, model
            ),
            parameters={slot: table[key] for slot, key in node.parameters.items()},
            sized=sized,
        )
    roots = {node.id: built[node.id] for node in children_of.get(None, ())}
    if len(roots) == 1:
        return next(iter(roots.values()))
    return roots


def build_order(nodes: list[Node], children_of: dict[str | None, list[Node]]) -> list[Node]:
    """Every node after what it needs: its children, or, for a calling node, its target.

    Without calls this is reverse document order (children come after parents in the
    document), the order factories have always been called in; a call pulls its target (and
    the target's subtree) forward when the target comes earlier in the document.
    """
    by_id = {node.id: node for node in nodes}
    order: list[Node] = []
    done: set[str] = set()
    started: set[str] = set()
    for first in reversed(nodes):
        stack = [first]
        while stack:
            node = stack[-1]
            if node.id in done:
                stack.pop()
                continue
            needs = [by_id[node.calls]] if node.calls is not None else children_of.get(node.id, [])
            waiting = [need for need in reversed(needs) if need.id not in done]
            if not waiting:
                stack.pop()
                done.add(node.id)
                order.append(node)
                continue
            if node.id in started:  # pragma: no cover - validation refuses cyclic calls
                raise ImportModelError("the calls of this model form a cycle", node_id=node.id)
            started.add(node.id)
            stack.extend(waiting)
    return order


def _framework_of(model: Model) -> str:
    """The framework a document names in its metadata, or numpy, the reference runtime."""
    framework = model.metadata.get("framework")
    name = framework.get("name") if isinstance(framework, dict) else None
    return name if isinstance(name, str) and name else "numpy"


def build_node(
    node: Node,
    registry: OpRegistry,
    *,
    children: Mapping[str, Any],
    parameters: dict[str, Parameter],
    sized: Callable[[SizedNode], Any] | None = None,
) -> Any:
    """Call the factory of ``node``'s op: one place that says what is missing or what failed,
    for :func:`import_model` and for runtimes building their kernels.

    A node of a standard catalog op has its settings checked first
    (:func:`trama.catalog.check_settings`), whatever the registry's framework: a document the
    catalog does not allow fails here with the same :class:`~trama.RegistryError` everywhere,
    before any framework object exists. The factory called inside gets the checked settings
    from ``check_settings`` without a second check.

    A leaf whose settings depend on the input sizes (:class:`~trama.format.SizeExpr`) is built
    for each run's sizes instead (:class:`~trama.conversion.SizedNode`): ``sized`` wraps it in the
    framework's kind of object (a kernel, a module). Without ``sized`` (or ``registry.sized``)
    such a node is an :class:`~trama.ImportModelError`: the framework cannot run it.
    """
    spec = registry[node.op]
    if not spec.composite and is_sized(parameters):
        wrap = sized or getattr(registry, "sized", None)
        if wrap is None:
            symbols = SizedNode(node, registry, parameters, _build_resolved).symbols
            raise ImportModelError(
                f"the settings of this {node.op} depend on the input sizes ({', '.join(symbols)}), and the "
                f"{registry.framework or 'given'} registry builds no node per run; run the document with a runtime",
                node_id=node.id,
            )
        return wrap(SizedNode(node, registry, parameters, _build_resolved))
    with checking(node, spec, parameters):
        return _call_factory(node, spec, registry, children, parameters)


def _build_resolved(
    node: Node, registry: OpRegistry, parameters: dict[str, Parameter], example: dict[str, Parameter] | None
) -> Any:
    """Build a leaf whose sizes are values now (:meth:`SizedNode.build`): numbers, or symbolic
    sizes checked at their ``example`` numbers."""
    spec = registry[node.op]
    with checking(node, spec, parameters, example=example):
        return _call_factory(node, spec, registry, {}, parameters)


def _call_factory(
    node: Node, spec: OpSpec, registry: OpRegistry, children: Mapping[str, Any], parameters: dict[str, Parameter]
) -> Any:
    factory = spec.factory
    if factory is None:
        where = f"for {registry.framework}" if registry.framework else "in this registry"
        hint = (
            f"; install a package that implements it for {registry.framework} (e.g. trama-{registry.framework})"
            if registry.framework
            else ""
        )
        raise RegistryError(
            f"op {node.op!r} has no implementation {where}, so it cannot be built{hint}", node_id=node.id
        )
    build = getattr(factory, "from_node", factory)
    try:
        return build(node, children=children, parameters=parameters)
    except TramaError:
        raise
    except Exception as exc:
        raise ImportModelError(f"building op {node.op!r} failed: {type(exc).__name__}: {exc}", node_id=node.id) from exc
