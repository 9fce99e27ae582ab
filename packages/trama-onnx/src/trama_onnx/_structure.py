"""Which composites have one structure, and so share one ONNX function.

Two composites share a function when everything its body would bake in is the same: their op
and source class, their ports, outputs and output bindings, and, child by child, the name, the
wiring (relative to the composite), the outputs and, for a leaf, its op, every setting but the
values of its tensors (their dtype and shape count: a lowering may read them) and what the shape
pass recorded of its inputs (dtype, rank and the sizes known statically: a lowering may bake them
in); for a child composite, its own structure. Each instance passes its own tensors and sizes to
the function, so the values of the weights never matter.

The 1.3 writer's block digest (``trama.format._compact``) answers a neighbouring question (which
subtrees to write once) from the document alone: it names a shared entry by its key, so two
instances whose settings are shared entries differ there, and it knows nothing of dtypes and
ranks, which decide what a lowering emits. So this module computes its own digest, the same way:
bottom-up, a BLAKE2b of the canonical JSON of each composite's form.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from trama.format import INPUT, Model, Node, Ref, SizeExpr, Tensor
from trama_onnx._shapes import ShapeFacts

__all__ = ["structure_digests"]


def structure_digests(
    model: Model,
    nodes: Sequence[Node],
    children: Mapping[str | None, list[Node]],
    facts: ShapeFacts,
    origin: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The structure digest of every composite of ``nodes`` (an expanded model's), by id.
    ``origin`` maps an expanded call's copies to the nodes they copy: a call of a composite has
    its target's class (the caller's metadata is its own)."""
    by_id = {node.id: node for node in nodes}
    origin = origin or {}

    def source_class(node: Node) -> Any:
        source = by_id.get(origin.get(node.id, node.id), node)
        return (source.metadata or {}).get("class")

    digests: dict[str, str] = {}
    python: dict[str, list[str]] = {}
    for node_id, port in facts.python:
        python.setdefault(node_id, []).append(port)
    composites = [node for node in nodes if node.output_bindings is not None]
    composites.sort(key=lambda node: -node.id.count("."))  # children before parents
    for node in composites:
        form = {
            "op": node.op,
            "class": source_class(node),
            "ports": list(node.inputs),
            "outputs": list(node.outputs),
            "out": {name: _ref(ref, node.id) for name, ref in (node.output_bindings or {}).items()},
            "nodes": [_child(kid, node.id, model, facts, python, digests) for kid in children.get(node.id, [])],
        }
        text = json.dumps(form, sort_keys=True, separators=(",", ":"), default=_unknown)
        digests[node.id] = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    return digests


def _ref(ref: Ref, scope: str) -> str:
    if ref.node == INPUT:
        return f"%{ref.output}"
    prefix = f"{scope}."
    node = ref.node[len(prefix) :] if ref.node.startswith(prefix) else f"^{ref.node}"
    return f"{node}:{ref.output}"


def _child(
    kid: Node,
    scope: str,
    model: Model,
    facts: ShapeFacts,
    python: Mapping[str, list[str]],
    digests: Mapping[str, str],
) -> dict[str, Any]:
    form: dict[str, Any] = {
        "name": kid.name,
        "in": {port: _ref(ref, scope) for port, ref in kid.inputs.items()},
        "outputs": list(kid.outputs),
    }
    if kid.output_bindings is not None:
        form["structure"] = digests[kid.id]
        return form
    form["op"] = kid.op
    form["set"] = {slot: _value(model.parameters[key].value) for slot, key in kid.parameters.items()}
    seen = facts.inputs.get(kid.id)
    form["seen"] = None if seen is None else {port: None if info is None else list(info) for port, info in seen.items()}
    form["python"] = sorted(python.get(kid.id, []))
    return form


def _value(value: Any) -> Any:
    """A setting as canonical JSON that tells kinds apart (1, 1.0, True; -0.0 and 0.0)."""
    if isinstance(value, Tensor):
        return ["tensor", value.dtype, list(value.shape)]
    if isinstance(value, SizeExpr):
        return ["size", value.text]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", value]
    if isinstance(value, float):
        return ["float", repr(value) if not math.isnan(value) else "nan"]
    if isinstance(value, (list, tuple)):
        return ["list", [_value(item) for item in value]]
    return ["other", value]


def _unknown(value: Any) -> Any:
    return repr(value)
