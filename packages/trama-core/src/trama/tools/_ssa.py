"""A model as SSA text, for people: code review, diffs in a pull request, a quick look at a file.

The JSON document is the format; this text is only a view of it, and nothing reads it back. It
is written to answer the reviewer's questions at a glance: what goes in and out, which
parameters exist and how big they are, and how each scope is wired. Layout::

    # trama format 1.0
    # producer: trama 0.3.0
    model(x) -> %root.y

    parameters: 4 entries, 2 learnable
      name                type       value  learnable
      root.lin.in         int        4
      root.lin.weight     f32[3, 4]         learnable
      ...

    model(x):
      %root.y  = Sequential(x=x)  # scope root
      return %root.y

    scope root = Sequential(x) -> (y):
      %root.lin.y    = Linear(x=x)                   {in, weight, bias}
      %root.relu.y   = ReLU(x=%root.lin.y)
      %root.again.y  = call root.lin(x=%root.relu.y)  # Linear
      return y=%root.again.y

Reading rules: inside a scope, a bare name (``x``) is an input of that scope and ``%a.b.out``
is output ``out`` of node ``a.b``. Parameter slots are listed in braces; a bare slot name uses
the entry named ``<node id>.<slot>`` (the usual case), while ``slot=@entry`` names any other
entry, so shared and tied parameters stand out. ``call a.b(...)`` is a calling node: it runs
node ``a.b`` (whose op the comment repeats) again, on these inputs; it has no slots of its own.
The output is deterministic: the same model always gives the same text, so two renderings diff
cleanly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trama.format._model import Model, Node, Parameter, Ref, ValueFact, children_by_parent
from trama.format._specs import value_type
from trama.format._tensor import Tensor
from trama.version import FORMAT_VERSION

__all__ = ["SHORT_DTYPES", "describe_metadata_value", "format_ref", "format_value_type", "shown", "to_ssa"]

#: Short dtype names for type columns (``f32[16, 8]``), as compilers' IRs write them.
SHORT_DTYPES = {
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "bfloat16": "bf16",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "bool",
}

#: Scalar and list values longer than this are elided in the parameter table.
_VALUE_WIDTH = 40
#: A list with more items than this is shown by its length only.
_LIST_ITEMS = 8
#: No aligned column is padded wider than this: one very long id must not push every line right.
_COLUMN_CAP = 48


def to_ssa(model: Model) -> str:
    """Render ``model`` as SSA text (see the module docstring); the text ends with a newline.

    Works on any model the decoder produces, valid or not: a slot naming a missing entry or a
    node whose parent is absent is still rendered, so the text can help find the problem.
    """
    children = children_by_parent(model.nodes)
    sections = [
        _header(model),
        _parameter_table(model.parameters),
        _model_scope(model, children.get(None, [])),
    ]
    sections += [_composite_scope(node, children.get(node.id, [])) for node in model.nodes if node.is_composite]
    sections += _orphan_scopes(model.nodes, children)
    return "\n\n".join(section for section in sections if section) + "\n"


def format_ref(ref: Ref) -> str:
    """A reference as it reads inside its scope: a bare input name, or ``%<node id>.<output>``."""
    return ref.output if ref.is_input else f"%{ref.node}.{ref.output}"


def format_value_type(value: Any) -> str:
    """The type column of a parameter value: ``f32[16, 8]``, ``int``, ``string``, ``list``..."""
    if isinstance(value, Tensor):
        return _tensor_type(value.dtype, value.shape)
    return value_type(value)


def _tensor_type(dtype: str | None, shape: Sequence[int | str] | None) -> str:
    name = SHORT_DTYPES.get(dtype, dtype) if dtype is not None else "?"
    dims = "?" if shape is None else ", ".join(str(d) for d in shape)
    return f"{name}[{dims}]"


# --- header -------------------------------------------------------------------------------


def _header(model: Model) -> str:
    lines = [f"# trama {_version_text(model.source_format_version)}"]
    lines += [f"# {key}: {text}" for key, text in _metadata_lines(model.metadata)]
    if model.opsets:
        lines.append("# opsets: " + ", ".join(f"{name}={version}" for name, version in sorted(model.opsets.items())))
    lines.append(_signature(model))
    return "\n".join(lines)


def _version_text(source: str | None) -> str:
    if source is None or source == FORMAT_VERSION:
        return f"format {FORMAT_VERSION}"
    return f"format {source} (read as {FORMAT_VERSION})"


def _metadata_lines(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """``producer`` and ``framework`` in full, other keys by name only: metadata is free-form
    and may be large, and the SSA view is about structure."""
    lines: list[tuple[str, str]] = [
        (key, describe_metadata_value(metadata[key])) for key in ("producer", "framework") if key in metadata
    ]
    others = sorted(key for key in metadata if key not in ("producer", "framework"))
    if others:
        lines.append(("metadata", ", ".join(shown(key) for key in others)))
    return lines


def shown(text: str) -> str:
    """``text`` as a listing may print it: every character that is not printable (a newline,
    an ANSI escape, a lone surrogate) written as its Python escape, so that no name a document
    holds can forge a line of the review view or drive the terminal."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


def describe_metadata_value(value: Any) -> str:
    """A producer/framework entry in a few words: ``{"name": "trama", "version": "0.3.0"}`` reads
    ``trama 0.3.0``; a plain string as itself; anything else as compact JSON."""
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        version = value.get("version")
        return shown(f"{value['name']} {version}" if isinstance(version, str) else value["name"])
    if isinstance(value, str):
        return shown(value)
    return shown(_elide(json.dumps(value, ensure_ascii=False, sort_keys=True), _VALUE_WIDTH * 2))


def _signature(model: Model) -> str:
    inputs = ", ".join(_with_fact(name, _fact(model.input_facts, k)) for k, name in enumerate(model.inputs))
    outputs = [_with_fact(format_ref(ref), _fact(model.output_facts, k)) for k, ref in enumerate(model.outputs)]
    result = outputs[0] if len(outputs) == 1 else f"({', '.join(outputs)})"
    return f"model({inputs}) -> {result}"


def _fact(facts: list[ValueFact | None] | None, k: int) -> ValueFact | None:
    return facts[k] if facts is not None and k < len(facts) else None


def _with_fact(text: str, fact: ValueFact | None) -> str:
    if fact is None or (fact.dtype is None and fact.shape is None):
        return text
    return f"{text}: {_tensor_type(fact.dtype, fact.shape)}"


# --- parameter table ----------------------------------------------------------------------


def _parameter_table(table: dict[str, Parameter]) -> str:
    if not table:
        return "parameters: none"
    learnable = sum(entry.learnable for entry in table.values())
    title = f"parameters: {_plural(len(table), 'entry', 'entries')}, {learnable} learnable"
    rows = [("name", "type", "value", "learnable")]
    rows += [
        (name, format_value_type(entry.value), _short_value(entry.value), "learnable" if entry.learnable else "")
        for name, entry in table.items()
    ]
    return "\n".join([title, *_align(rows, indent="  ")])


def _short_value(value: Any) -> str:
    """Scalars and short lists as JSON; tensors and long lists stay out of a review view."""
    if isinstance(value, Tensor):
        return ""
    if isinstance(value, (list, tuple)) and len(value) > _LIST_ITEMS:
        return f"<{len(value)} items>"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # an in-memory model may hold what JSON cannot
        text = repr(value)
    return _elide(text, _VALUE_WIDTH)


def _elide(text: str, width: int) -> str:
    text = " ".join(text.split())  # one line, whatever the value holds
    return text if len(text) <= width else text[: width - 3] + "..."


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


# --- scopes -------------------------------------------------------------------------------


def _model_scope(model: Model, top: list[Node]) -> str:
    inputs = ", ".join(model.inputs)
    returns = ", ".join(format_ref(ref) for ref in model.outputs)
    body = [*_assignments(top), ("return " + returns if returns else "return",)]
    return "\n".join([f"model({inputs}):", *_align(body, indent="  ")])


def _composite_scope(node: Node, children: list[Node]) -> str:
    inputs = ", ".join(node.inputs)
    title = f"scope {node.id} = {shown(node.op)}({inputs}) -> ({', '.join(node.outputs)}):"
    bindings = node.output_bindings or {}
    returns = ", ".join(f"{name}={format_ref(ref)}" for name, ref in bindings.items())
    body = [*_assignments(children), ("return " + returns if returns else "return",)]
    return "\n".join([title, *_align(body, indent="  ")])


def _orphan_scopes(nodes: list[Node], children: dict[str | None, list[Node]]) -> list[str]:
    """Nodes whose parent is missing or is a leaf (an invalid model): shown, not dropped, so the
    view still accounts for every node."""
    composites = {node.id for node in nodes if node.is_composite}
    return [
        "\n".join([f"scope {parent} (not a composite of this model):", *_align(_assignments(orphans), indent="  ")])
        for parent, orphans in children.items()
        if parent is not None and parent not in composites
    ]


def _assignments(nodes: list[Node]) -> list[tuple[str, ...]]:
    """One row per node of a scope, in document order: outputs, ``= op(inputs)``, slots, notes."""
    return [(_targets(node), _expression(node), _slots(node), _notes(node)) for node in nodes]


def _targets(node: Node) -> str:
    if not node.outputs:
        return "()"
    return ", ".join(f"%{node.id}.{name}" for name in node.outputs)


def _expression(node: Node) -> str:
    """``= Linear(x=x)``, or ``= call root.lin(x=x)`` for a calling node."""
    head = f"call {node.calls}" if node.calls is not None else shown(node.op)
    return f"= {head}({_call_args(node)})"


def _call_args(node: Node) -> str:
    return ", ".join(f"{port}={format_ref(ref)}" for port, ref in node.inputs.items())


def _slots(node: Node) -> str:
    if not node.parameters:
        return ""
    own = f"{node.id}."
    parts = [slot if key == own + slot else f"{slot}=@{key}" for slot, key in node.parameters.items()]
    return "{" + ", ".join(parts) + "}"


def _notes(node: Node) -> str:
    """A trailing comment: a call's op, where a composite's body is, a node with no outputs,
    metadata keys."""
    notes = []
    if node.calls is not None:
        notes.append(shown(node.op))
    if node.is_composite:
        notes.append(f"scope {node.id}")
    elif not node.outputs:
        notes.append(f"node {node.id}")
    if node.metadata:
        notes.append("meta: " + ", ".join(shown(key) for key in sorted(node.metadata)))
    return "# " + "; ".join(notes) if notes else ""


def _align(rows: Sequence[tuple[str, ...]], *, indent: str) -> list[str]:
    """Pad every column but each row's last to a common width (capped), then strip trailing
    blanks. A row's last cell sets no width (a long ``return`` line does not widen the
    columns above it), and empty columns take no space.
    """
    count = max(len(row) for row in rows)
    widths = [min(_COLUMN_CAP, max((len(row[k]) for row in rows if k < len(row) - 1), default=0)) for k in range(count)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[k]) for k, cell in enumerate(row[:-1]) if widths[k]]
        lines.append((indent + "  ".join([*cells, row[-1]])).rstrip())
    return lines
