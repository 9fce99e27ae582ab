"""Turning a validated :class:`~trama.Model` back into runtime objects through a registry."""

from __future__ import annotations

from typing import Any

from trama.errors import ImportModelError, RegistryError, TramaError
from trama.model import Model, Node, Parameter
from trama.opregistry import OpRegistry
from trama.validation import validate

__all__ = ["build_node", "import_model"]


def import_model(model: Model, *, registry: OpRegistry | None = None) -> Any:
    """Build the objects a document describes, children before parents.

    Every node's op must have a spec with a ``factory`` in ``registry``. Slots that share a
    table entry receive the same :class:`~trama.Parameter` object. Returns the object of the
    single top-level node; a document with several top-level nodes returns a dict of them by
    id, in document order. Without ``registry``, the discovered one (:func:`trama.registry`)
    of the framework the document's metadata names is used, numpy when it names none.
    """
    if registry is None:
        from trama.plugins import registry as discovered

        registry = discovered(_framework_of(model))
    validate(model, registry)
    table: dict[str, Parameter] = model.parameters
    built: dict[str, Any] = {}
    children_of: dict[str, dict[str, Any]] = {}
    for node in reversed(model.nodes):  # children come after parents in the document
        children = dict(reversed(children_of.pop(node.id, {}).items()))
        obj = build_node(
            node, registry, children=children, parameters={slot: table[key] for slot, key in node.parameters.items()}
        )
        parent = node.parent
        if parent is None:
            built[node.id] = obj
        else:
            children_of.setdefault(parent, {})[node.name] = obj
    roots = dict(reversed(built.items()))
    if len(roots) == 1:
        return next(iter(roots.values()))
    return roots


def _framework_of(model: Model) -> str:
    """The framework a document names in its metadata, or numpy, the reference runtime."""
    framework = model.metadata.get("framework")
    name = framework.get("name") if isinstance(framework, dict) else None
    return name if isinstance(name, str) and name else "numpy"


def build_node(node: Node, registry: OpRegistry, *, children: dict[str, Any], parameters: dict[str, Parameter]) -> Any:
    """Call the factory of ``node``'s op: one place that says what is missing or what failed,
    for :func:`import_model` and for runtimes building their kernels."""
    spec = registry[node.op]
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
