"""A whole document as one torch module: what the torch runtimes run.

``trama.import_model`` gives back the document's top-level object (the ``root`` module); a
runtime needs more: a module whose ``forward`` takes the *model's* inputs in order and returns
its outputs as a tuple, whichever nodes they come from, and a way to find the module of any
node (to place subtrees on devices, to hook recurrent layers for streaming, to time nodes).

:func:`import_document` builds that :class:`DocumentModule`: the document's top level is a
scope like any ``Graph``'s, compiled by the same builder (:mod:`trama_torch.wiring`), with the
top-level nodes as submodules under their ids (``root``), so ``state_dict`` keys are the
original model's prefixed by ``root.``. :attr:`DocumentModule.node_modules` maps node ids to
submodule names, following how each composite holds its children
(:func:`trama_torch.composites.child_module_names`); a calling node maps to the module of the
node it calls, which is the very module it runs.
"""

from __future__ import annotations

from typing import Any

from trama.extension import registry as discovered
from trama.format import Model, Node, children_by_parent
from trama_torch.composites import child_module_names
from trama_torch.walk import module_at
from trama_torch.wiring import ScopeModule, call_node, scope_module

__all__ = ["DocumentModule", "call_node", "import_document"]


class DocumentModule(ScopeModule):
    """A document's modules and top-level wiring: ``forward(*inputs)`` returns a tuple of the
    model's outputs, in order.

    ``node_modules`` maps each node id that has a module of its own to that module's qualified
    name in this one (``get_submodule`` finds it); a calling node maps to its target's."""

    node_modules: dict[str, str]


def import_document(model: Model) -> DocumentModule:
    """Import ``model`` with the torch registry and wrap it as a :class:`DocumentModule`.

    Validation and import errors are trama's own (:func:`trama.import_model` raises them)."""
    from trama.conversion import import_model
    from trama_torch.sized import SizedModule

    built: Any = import_model(model, registry=discovered("torch"), sized=SizedModule)
    scopes = children_by_parent(model.nodes)
    top = scopes.get(None, [])
    objects: dict[str, Any] = {top[0].id: built} if len(top) == 1 else dict(built)
    module = scope_module(
        inputs=list(model.inputs),
        children=[(node, objects[node.id]) for node in top],
        outputs=list(model.outputs),
        always_tuple=True,
        class_name="DocumentModule",
        module_class=DocumentModule,
    )
    assert isinstance(module, DocumentModule)
    module.node_modules = _node_modules(model.nodes, scopes, module)
    return module


def _node_modules(nodes: list[Node], scopes: dict[str | None, list[Node]], module: DocumentModule) -> dict[str, str]:
    """Node id -> qualified submodule name, parents before children; a calling node gets its
    target's. A compiled scope (the top level, a ``Graph``) says where it holds each child
    (``child_attributes``); ``Sequential`` and ``TransformerEncoder`` hold them as torch does."""
    found: dict[str, str] = {}
    held = module.child_attributes
    for node in scopes.get(None, []):
        if node.calls is None and node.name in held:
            found[node.id] = held[node.name]
    for node in nodes:
        children = scopes.get(node.id, [])
        if node.id not in found or not children:
            continue
        owner = module_at(module, found[node.id])
        if owner is None:  # a name that holds a constant's tensor, not a module
            continue
        names = (
            owner.child_attributes
            if isinstance(owner, ScopeModule)
            else child_module_names(node.op, [child.name for child in children], children)
        )
        for child in children:
            if child.calls is None and child.name in names:
                found[child.id] = f"{found[node.id]}.{names[child.name]}"
    for node in nodes:
        if node.calls is not None and node.calls in found:
            found[node.id] = found[node.calls]
    return {node_id: name for node_id, name in found.items() if module_at(module, name) is not None}
