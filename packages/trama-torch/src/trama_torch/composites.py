"""The catalog's composites as torch modules: ``Sequential``, ``TransformerEncoder`` and ``Graph``.

Each comes back as what a torch user would have written, so that ``state_dict`` keys, ``repr``
and behaviour are the original's:

* ``Sequential`` is an ``nn.Sequential`` of the children under their names (``0.weight``);
* ``TransformerEncoder`` is an ``nn.TransformerEncoder`` holding the imported layers themselves
  (``layers.0.self_attn.in_proj_weight``): torch's constructor deep-copies the layer it is
  given, so it is built with no layers and the imported ones are put in its ``ModuleList``;
  its nested-tensor fast path stays off, so values are those of torch's plain path exactly
  (the ``enable_nested_tensor`` slot is kept on the module, for a later export);
* ``Graph`` is a ``torch.fx.GraphModule`` that runs the node's wiring
  (:mod:`trama_torch.wiring`), with the children as submodules under their node names (and a
  child registered again under each other name its node's ``torch_aliases`` gives it).

A ``Graph`` needs its children's nodes (their wiring), which the importer's factory protocol
does not pass: see :func:`child_nodes`.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from torch import nn

from trama.errors import ImportModelError
from trama.format import Model, Node, Parameter
from trama.format._sizes import has_sizes
from trama_torch.sized import binding_sizes_when_called
from trama_torch.walk import evaluation_mode
from trama_torch.wiring import ScopeModule, as_module, scope_module, torch_aliases, torch_name

__all__ = ["child_module_names", "child_nodes", "composite_factories", "sequential_names"]


def sequential(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> nn.Sequential:
    """``nn.Sequential`` of the children, in document order, under their names (the torch names
    the exporter escaped, where it had to: RegNet's ``block1-0``; never two children under one
    name, :func:`sequential_names`)."""
    nodes = getattr(children, "nodes", None)
    names = sequential_names([nodes[name] for name in children]) if isinstance(nodes, Mapping) else {}
    return _in_eval_mode(
        nn.Sequential(OrderedDict((names.get(name, name), as_module(child)) for name, child in children.items()))
    )


#: What ``nn.Sequential`` itself holds (``forward``, ``training``, ``_modules``…): no child's key.
_SEQUENTIAL = nn.Sequential()


def sequential_names(nodes: Sequence[Node]) -> dict[str, str]:
    """Node name -> the child's key in the ``nn.Sequential``: its torch name where that is free,
    else its node name, else the first free one of ``name_1``, ``name_2``… Two children never
    share a key, whatever the metadata says, so none replaces another, and no key is an
    attribute of the module itself."""
    names: dict[str, str] = {}
    taken = {node.name for node in nodes}
    used: set[str] = set()

    def free(name: str) -> bool:
        return name not in used and not hasattr(_SEQUENTIAL, name)

    for node in nodes:
        original = torch_name(node)
        if original != node.name and (original in taken or not free(original)):
            original = node.name
        candidate, n = original, 1
        while not free(candidate):
            candidate, n = f"{original}_{n}", n + 1
        used.add(candidate)
        names[node.name] = candidate
    return names


def transformer_encoder(
    node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]
) -> nn.TransformerEncoder:
    """``nn.TransformerEncoder`` holding the imported ``layers_k`` children (and ``norm``)."""
    layers = [child for name, child in children.items() if name != "norm"]
    if not layers or not all(isinstance(layer, nn.TransformerEncoderLayer) for layer in layers):
        raise ImportModelError(
            "a TransformerEncoder's children must be TransformerEncoderLayer nodes (and a last 'norm')",
            node_id=node.id,
        )
    norm = children.get("norm")
    setting = parameters.get("enable_nested_tensor")
    mask_check = parameters.get("mask_check")
    encoder = nn.TransformerEncoder(
        layers[0],
        num_layers=0,  # no deep copies: the imported layers go in below
        norm=as_module(norm) if norm is not None else None,
        enable_nested_tensor=False,
        mask_check=bool(mask_check.value) if mask_check is not None else True,
    )
    encoder.layers = nn.ModuleList(layers)
    encoder.num_layers = len(layers)
    encoder.enable_nested_tensor = bool(setting.value) if setting is not None else True
    return _in_eval_mode(encoder)


def graph(node: Node, *, children: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> ScopeModule:
    """The node's wiring compiled into a ``GraphModule`` whose submodules are the children.

    The generated class is named after the source class the exporter noted in the node's
    metadata (``Residual``), so that ``print(module)`` reads like the original; its
    ``torch_aliases`` (``{"shared": "encoder.embed_tokens"}``) register a submodule again under
    the other names torch gave it (:func:`trama_torch.wiring.register_aliases`), and children's
    ``torch_name``\\ s name their ``state_dict`` keys; metadata is used for nothing else."""
    nodes = child_nodes(node, children)
    metadata = node.metadata or {}
    source = metadata.get("class")
    class_name = source.rsplit(".", 1)[-1] if isinstance(source, str) and source.isascii() else "Graph"
    bindings = node.output_bindings or {}
    module = scope_module(
        inputs=list(node.inputs),
        children=[(nodes[name], child) for name, child in children.items()],
        outputs=[bindings[output] for output in node.outputs],
        always_tuple=False,
        class_name=class_name if class_name.isidentifier() else "Graph",
        aliases=torch_aliases(node),
    )
    document = getattr(children, "model", None)
    if (
        node.parent is None
        and isinstance(document, Model)
        and any(has_sizes(entry.value) for entry in document.parameters.values())
    ):
        binding_sizes_when_called(module, document, node)
    return _in_eval_mode(module)


#: The containers these factories built, each wholly in eval mode when it was: a parent built
#: over them need not walk their subtrees again.
_IN_EVAL_MODE: weakref.WeakSet[nn.Module] = weakref.WeakSet()

ContainerT = TypeVar("ContainerT", bound=nn.Module)


def _in_eval_mode(container: ContainerT) -> ContainerT:
    """``container.eval()`` at the cost of what is new in it: a child container these factories
    built is in eval mode already, so only the other children are walked (every module of a
    deep tree would otherwise be walked once per level above it)."""
    container.training = False
    for child in container._modules.values():
        if child is not None and child not in _IN_EVAL_MODE:
            evaluation_mode(child)
    _IN_EVAL_MODE.add(container)
    return container


def child_nodes(node: Node, children: Mapping[str, Any]) -> Mapping[str, Node]:
    """The nodes of ``node``'s children, by name: ``trama.import_model`` passes them along with
    the built objects (``children.nodes``), because a calling child's inputs and target are on
    its node, not on the object it shares with its target."""
    given = getattr(children, "nodes", None)
    if isinstance(given, Mapping):
        return given
    raise ImportModelError(
        f"a {node.op} is built by trama.import_model, which gives it its children's nodes "
        "(children.nodes); this factory was called without them",
        node_id=node.id,
    )


def child_module_names(op: str, names: list[str], nodes: Sequence[Node] = ()) -> dict[str, str]:
    """Where the module built for each child (by name, in document order) of an ``op`` node sits
    in the node's module: ``layers.2`` for the third layer of a ``TransformerEncoder``, the name
    itself in a ``Graph`` or ``Sequential`` (or the torch name it escapes, given the children's
    ``nodes``). Children whose modules the op's module does not hold as submodules (another
    namespace's composite) are left out."""
    if op == "Sequential":
        renamed = sequential_names(nodes)
        return {name: renamed.get(name, name) for name in names}
    if op == "Graph":
        return {name: name for name in names}
    if op == "TransformerEncoder":
        layers = [name for name in names if name != "norm"]
        found = {name: f"layers.{index}" for index, name in enumerate(layers)}
        return found | ({"norm": "norm"} if "norm" in names else {})
    return {}


def composite_factories() -> Mapping[str, Any]:
    """The torch factories of the catalog's composites, by op name."""
    return {"Sequential": sequential, "TransformerEncoder": transformer_encoder, "Graph": graph}
