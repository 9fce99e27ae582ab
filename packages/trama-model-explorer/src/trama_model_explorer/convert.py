"""A trama document as one Model Explorer graph.

Model Explorer draws a flat list of op nodes, each with a *namespace* (``a/b/c``) that places it
in nested, collapsible layers. A trama document is a tree whose leaves compute and whose
composites group them, so the mapping is direct:

* every leaf is an op node: its id is the node id, its label the op, its namespace the path of
  its parent composites (``root.model.layers.0.self_attn.q_proj`` lies in
  ``root/model/layers/0/self_attn``);
* every model input is an ``Input`` node and every model output an ``Output`` node, at top level;
* an edge goes from the leaf (or model input) that produces a value to each leaf reading it:
  references are followed through composite bindings and scope inputs down to that producer, as
  the execution plan resolves them, so composites are never nodes of their own;
* a calling node is expanded into a copy of what it calls, as for running it
  (``trama.format._calls.expand_calls``), so each call is drawn with its own leaves;
* a leaf's attributes are its op, its class, each setting (a tensor as its type, ``f32[64, 32]``)
  and its parameter count; each composite's are shown on its layer, the document's on the graph.

Shapes are known where the document states them: the model inputs' and outputs' facts, and the
values of ``constant`` leaves. Edges, inputs and outputs are numbered in document order (ports
and outputs as the node lists them), each tagged with its name.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from model_explorer import ModelExplorerGraphs
from model_explorer.graph_builder import (
    Graph,
    GraphNode,
    GroupNodeAttributes,
    IncomingEdge,
    KeyValue,
    LayoutConfigs,
    MetadataItem,
)

from trama import INPUT, Model, Node, Ref, ValueFact
from trama.format._calls import expand_calls
from trama.format._lazy import is_tensor
from trama.tools import SHORT_DTYPES, describe_metadata_value, format_ref, format_value

__all__ = ["convert_model", "input_node_id", "namespace_of", "output_node_id"]

#: Model Explorer's attribute keys for the name of an input or output, and for its type.
TENSOR_TAG = "__tensor_tag"
TENSOR_SHAPE = "tensor_shape"
#: Setting values longer than this are cut (a long index list would flood the side panel).
MAX_VALUE_TEXT = 1000

#: A value's producer: a leaf id and one of its outputs, or ``(INPUT, name)`` for a model input.
Source = tuple[str, str]
_Key = tuple[str | None, str, str]


def input_node_id(name: str) -> str:
    """The id of the Input node of model input ``name``: ``%input.x`` (no node id holds ``%``)."""
    return f"{INPUT}.{name}"


def output_node_id(index: int) -> str:
    """The id of the Output node of the model's output number ``index``: ``%output.0``."""
    return f"%output.{index}"


def namespace_of(node_id: str | None) -> str:
    """The Model Explorer namespace of a scope (a composite id, ``None`` at top level): its
    dotted path with slashes (node ids hold no slash)."""
    return "" if node_id is None else node_id.replace(".", "/")


def convert_model(model: Model, *, graph_id: str = "model") -> ModelExplorerGraphs:
    """The graph Model Explorer draws for ``model``, a valid document (as ``trama.load`` reads
    it): ``{"graphs": [graph]}``, built from Model Explorer's own ``graph_builder`` classes."""
    return {"graphs": [_Converter(model).graph(graph_id)]}


class _Converter:
    def __init__(self, model: Model) -> None:
        self.model = model
        self.nodes, self.origin = expand_calls(model)
        self.by_id = {node.id: node for node in self.nodes}
        self.leaves = [node for node in self.nodes if node.output_bindings is None]
        uses = Counter(key for node in model.nodes for key in node.parameters.values())
        self.shared = {key for key, count in uses.items() if count > 1}
        self.memo: dict[_Key, Source] = {}
        self.sources = [self.resolve(ref, None) for ref in model.outputs]
        # The type of each value whose type the document states: the model outputs' facts.
        self.known: dict[Source, str] = {}
        for source, fact in zip(self.sources, _facts(model.output_facts, len(self.sources)), strict=True):
            if fact is not None:
                self.known.setdefault(source, _fact_text(fact))

    def graph(self, graph_id: str) -> Graph:
        model = self.model
        nodes = [
            _input_node(name, fact)
            for name, fact in zip(model.inputs, _facts(model.input_facts, len(model.inputs)), strict=True)
        ]
        nodes.extend(self.leaf_node(leaf) for leaf in self.leaves)
        for k, (ref, source) in enumerate(zip(model.outputs, self.sources, strict=True)):
            nodes.append(self.output_node(k, ref, source))
        groups: GroupNodeAttributes = {"": self.document_attrs()}
        layers = self.layers()
        for node in self.nodes:
            if node.id in layers:
                groups[namespace_of(node.id)] = self.group_attrs(node, layers[node.id])
        return Graph(
            id=graph_id,
            nodes=nodes,
            groupNodeAttributes=groups,
            # Every composite a layer, even one around a single leaf. (Model Explorer 0.1.34
            # takes this from its settings panel, not yet from the graph.)
            layoutConfigs=LayoutConfigs(keepLayersWithASingleChild=True),
        )

    # --- wiring ----------------------------------------------------------------------------

    def resolve(self, ref: Ref, scope: str | None) -> Source:
        """The producer of the value ``ref`` denotes seen from ``scope`` (a composite id,
        ``None`` at top level), followed through composite bindings and scope inputs as
        ``trama.execution._plan.build_plan`` does; every step is remembered for later queries."""
        chain: dict[_Key, None] = {}
        key: _Key = (scope, ref.node, ref.output)
        while key not in self.memo:
            if key in chain:
                raise ValueError(f"the reference {ref} loops through composite bindings")
            chain[key] = None
            if ref.node == INPUT:
                if scope is None:
                    found: Source = (INPUT, ref.output)
                    break
                composite = self.by_id[scope]
                ref, scope = composite.inputs[ref.output], composite.parent
            else:
                target = self.by_id[ref.node]
                if target.output_bindings is None:
                    found = (target.id, ref.output)
                    break
                ref, scope = target.output_bindings[ref.output], target.id
            key = (scope, ref.node, ref.output)
        else:
            found = self.memo[key]
        for each in chain:
            self.memo[each] = found
        return found

    def edge(self, source: Source, port: int) -> IncomingEdge:
        node_id, output = source
        if node_id == INPUT:
            return IncomingEdge(sourceNodeId=input_node_id(output), sourceNodeOutputId="0", targetNodeInputId=str(port))
        index = self.by_id[node_id].outputs.index(output)
        return IncomingEdge(sourceNodeId=node_id, sourceNodeOutputId=str(index), targetNodeInputId=str(port))

    # --- nodes -----------------------------------------------------------------------------

    def leaf_node(self, leaf: Node) -> GraphNode:
        table = self.model.parameters
        attrs = self.common_attrs(leaf)
        taken = {key for key, _ in attrs}
        elements: int | None = None
        for slot, key in leaf.parameters.items():
            entry = table[key]
            text = _value_text(entry.value)
            if is_tensor(entry.value):
                elements = (elements or 0) + entry.value.size
                text += " learnable" if entry.learnable else ""
            if key in self.shared:
                text += f" (shared entry {key})"
            attrs.append((slot if slot not in taken else f"{slot} (setting)", text))
        if elements is not None:
            attrs.append(("#parameters", str(elements)))
        attrs.extend(_metadata_attrs(leaf))
        outputs = []
        for index, output in enumerate(leaf.outputs):
            item = _tagged(index, output)
            type_text = self.known.get((leaf.id, output)) or self.constant_type(leaf, output)
            if type_text is not None:
                item.attrs.append(KeyValue(TENSOR_SHAPE, type_text))
            outputs.append(item)
        return GraphNode(
            id=leaf.id,
            label=leaf.op,
            namespace=namespace_of(leaf.parent),
            attrs=[KeyValue(key, value) for key, value in attrs],
            incomingEdges=[self.edge(self.resolve(ref, leaf.parent), k) for k, ref in enumerate(leaf.inputs.values())],
            outputsMetadata=outputs,
            inputsMetadata=[_tagged(k, port) for k, port in enumerate(leaf.inputs)],
        )

    def constant_type(self, leaf: Node, output: str) -> str | None:
        """The type of a ``constant`` leaf's value: the type of what it outputs."""
        if leaf.op != "constant" or output != "y" or "value" not in leaf.parameters:
            return None
        value = self.model.parameters[leaf.parameters["value"]].value
        return _type_text(value.dtype, value.shape) if is_tensor(value) else None

    def output_node(self, index: int, ref: Ref, source: Source) -> GraphNode:
        attrs = [KeyValue("index", str(index)), KeyValue("ref", format_ref(ref))]
        if source in self.known:
            attrs.append(KeyValue("type", self.known[source]))
        return GraphNode(
            id=output_node_id(index),
            label="Output",
            attrs=attrs,
            incomingEdges=[self.edge(source, 0)],
            inputsMetadata=[_tagged(0, format_ref(ref))],
        )

    def common_attrs(self, node: Node) -> list[tuple[str, str]]:
        """A leaf's or a composite's op, class and, for a copy made for a call, what it copies."""
        attrs = [("op", node.op)]
        cls = (node.metadata or {}).get("class")
        if isinstance(cls, str):
            attrs.append(("class", cls))
        original = self.origin.get(node.id)
        if original is not None:
            attrs.append(("copy of", original))
        return attrs

    # --- layers ----------------------------------------------------------------------------

    def group_attrs(self, composite: Node, parameters: int) -> dict[str, str]:
        """What Model Explorer shows for the layer of a composite (``Graph.groupNodeAttributes``)."""
        attrs = dict(self.common_attrs(composite))
        attrs["id"] = composite.id
        attrs["inputs"] = ", ".join(composite.inputs)
        attrs["outputs"] = ", ".join(composite.outputs)
        attrs["#parameters"] = str(parameters)
        attrs.update(_metadata_attrs(composite))
        return attrs

    def layers(self) -> dict[str, int]:
        """The composites Model Explorer draws as layers, those holding a leaf, each with the
        tensor elements it holds, each entry counted once (tied weights and calls share entries)."""
        table = self.model.parameters
        entries: dict[str, set[str]] = {}
        for leaf in self.leaves:
            keys = {key for key in leaf.parameters.values() if is_tensor(table[key].value)}
            scope = leaf.parent
            while scope is not None:
                entries.setdefault(scope, set()).update(keys)
                scope = self.by_id[scope].parent
        return {scope: sum(_size(table[key].value) for key in keys) for scope, keys in entries.items()}

    def document_attrs(self) -> dict[str, str]:
        """What Model Explorer shows for the graph as a whole (the layer ``""``)."""
        model = self.model
        attrs: dict[str, str] = {}
        for name in ("producer", "framework"):
            if name in model.metadata:
                attrs[name] = describe_metadata_value(model.metadata[name])
        if model.source_format_version is not None:
            attrs["format_version"] = model.source_format_version
        attrs["inputs"] = ", ".join(model.inputs)
        attrs["outputs"] = ", ".join(format_ref(ref) for ref in model.outputs)
        attrs["nodes"] = str(len(model.nodes))
        attrs["leaves"] = str(len(self.leaves))
        attrs["#parameters"] = str(sum(_size(entry.value) for entry in model.parameters.values()))
        return attrs


# --- values --------------------------------------------------------------------------------


def _input_node(name: str, fact: ValueFact | None) -> GraphNode:
    attrs = [KeyValue("name", name)]
    output = _tagged(0, name)
    if fact is not None:
        attrs.append(KeyValue("type", _fact_text(fact)))
        output.attrs.append(KeyValue(TENSOR_SHAPE, _fact_text(fact)))
    return GraphNode(id=input_node_id(name), label="Input", attrs=attrs, outputsMetadata=[output])


def _tagged(index: int, name: str) -> MetadataItem:
    """The metadata of input or output number ``index``, named ``name``."""
    return MetadataItem(id=str(index), attrs=[KeyValue(TENSOR_TAG, name)])


def _facts(facts: Sequence[ValueFact | None] | None, count: int) -> Iterable[ValueFact | None]:
    """Each fact that says something, ``None`` for the others (or for every value, without facts)."""
    if facts is None:
        return [None] * count
    return [fact if fact is not None and (fact.dtype is not None or fact.shape is not None) else None for fact in facts]


def _type_text(dtype: str | None, shape: Sequence[int | str] | None) -> str:
    """``f32[2, 8, 128]``; ``?`` for what is not known."""
    name = "?" if dtype is None else SHORT_DTYPES.get(dtype, dtype)
    return f"{name}[{'?' if shape is None else ', '.join(str(size) for size in shape)}]"


def _fact_text(fact: ValueFact) -> str:
    return _type_text(fact.dtype, fact.shape)


def _value_text(value: Any) -> str:
    """A setting as the document writes it (``true``, ``[3, 3]``, ``"same"``, a size's expression),
    a tensor as its type."""
    return _cut(_type_text(value.dtype, value.shape) if is_tensor(value) else format_value(value))


def _metadata_attrs(node: Node) -> list[tuple[str, str]]:
    """The node's metadata but its class, each entry as ``metadata.<key>``: compact JSON."""
    attrs = []
    for key, value in (node.metadata or {}).items():
        if key != "class":
            try:
                text = json.dumps(value, ensure_ascii=False, sort_keys=True)
            except (TypeError, ValueError):  # an in-memory model may hold what JSON cannot
                text = repr(value)
            attrs.append((f"metadata.{key}", _cut(text)))
    return attrs


def _cut(text: str) -> str:
    """``text``, cut at :data:`MAX_VALUE_TEXT` characters (a long index list would flood the panel)."""
    return text if len(text) <= MAX_VALUE_TEXT else f"{text[: MAX_VALUE_TEXT - 30]}... ({len(text)} characters)"


def _size(value: Any) -> int:
    return int(value.size) if is_tensor(value) else 0
