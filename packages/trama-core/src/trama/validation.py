"""The rules a document must follow beyond its JSON shape, and checks against a registry.

Structural rules (ids, scopes, references, bindings, the parameter table) need nothing but the
document. Registry rules (known ops, ports, slots and their value types) need the specs.
Both checks collect every problem in one linear pass over the nodes, so validating a 200,000-node
file costs about twice a 100,000-node one, and a command-line run can report all errors at once.
"""

from __future__ import annotations

import math
import re

from trama.errors import RegistryError, TramaError, ValidationError
from trama.model import INPUT, Model, Node, Ref
from trama.registry import OpRegistry, value_type
from trama.tensor import Tensor

__all__ = ["DOTTED_ID", "NAME", "collect_errors", "registry_errors", "structural_errors", "validate"]

#: A node id or parameter name: dot-separated segments of ``[A-Za-z0-9_]``.
DOTTED_ID = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*\Z")
#: A port, output or model input name: one segment.
NAME = re.compile(r"[A-Za-z0-9_]+\Z")


def validate(model: Model, registry: OpRegistry | None = None) -> None:
    """Raise the first problem found (every problem is in its ``all_errors``); else return."""
    errors = collect_errors(model, registry)
    if errors:
        first = errors[0]
        first.all_errors = errors
        raise first


def collect_errors(model: Model, registry: OpRegistry | None = None) -> list[TramaError]:
    """Every structural problem, then (if the structure holds and a registry is given) every
    registry problem."""
    errors = structural_errors(model)
    if not errors and registry is not None:
        errors = registry_errors(model, registry)
    return errors


def structural_errors(model: Model) -> list[TramaError]:
    """Check the rules of ``docs/format.md`` ("Structural rules") and return every violation."""
    errors: list[TramaError] = []

    def fail(message: str, location: str, node_id: str | None = None) -> None:
        errors.append(ValidationError(message, location=location, node_id=node_id))

    model_inputs = set(model.inputs)
    if len(model_inputs) != len(model.inputs):
        fail("model inputs repeat a name", "/inputs")
    for k, name in enumerate(model.inputs):
        if not NAME.match(name):
            fail(f"input name {name!r} is not an identifier ([A-Za-z0-9_]+)", f"/inputs/{k}")

    nodes = model.nodes
    all_ids = {node.id for node in nodes}
    position: dict[str, int] = {}
    declared: dict[str, Node] = {}

    def check_ref(ref: Ref, scope: str | None, scope_inputs: object, where: str, owner: str | None) -> None:
        if ref.node == INPUT:
            if ref.output not in scope_inputs:  # type: ignore[operator]
                whose = f"composite {scope!r}" if scope is not None else "the model"
                fail(f"{ref.output!r} is not an input of {whose}", where, owner)
            return
        target = declared.get(ref.node)
        if target is None:
            if ref.node in all_ids:
                fail(f"refers to {ref.node!r}, which comes later (wrong order or a cycle)", where, owner)
            else:
                fail(f"refers to unknown node {ref.node!r}", where, owner)
        elif target.parent != scope:
            fail(f"refers to {ref.node!r}, which is not in the same scope", where, owner)
        elif ref.output not in target.outputs:
            fail(f"node {ref.node!r} has no output {ref.output!r}", where, owner)

    for i, node in enumerate(nodes):
        node_id = node.id
        here = f"/nodes/{i}"
        if not DOTTED_ID.match(node_id):
            fail(f"node id {node_id!r} is not a dotted identifier", f"{here}/id", node_id)
        if node_id in declared:
            fail(f"node id {node_id!r} is used twice", f"{here}/id", node_id)
        parent = node.parent
        scope_inputs: object = model_inputs
        if parent is not None:
            parent_node = declared.get(parent)
            if parent_node is None:
                fail(f"parent {parent!r} does not exist or comes later", f"{here}/parent", node_id)
            elif parent_node.output_bindings is None:
                fail(f"parent {parent!r} is a leaf (it has no output_bindings)", f"{here}/parent", node_id)
            else:
                scope_inputs = parent_node.inputs
        for port, ref in node.inputs.items():
            if not NAME.match(port):
                fail(f"input port name {port!r} is not an identifier ([A-Za-z0-9_]+)", f"{here}/inputs", node_id)
            check_ref(ref, parent, scope_inputs, f"{here}/inputs/{port}", node_id)
        for k, output in enumerate(node.outputs):
            if not NAME.match(output):
                fail(f"output name {output!r} is not an identifier ([A-Za-z0-9_]+)", f"{here}/outputs/{k}", node_id)
        if len(set(node.outputs)) != len(node.outputs):
            fail("outputs repeat a name", f"{here}/outputs", node_id)
        position[node_id] = i
        declared.setdefault(node_id, node)

    for i, node in enumerate(nodes):
        bindings = node.output_bindings
        if bindings is None:
            continue
        here = f"/nodes/{i}/output_bindings"
        if bindings.keys() != set(node.outputs):
            missing = sorted(set(node.outputs) - bindings.keys())
            extra = sorted(bindings.keys() - set(node.outputs))
            detail = "; ".join(
                part
                for part in (f"missing {missing}" if missing else "", f"not declared {extra}" if extra else "")
                if part
            )
            fail(f"bindings must cover exactly the declared outputs ({detail})", here, node.id)
        for name, ref in bindings.items():
            if ref.node == INPUT:
                if ref.output not in node.inputs:
                    fail(f"{ref.output!r} is not an input of this composite", f"{here}/{name}", node.id)
                continue
            target = declared.get(ref.node)
            if target is None:
                fail(f"binds to unknown node {ref.node!r}", f"{here}/{name}", node.id)
            elif target.parent != node.id:
                fail(f"binds to {ref.node!r}, which is not a child of this composite", f"{here}/{name}", node.id)
            elif ref.output not in target.outputs:
                fail(f"node {ref.node!r} has no output {ref.output!r}", f"{here}/{name}", node.id)

    for k, ref in enumerate(model.outputs):
        if ref.node == INPUT:
            fail("a model output must be an output of a top-level node, not %input", f"/outputs/{k}")
            continue
        check_ref(ref, None, model_inputs, f"/outputs/{k}", None)

    table = model.parameters
    referenced: set[str] = set()
    for i, node in enumerate(nodes):
        for slot, key in node.parameters.items():
            if key not in table:
                fail(f"slot {slot!r} refers to missing parameter {key!r}", f"/nodes/{i}/parameters/{slot}", node.id)
            referenced.add(key)
    for name in table:
        where = f"/parameters/{_pointer_escape(name)}"
        if not DOTTED_ID.match(name):
            fail(f"parameter name {name!r} is not a dotted identifier", where)
        elif name in all_ids:
            fail(f"parameter name {name!r} is also a node id", where)
        if name not in referenced:
            fail(f"parameter {name!r} is not referenced by any node", where)
        problem = _value_problem(table[name].value)
        if problem is not None:
            fail(f"parameter {name!r} cannot be stored: {problem}", f"{where}/value")
    return errors


def _value_problem(value: object) -> str | None:
    """Why a parameter value has no form in a document (``None`` when it has one)."""
    if value is None or isinstance(value, (Tensor, bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number (store it as a 0-d tensor)"
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, Tensor):
                return "a list value may hold scalars and lists only, not tensors"
            problem = _value_problem(item)
            if problem is not None:
                return problem
        return None
    return f"a value of type {type(value).__name__} is not a tensor, bool, int, float, string, null or list"


def registry_errors(model: Model, registry: OpRegistry) -> list[TramaError]:
    """Check every node against its op's spec and return every mismatch."""
    errors: list[TramaError] = []
    table = model.parameters
    for i, node in enumerate(model.nodes):
        here = f"/nodes/{i}"

        def fail(message: str, where: str = here, node: Node = node) -> None:
            errors.append(RegistryError(message, location=where, node_id=node.id))

        spec = registry.get(node.op)
        if spec is None:
            fail(registry.unknown_op_message(node.op), f"{here}/op")
            continue
        if spec.composite != node.is_composite:
            kind = "a composite" if spec.composite else "a leaf"
            fail(f"op {node.op!r} is {kind}, but this node {'is not' if spec.composite else 'is'}")
        ports = set(node.inputs)
        known_ports = set(spec.inputs) | set(spec.optional_inputs)
        missing = [p for p in spec.inputs if p not in ports]
        if missing:
            fail(f"op {node.op!r} needs input(s) {missing}", f"{here}/inputs")
        if not spec.variadic_inputs:
            unknown = sorted(ports - known_ports)
            if unknown:
                fail(f"op {node.op!r} has no input(s) {unknown}", f"{here}/inputs")
        if not spec.variadic_outputs and set(node.outputs) != set(spec.outputs):
            fail(f"op {node.op!r} declares outputs {list(spec.outputs)}, node has {node.outputs}", f"{here}/outputs")
        for schema in spec.parameters:
            key = node.parameters.get(schema.name)
            if key is None:
                if not schema.optional:
                    fail(f"op {node.op!r} needs parameter {schema.name!r}", f"{here}/parameters")
                continue
            entry = table[key]
            if not schema.accepts(entry.value):
                fail(
                    f"parameter {schema.name!r} of op {node.op!r} must be {' or '.join(schema.types)}, "
                    f"got {value_type(entry.value)} (entry {key!r})",
                    f"{here}/parameters/{schema.name}",
                )
            if schema.learnable is not None and entry.learnable != schema.learnable:
                fail(
                    f"parameter {schema.name!r} of op {node.op!r} must have learnable="
                    f"{str(schema.learnable).lower()} (entry {key!r})",
                    f"{here}/parameters/{schema.name}",
                )
        declared_slots = {schema.name for schema in spec.parameters}
        for slot in node.parameters:
            if slot not in declared_slots:
                fail(f"op {node.op!r} has no parameter slot {slot!r}", f"{here}/parameters/{slot}")
    return errors


def _pointer_escape(token: str) -> str:
    """Escape one JSON Pointer token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")
