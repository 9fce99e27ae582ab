"""A model as SSA text, for people: code review, diffs in a pull request, a quick look at a file.

The JSON document is the format; this text is only a view of it, and nothing reads it back. It
answers a reviewer's questions top-down: what goes in and out, then how each scope is wired and
with which settings, a block that repeats (the layers of a stack) written once. ``trama ssa
FILE`` prints it; ``--depth N`` and ``--tensors`` are the keyword options of :func:`to_ssa`.
The toy MLP of the tests (``Linear(4 -> 8)``, ``ReLU``, ``Linear(8 -> 3)``)::

    # trama format 1.2; producer: trama 0.4.0; opsets: trama=2
    # tensors: 4 entries, 4 learnable, 67 values
    model(x) -> %root

    %root = Sequential(x):
      %layers_0 = Linear(4, 8, bias)(x)
      %layers_1 = ReLU(%layers_0)
      %layers_2 = Linear(8, 3, bias)(%layers_1)
      return %layers_2

and excerpts of a Llama of two layers exported by ``trama.export_model`` with example inputs
(the zoo's ``hf_llama``: 102 lines in all, where ``torch.export``'s ``print_readable`` has
348); its decoder layers and its three RMS norms are blocks that repeat::

    model(input_ids: i64[2, 8], attention_mask: i64[2, 8]) -> %root.logits: f32[2, 8, 128]

    %root.logits: f32[2, 8, 128] = LlamaForCausalLM(input_ids, attention_mask):
      %model.last_hidden_state = LlamaModel(input_ids, attention_mask):
        %embed_tokens = Embedding(128, 32)(input_ids)
        %to = to("bool")(attention_mask)
        %unsqueeze: i64[2, 1, 1, 1] = constant()
        %unsqueeze_1: i64[1, 1, 1, 8] = constant()
        %index = %to[%unsqueeze, %unsqueeze_1]
        ...
        %layers = ModuleList(hidden_states=%embed_tokens, attention_mask=%where,
            position_embeddings_0=%rotary_emb.y0, position_embeddings_1=%rotary_emb.y1):
          %0 = LlamaDecoderLayer#1(hidden_states, attention_mask, position_embeddings_0,
              position_embeddings_1):
            %input_layernorm = LlamaRMSNorm#1(hidden_states):
              %pow = pow(hidden_states, 2)
              %mean = mean(dim=[-1], keepdim=true)(%pow)
              %add = add(%mean, 1e-06)
              ...
            %self_attn.y0, %self_attn.y1 = LlamaAttention(hidden_states=%input_layernorm,
                position_embeddings_0, position_embeddings_1, attention_mask):
              %q_proj = Linear(32, 32)(hidden_states)
              %view = reshape([2, 8, -1, 16])(%q_proj)
              %transpose = transpose(1, 2)(%view)
              ...
              %slice = %transpose[:, :, :, :8]
              ...
              return %o_proj, %softmax
            %add = add(hidden_states, %self_attn.y0)
            %post_attention_layernorm = LlamaRMSNorm#1(hidden_states=%add)
            ...
          %1 = LlamaDecoderLayer#1(hidden_states=%0, attention_mask, position_embeddings_0,
              position_embeddings_1)
          return %1
        %norm = LlamaRMSNorm#1(hidden_states=%layers)
        return %norm
      %lm_head: f32[2, 8, 128] = Linear(32, 128)(%model.last_hidden_state)
      return %lm_head

Reading rules:

* **Header.** ``#`` lines: the format version the file was written in (and the one it was
  read as, when they differ), producer, framework, opsets, other metadata keys by name, and
  the tensors' count. Then the
  signature: each model input with its dtype and shape (from the document's input facts,
  ``f32[batch, 8]``; nothing where the document states none) and the outputs likewise.
* **Scopes.** The top-level nodes come at the left margin, then each composite's body is
  indented under its own line, which ends with ``:``; a body ends with ``return``, its values
  in the order of the composite's outputs. A node's *depth* is the number of segments of its id:
  the top-level nodes (``root``) are at depth 1, their children (``root.model``) at depth 2.
  ``--depth N`` prints nodes down to depth N, a composite at depth N as its one line (no body).
  A body nested more than 16 levels deep follows the graph in a section of its own, ``scope
  <full id>:`` (its composite's line says so), so that indentation never eats the line.
* **Values.** Inside a scope, a bare name (``hidden_states``) is an input of that scope, and
  ``%name`` is the value of the sibling node ``name`` (its one output, ``y`` as the catalog
  names it), ``%name.out`` its output ``out`` (``%model.last_hidden_state``, ``%split.lo``).
  A node that has no outputs is written ``() = op(...)  # node name``. A reference that leaves
  its scope (only an invalid document has one) is written with the full id, ``%root.enc.y``.
  ``%name: f32[2, 8, 32]`` gives a value's dtype and shape where they are *known*: the model
  inputs' and outputs' facts, a ``constant``'s tensor, and what flows from those through the
  wiring into and out of composites. No op's result type is inferred (the catalog has no shape
  inference, and nothing is run), so no type is printed rather than a guessed one; inside a
  repeated block the types are those of the instance whose body is shown.
* **Leaf ops** read ``op(settings)(inputs)``: ``Linear(32, 64, bias)(%x)``,
  ``transpose(1, 2)(%view)``, ``relu(%x)`` (no settings, no first parentheses). For an op of
  the standard catalog whose slots the node uses: its required settings by value in the op's
  slot order, its optional ones as ``slot=value`` where they differ from the catalog's
  documented default (left out where they do not), and an optional learned tensor (a ``bias``)
  by its name when present; a required tensor (a weight, a constant's value) and a buffer (a
  norm's running statistics) are left out of the line: ``--tensors`` lists them. Inputs are
  positional in the op's port order, and a constant given in place of a port (the ``0.25`` of
  ``mul(%x, 0.25)``) takes that port's place; ports beyond the op's own are ``port=value``,
  unless they continue its numbering (``concat``'s ``x1`` after ``x0``). A ``getitem`` reads
  as Python's subscript, ``%x[:, :8]``, ``%x[%i0, None, ...]``. An op outside the catalog
  writes every setting ``slot=value``, every tensor slot by its name, and its inputs
  ``port=value``.
* **Composites** read ``Label(port=value, ...)``, where the label is the short name of the
  ``class`` the exporter recorded (``LlamaDecoderLayer``) for a ``Graph``, else the op; an
  argument that is the enclosing scope's input of the same name as the port is written by
  that name alone (``LlamaModel(input_ids, attention_mask)``). A composite with slots of its
  own writes them first, as an op outside the catalog does: ``Net(scale=0.5)(a, b)``.
* **Repeated blocks.** Composites anywhere in the model with the same structure (same op,
  ``class``, wiring, settings, tensor shapes and dtypes, shared entries; see
  :mod:`trama.tools._repeats`) get one label, ``LlamaDecoderLayer#1``: the first one printed
  shows the body, the definition, and every other one is its one line.
* **Shared entries.** A slot whose entry is not the usual ``<node id>.<slot>`` stands out:
  ``weight=@root.embed.weight`` for a tensor, ``out_features=@dims.hidden=8`` for a setting.
* **Calls.** ``%again = call root.block(x=%relu)  # Sequential`` runs node ``root.block``
  (whose op the comment repeats) again, on these inputs.
* **Tensors.** ``--tensors`` appends the table of entries that are not a node's own setting:
  every tensor (dtype, shape, ``learnable``), and each shared or unused setting with its value.
* **Layout.** Lines fit 100 columns: a longer one continues on lines indented 4 more, broken
  after a ``,`` or the `` = `` where it can be (inside a dtype's shape only when the shape
  alone is longer than the line), after a ``.`` of a long id, and a value is never cut short:
  only a string or name longer than the line is split where the line ends. Names a document
  holds are printed with every unprintable character escaped (:func:`shown`).

The output is deterministic: the same model always gives the same text, so two renderings diff
cleanly. Works on any model the decoder produces, valid or not: a slot naming a missing entry,
a reference to a missing node, a node whose parent is absent or a leaf, are all still rendered
(the last under ``scope <id> (not a composite of this model):`` at the end).
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from trama.format._lazy import is_tensor
from trama.format._model import Model, Node, Parameter, Ref, ValueFact, children_by_parent, parent_of
from trama.format._sizes import SizeExpr
from trama.format._specs import NO_DEFAULT, OpSpec, value_type
from trama.tools._repeats import repeated_blocks
from trama.version import FORMAT_VERSION

__all__ = ["SHORT_DTYPES", "describe_metadata_value", "format_ref", "format_value_type", "shown", "to_ssa"]

#: Short dtype names for types (``f32[16, 8]``), as compilers' IRs write them.
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

#: The width the text fits in.
WIDTH = 100
#: A body nested deeper than this many levels is printed in a section of its own after the
#: graph (``scope <id>:``), so that indentation never eats the line.
_MAX_NESTING = 16
#: Continuation lines are indented this much more than the line they continue.
_CONTINUATION = 4
#: ... but never further than this, so that a deep scope's long line still has room.
_MAX_INDENT = 48
#: A metadata value in the header is cut to this many characters (metadata is free-form).
_METADATA_WIDTH = 80
#: No aligned column of the tensor table is padded wider than this.
_COLUMN_CAP = 60
#: Stands for ", " inside a type while lines are wrapped: a shape is not broken across lines.
_KEEP = "\x00"


def to_ssa(model: Model, *, depth: int | None = None, tensors: bool = False) -> str:
    """Render ``model`` as SSA text (see the module docstring); the text ends with a newline.

    ``depth``: print nodes down to that depth only (the top-level nodes are depth 1), a
    composite at that depth as its one line; ``None`` prints every scope. ``tensors``: append
    the table of tensors and shared settings. Works on any model the decoder produces, valid or
    not, and reads no tensor's data.
    """
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be 0 or more, got {depth}")
    view = _View(model, depth)
    sections = ["\n".join([*_header(model), _wrap(_signature(view), "")]), *view.graph()]
    sections += view.orphans()
    if tensors:
        sections.append("\n".join(_tensor_table(model)))
    return "\n\n".join(section for section in sections if section) + "\n"


def format_ref(ref: Ref) -> str:
    """A reference with its full node id: a bare input name, or ``%<node id>.<output>``."""
    return ref.output if ref.is_input else f"%{ref.node}.{ref.output}"


def format_value_type(value: Any) -> str:
    """The type of a parameter value: ``f32[16, 8]``, ``int``, ``string``, ``list``..."""
    return _value_type(value).replace(_KEEP, " ")


def format_value(value: Any) -> str:
    """A setting's value as a document writes it (``true``, ``1e-06``, ``"bool"``, ``[2, 8, -1]``),
    a tensor as its type (``f32[16, 8]``), a size as its expression (``seq + 1``): one text for
    every tool that shows a value (``trama ssa``, ``trama diff``, ``trama view``, adapters)."""
    return _literal(value).replace(_KEEP, " ")


def format_fact(fact: ValueFact | None) -> str | None:
    """A value's facts as a type (``f32[batch, 8]``, ``?`` for what they leave unknown), or
    ``None`` when they say nothing."""
    text = _fact_type(fact)
    return None if text is None else text.replace(_KEEP, " ")


def _value_type(value: Any) -> str:
    if is_tensor(value):
        return _tensor_type(value.dtype, value.shape)
    return value_type(value)


def shown(text: str) -> str:
    """``text`` as a listing may print it: every character that is not printable (a newline,
    an ANSI escape, a lone surrogate) written as its Python escape, so that no name a document
    holds can forge a line of the review view or drive the terminal."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


def describe_metadata_value(value: Any) -> str:
    """A producer/framework entry in a few words: ``{"name": "trama", "version": "0.3.0"}`` reads
    ``trama 0.3.0``; a plain string as itself; anything else as compact JSON, cut short."""
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        version = value.get("version")
        return shown(f"{value['name']} {version}" if isinstance(version, str) else value["name"])
    if isinstance(value, str):
        return shown(value)
    text = " ".join(_json_text(value, sort_keys=True).split())
    return shown(text if len(text) <= _METADATA_WIDTH else text[: _METADATA_WIDTH - 3] + "...")


# --- values -------------------------------------------------------------------------------


def _tensor_type(dtype: str | None, shape: Sequence[int | str] | None) -> str:
    name = SHORT_DTYPES.get(dtype, shown(dtype)) if dtype is not None else "?"
    dims = "?" if shape is None else f",{_KEEP}".join(shown(str(d)) for d in shape)
    return f"{name}[{dims}]"


def _fact_type(fact: ValueFact | None) -> str | None:
    if fact is None or (fact.dtype is None and fact.shape is None):
        return None
    return _tensor_type(fact.dtype, fact.shape)


def _json_text(value: Any, *, sort_keys: bool = False) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys)
    except (TypeError, ValueError):  # an in-memory model may hold what JSON cannot
        return repr(value)


def _literal(value: Any) -> str:
    """A setting's value as a document writes it (``true``, ``null``, ``1e-06``, ``"bool"``,
    ``[2, 8, -1]``), whole; a tensor as its type; a size read from the inputs as its expression,
    bare (``[batch, seq, 12, 64]``: a string would be quoted)."""
    if is_tensor(value):
        return _tensor_type(value.dtype, value.shape)
    if isinstance(value, SizeExpr):
        return shown(value.text)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return shown(_json_text(value))


def _plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


# --- header -------------------------------------------------------------------------------


def _header(model: Model) -> list[str]:
    parts = [_version_text(model.source_format_version)]
    parts += [f"{key}: {text}" for key, text in _metadata_parts(model.metadata)]
    if model.opsets:
        opsets = sorted(model.opsets.items())
        parts.append("opsets: " + ", ".join(f"{shown(name)}={version}" for name, version in opsets))
    lines = _wrap("# " + "; ".join(parts), "", continuation="#   ").split("\n")
    counted = [entry for entry in model.parameters.values() if is_tensor(entry.value)]
    if counted:
        learnable = sum(entry.learnable for entry in counted)
        values = sum(math.prod(entry.value.shape) for entry in counted if is_tensor(entry.value))
        entries = _plural(len(counted), "entry", "entries")
        lines.append(f"# tensors: {entries}, {learnable:,} learnable, {values:,} values")
    return lines


def _version_text(source: str | None) -> str:
    if source is None or source == FORMAT_VERSION:
        return f"trama format {FORMAT_VERSION}"
    return f"trama format {shown(source)} (read as {FORMAT_VERSION})"


def _metadata_parts(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """``producer`` and ``framework`` in full, other keys by name only: metadata is free-form
    and may be large, and the SSA view is about structure."""
    parts: list[tuple[str, str]] = [
        (key, describe_metadata_value(metadata[key])) for key in ("producer", "framework") if key in metadata
    ]
    others = sorted(key for key in metadata if key not in ("producer", "framework"))
    if others:
        parts.append(("metadata", ", ".join(shown(key) for key in others)))
    return parts


def _signature(view: _View) -> str:
    model = view.model
    inputs = [_typed(shown(name), _fact_type(_fact(model.input_facts, k))) for k, name in enumerate(model.inputs)]
    facts = model.output_facts
    outputs = [_typed(view.ref_text(ref, None), _fact_type(_fact(facts, k))) for k, ref in enumerate(model.outputs)]
    result = outputs[0] if len(outputs) == 1 else f"({', '.join(outputs)})"
    ranges = [
        bounds.describe().replace("size", shown(symbol))
        for symbol, bounds in sorted((model.symbols or {}).items())
        if bounds.min is not None or bounds.max is not None
    ]
    where = f" where {', '.join(ranges)}" if ranges else ""
    return f"model({', '.join(inputs)}) -> {result}{where}"


def _fact(facts: list[ValueFact | None] | None, k: int) -> ValueFact | None:
    return facts[k] if facts is not None and k < len(facts) else None


def _typed(text: str, type_text: str | None) -> str:
    return text if type_text is None else f"{text}: {type_text}"


# --- the catalog, for settings and ports --------------------------------------------------


def _catalog() -> dict[str, OpSpec]:
    from trama.catalog import standard_specs_by_name

    return standard_specs_by_name()


@functools.cache
def _default(op: str, slot: str) -> Any:
    """The default of a catalog op's optional setting (:attr:`ParameterSchema.default`), or
    :data:`NO_DEFAULT`."""
    spec = _catalog().get(op)
    schema = spec.slot(slot) if spec is not None else None
    if schema is None or not schema.optional:
        return NO_DEFAULT
    return schema.default


def _same(a: Any, b: Any) -> bool:
    """Whether a setting's value is its default: equal numbers are (``2`` and ``2.0``, as a
    float slot accepts an int), a bool is not a number, lists compare item by item."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return a == b
    return type(a) is type(b) and a == b


def _catalog_spec(node: Node) -> OpSpec | None:
    """The catalog's spec of a leaf's op, if the node uses only slots that spec declares."""
    if node.is_composite:
        return None
    found = _leaf_specs().get(node.op)
    if found is None:
        return None
    spec, declared = found
    return spec if all(slot in declared for slot in node.parameters) else None


@functools.cache
def _leaf_specs() -> dict[str, tuple[OpSpec, frozenset[str]]]:
    """The catalog's leaf ops, each with its slot names."""
    return {
        name: (spec, frozenset(schema.name for schema in spec.parameters))
        for name, spec in _catalog().items()
        if not spec.composite
    }


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _continues(port: str, previous: str | None) -> bool:
    """Whether a variadic port continues the numbering of the one before (``x1`` after ``x0``)."""
    if previous is None:
        return False
    a, b = _NUMBERED.match(previous), _NUMBERED.match(port)
    return a is not None and b is not None and a.group(1) == b.group(1) and int(b.group(2)) == int(a.group(2)) + 1


# --- the graph ----------------------------------------------------------------------------


@dataclass
class _Frame:
    """A scope being printed: its composite (``None``: the model's top level), the children
    left to print, their indentation and the ``return`` line that closes it."""

    scope: Node | None
    nodes: Iterator[Node]
    indent: str
    returns: str | None = None


@dataclass
class _View:
    """What printing one model needs: its nodes by id and scope, which composites show their
    body and their labels, the known types. One view prints once (:meth:`graph` uses up
    :attr:`bodies`)."""

    model: Model
    depth: int | None
    by_id: dict[str, Node] = field(init=False)
    children: dict[str | None, list[Node]] = field(init=False)
    order: list[Node] = field(init=False)
    labels: dict[str, str] = field(init=False, default_factory=dict)
    bodies: set[str] = field(init=False, default_factory=set)
    facts: dict[tuple[str, str | None, str], ValueFact] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.by_id = {}
        for node in self.model.nodes:
            self.by_id.setdefault(node.id, node)
        self.children = children_by_parent(self.model.nodes)
        self.order = list(self._visit_order())
        self._plan()
        self._known_types()

    # -- repeated blocks and labels --

    def _plan(self) -> None:
        """Which composites show their body, and their labels: walking the lines in print
        order, a composite shows its body unless the depth stops it or a composite of the same
        structure showed its body before; the structures that two printed lines share are
        labelled ``Label#k``, numbered per label in the order they are first printed."""
        composites = [node.id for node in self.order if node.is_composite]
        structure: dict[str, tuple[str, Any]] = {node_id: ("alone", node_id) for node_id in composites}
        for number, ids in enumerate(repeated_blocks(self.model, composites)):
            structure.update(dict.fromkeys(ids, ("group", number)))
        printed: dict[tuple[str, Any], list[str]] = {}
        shown_bodies: set[tuple[str, Any]] = set()
        stack: list[tuple[Iterator[Node], int]] = [(iter(self.children.get(None, [])), 1)]
        while stack:
            nodes, depth = stack[-1]
            node = next(nodes, None)
            if node is None:
                stack.pop()
                continue
            key = structure.get(node.id)
            if key is None:
                continue
            printed.setdefault(key, []).append(node.id)
            if (self.depth is None or depth < self.depth) and key not in shown_bodies:
                shown_bodies.add(key)
                self.bodies.add(node.id)
                stack.append((iter(self.children.get(node.id, [])), depth + 1))
        per_label: dict[str, int] = {}
        for ids in printed.values():
            label = _composite_label(self.by_id[ids[0]])
            if len(ids) > 1:
                per_label[label] = per_label.get(label, 0) + 1
                label = f"{label}#{per_label[label]}"
            for node_id in ids:
                self.labels[node_id] = label

    def _visit_order(self) -> Iterator[Node]:
        """Every node reachable from the top level, parents before children, in print order."""
        stack: list[Iterator[Node]] = [iter(self.children.get(None, []))]
        seen: set[int] = set()
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
                continue
            if id(node) in seen:  # a duplicated id lists a node under itself
                continue
            seen.add(id(node))
            yield node
            if node.is_composite:
                stack.append(iter(self.children.get(node.id, [])))

    # -- known types --

    def _known_types(self) -> None:
        """The types the view can state without inference: model input and output facts,
        constants' tensors, and what the wiring carries of them into and out of composites."""
        model = self.model
        for k, name in enumerate(model.inputs):
            fact = _fact(model.input_facts, k)
            if fact is not None:
                self.facts[("in", None, name)] = fact
        for node in self.order:
            scope = node.parent
            if node.op == "constant" and len(node.outputs) == 1 and not node.is_composite:
                entry = model.parameters.get(node.parameters.get("value", ""))
                if entry is not None and is_tensor(entry.value):
                    fact = ValueFact(entry.value.dtype, tuple(entry.value.shape))
                    self.facts[("out", node.id, node.outputs[0])] = fact
            if node.is_composite:
                for port, ref in node.inputs.items():
                    fact = self.facts.get(self._key(ref, scope))
                    if fact is not None:
                        self.facts.setdefault(("in", node.id, port), fact)
        for node in reversed(self.order):
            for output, ref in (node.output_bindings or {}).items():
                fact = self.facts.get(self._key(ref, node.id))
                if fact is not None:
                    self.facts.setdefault(("out", node.id, output), fact)
        for k, ref in enumerate(model.outputs):
            self._known_backwards(ref, None, _fact(model.output_facts, k))

    def _known_backwards(self, ref: Ref, scope: str | None, fact: ValueFact | None) -> None:
        """An output fact, down the bindings to the node inside that computes it."""
        seen: set[str] = set()
        while fact is not None:
            key = self._key(ref, scope)
            self.facts.setdefault(key, fact)
            node = self.by_id.get(ref.node)
            if ref.is_input or node is None or node.output_bindings is None or node.id in seen:
                return
            seen.add(node.id)
            inner = node.output_bindings.get(ref.output)
            if inner is None:
                return
            ref, scope = inner, node.id

    @staticmethod
    def _key(ref: Ref, scope: str | None) -> tuple[str, str | None, str]:
        return ("in", scope, ref.output) if ref.is_input else ("out", ref.node, ref.output)

    # -- printing --

    def graph(self) -> list[str]:
        """The top-level scope and every body it shows, one wrapped line per node: one section,
        and one more for each body nested too deep to indent (see :data:`_MAX_NESTING`)."""
        if self.depth == 0:
            return []
        sections: list[str] = []
        pending: list[Node | None] = [None]
        while pending:
            scope = pending.pop(0)
            lines: list[str] = []
            if scope is None:
                stack = [_Frame(None, iter(self.children.get(None, [])), "")]
            else:
                lines.append(_wrap(f"scope {shown(scope.id)}:", ""))
                stack = [self._frame(scope, "  ")]
            while stack:
                frame = stack[-1]
                node = next(frame.nodes, None)
                if node is None:
                    stack.pop()
                    if frame.returns is not None:
                        lines.append(_wrap(frame.returns, frame.indent))
                    continue
                body = node.id in self.bodies
                self.bodies.discard(node.id)  # a duplicated id shows its body once
                deferred = body and len(frame.indent) >= 2 * _MAX_NESTING
                line = self._line(node, frame.scope, body and not deferred)
                lines.append(_wrap(line + ("  # body: see scope " + shown(node.id) if deferred else ""), frame.indent))
                if deferred:
                    pending.append(node)
                elif body:
                    stack.append(self._frame(node, frame.indent + "  "))
            sections.append("\n".join(lines))
        return sections

    def _frame(self, node: Node, indent: str) -> _Frame:
        return _Frame(node, iter(self.children.get(node.id, [])), indent, self._returns(node))

    def orphans(self) -> list[str]:
        """Nodes whose parent is missing or is a leaf (an invalid model): shown, not dropped, so
        the view still accounts for every node."""
        sections = []
        for parent, nodes in self.children.items():
            owner = self.by_id.get(parent) if parent is not None else None
            if parent is None or (owner is not None and owner.is_composite):
                continue
            title = _wrap(f"scope {shown(parent)} (not a composite of this model):", "")
            lines = [_wrap(self._line(node, owner, False, scope_id=parent), "  ") for node in nodes]
            sections.append("\n".join([title, *lines]))
        return sections

    def _line(self, node: Node, scope: Node | None, body: bool, *, scope_id: str | None = None) -> str:
        """``targets = expression`` for one node, ``:`` at the end when its body follows."""
        where = scope.id if scope is not None else scope_id
        if node.outputs:
            targets = ", ".join(
                _typed(self._output_name(node, output), self._type(("out", node.id, output))) for output in node.outputs
            )
        else:
            targets = "()"
        if node.calls is not None:
            expression = f"call {shown(node.calls)}({self._keyword_args(node, where)})  # {shown(node.op)}"
        elif node.is_composite:
            settings = self._settings(node, None)
            head = self.labels.get(node.id, _composite_label(node)) + (f"({settings})" if settings else "")
            expression = f"{head}({self._keyword_args(node, where)})"
        else:
            expression = self._leaf(node, where)
        note = f"  # node {shown(node.name)}" if not node.outputs else ""
        return f"{targets} = {expression}{':' if body else ''}{note}"

    def _output_name(self, node: Node, output: str) -> str:
        name = shown(node.name)
        return f"%{name}" if node.outputs == ["y"] else f"%{name}.{shown(output)}"

    def _type(self, key: tuple[str, str | None, str]) -> str | None:
        return _fact_type(self.facts.get(key))

    def ref_text(self, ref: Ref, scope: str | None) -> str:
        """A reference as it reads inside ``scope``: an input's name, ``%name`` (its one output
        ``y``) or ``%name.output`` for a sibling, the full id for anything else."""
        if ref.is_input:
            return shown(ref.output)
        node = self.by_id.get(ref.node)
        if node is not None and parent_of(ref.node) == scope:
            name = shown(node.name)
            return f"%{name}" if node.outputs == ["y"] == [ref.output] else f"%{name}.{shown(ref.output)}"
        return f"%{shown(ref.node)}.{shown(ref.output)}"

    def _keyword_args(self, node: Node, scope: str | None) -> str:
        return ", ".join(self._keyword(port, ref, scope) for port, ref in node.inputs.items())

    def _keyword(self, port: str, ref: Ref, scope: str | None) -> str:
        if ref.is_input and ref.output == port:
            return shown(port)
        return f"{shown(port)}={self.ref_text(ref, scope)}"

    def _returns(self, node: Node) -> str:
        bindings = node.output_bindings or {}
        if list(bindings) == node.outputs:
            values = [self.ref_text(ref, node.id) for ref in bindings.values()]
        else:
            values = [f"{shown(name)}={self.ref_text(ref, node.id)}" for name, ref in bindings.items()]
        return "return " + ", ".join(values) if values else "return"

    # -- leaves --

    def _leaf(self, node: Node, scope: str | None) -> str:
        """``op(settings)(inputs)``; see the module docstring for what is written how."""
        spec = _catalog_spec(node)
        if spec is not None and node.op == "getitem":
            subscript = self._subscript(node, scope)
            if subscript is not None:
                return subscript
        if spec is None:
            settings = self._settings(node, None)
            inputs = self._keyword_args(node, scope)
        else:
            inputs, operands = self._catalog_inputs(node, spec, scope)
            settings = self._settings(node, spec, skip=operands)
        head = shown(node.op) + (f"({settings})" if settings else "")
        return f"{head}({inputs})"

    def _subscript(self, node: Node, scope: str | None) -> str | None:
        """A catalog ``getitem`` as Python writes it, ``%x[:, :8]``, ``%x[%i0, None, ...]``; ``None``
        when its index is not one the catalog defines (then it reads like any other op)."""
        key = node.parameters.get("index")
        entry = self.model.parameters.get(key) if key is not None else None
        if entry is None or key != f"{node.id}.index" or "x" not in node.inputs:
            return None
        index = entry.value
        if not isinstance(index, list):
            return None
        ports = {port for port in node.inputs if port != "x"}
        items = []
        for item in index:
            text = _index_item(item, ports)
            if text is None:
                return None
            if text.startswith("%"):
                ports.discard(text[1:])
                text = self.ref_text(node.inputs[text[1:]], scope)
            items.append(text)
        if ports:  # a port no item names
            return None
        return f"{self.ref_text(node.inputs['x'], scope)}[{', '.join(items)}]"

    def _catalog_inputs(self, node: Node, spec: OpSpec, scope: str | None) -> tuple[str, set[str]]:
        """A catalog leaf's inputs: positional in port order, a constant operand in its port's
        place; the rest ``port=value``. Returns the text and the operand slots it used."""
        ports = list(spec.inputs) + [port for port in spec.optional_inputs if port not in spec.inputs]
        args: list[str] = []
        used: set[str] = set()
        operands: set[str] = set()
        previous: str | None = None
        positional = True
        for port in ports:
            if port in node.inputs:
                args.append(self.ref_text(node.inputs[port], scope))
                used.add(port)
            elif port in node.parameters:
                args.append(self._operand(node, port))
                operands.add(port)
            else:
                positional = False
                break
            previous = port
        rest = [port for port in node.inputs if port not in used]
        for port in rest:
            ref = node.inputs[port]
            if positional and spec.variadic_inputs and port not in ports and _continues(port, previous):
                args.append(self.ref_text(ref, scope))
                previous = port
            else:
                positional = False
                args.append(f"{shown(port)}={self.ref_text(ref, scope)}")
        for port in ports:
            if port in node.parameters and port not in operands and port not in node.inputs:
                args.append(f"{shown(port)}={self._operand(node, port)}")
                operands.add(port)
        return ", ".join(args), operands

    def _operand(self, node: Node, slot: str) -> str:
        key = node.parameters[slot]
        entry = self.model.parameters.get(key)
        if key != f"{node.id}.{slot}" or entry is None:
            return self._shared(key, entry)
        return _literal(entry.value)

    def _shared(self, key: str, entry: Parameter | None) -> str:
        """A slot's entry that is not the node's own: ``@entry``, and ``=value`` for a setting."""
        if entry is None or is_tensor(entry.value):
            return f"@{shown(key)}"
        return f"@{shown(key)}={_literal(entry.value)}"

    def _settings(self, node: Node, spec: OpSpec | None, *, skip: set[str] | None = None) -> str:
        """A node's slots as the module docstring says: values, ``slot=value``, tensor slots
        by name, shared entries as ``@entry``."""
        parts: list[str] = []
        order = [schema.name for schema in spec.parameters] if spec is not None else list(node.parameters)
        positional = spec is not None
        for slot in order:
            if skip and slot in skip:
                continue
            key = node.parameters.get(slot)
            schema = spec.slot(slot) if spec is not None else None
            if key is None:
                if schema is not None and not schema.optional:
                    positional = False
                continue
            entry = self.model.parameters.get(key)
            own = key == f"{node.id}.{slot}" and entry is not None
            name = shown(slot)
            if not own:
                parts.append(f"{name}={self._shared(key, entry)}")
                positional = False
                continue
            assert entry is not None
            value = entry.value
            if is_tensor(value):
                if schema is None or (schema.optional and schema.learnable is not False):
                    parts.append(name)  # a tensor outside the catalog, an optional weight (a bias)
                continue
            if schema is None:
                parts.append(f"{name}={_literal(value)}")
            elif not schema.optional:
                parts.append(_literal(value) if positional else f"{name}={_literal(value)}")
            else:
                default = _default(node.op, slot)
                absent_tensor = value is None and "tensor" in schema.types and default is NO_DEFAULT
                if not absent_tensor and (default is NO_DEFAULT or not _same(value, default)):
                    parts.append(f"{name}={_literal(value)}")
        return ", ".join(parts)


def _index_item(item: Any, ports: set[str]) -> str | None:
    """One item of a catalog ``getitem`` index in Python's spelling (``%i0`` for a tensor port),
    or ``None`` for anything else."""
    if item is None:
        return "None"
    if item == "...":
        return "..."
    if isinstance(item, str):
        return f"%{item}" if item in ports else None
    if isinstance(item, int) and not isinstance(item, bool):
        return str(item)
    if isinstance(item, list) and len(item) == 3:
        if not all(part is None or (isinstance(part, int) and not isinstance(part, bool)) for part in item):
            return None
        start, stop, step = ("" if part is None else str(part) for part in item)
        return f"{start}:{stop}" + (f":{step}" if step else "")
    return None


def _composite_label(node: Node) -> str:
    """A ``Graph``'s label is the short name of its recorded class; any other op is itself."""
    cls = (node.metadata or {}).get("class")
    if node.op == "Graph" and isinstance(cls, str) and cls:
        return shown(cls.rpartition(".")[2] or cls)
    return shown(node.op)


# --- tensors ------------------------------------------------------------------------------


def _tensor_table(model: Model) -> list[str]:
    """Every entry that is not one node's own setting: tensors, and shared or unused settings."""
    uses: dict[str, list[str]] = {}
    for node in model.nodes:
        for slot, key in node.parameters.items():
            uses.setdefault(key, []).append(f"{node.id}.{slot}")
    rows = []
    for name, entry in model.parameters.items():
        value = entry.value
        if not is_tensor(value) and uses.get(name) == [name]:
            continue
        rows.append(
            (
                shown(name),
                _value_type(value),
                "learnable" if entry.learnable else "",
                "" if is_tensor(value) else _literal(value),
            )
        )
    tensors = [entry for entry in model.parameters.values() if is_tensor(entry.value)]
    learnable = sum(entry.learnable for entry in tensors)
    title = f"tensors: {_plural(len(tensors), 'entry', 'entries')}, {learnable:,} learnable"
    if len(rows) > len(tensors):
        title += f"; shared or unused settings: {len(rows) - len(tensors):,}"
    if not rows:
        return [title]
    widths = [min(_COLUMN_CAP, max(len(row[k]) for row in rows)) for k in range(3)]
    lines = [title]
    for row in rows:
        cells = [cell.ljust(widths[k]) for k, cell in enumerate(row[:3])]
        lines.append(_wrap("  ".join([*cells, row[3]]).rstrip(), "  "))
    return lines


# --- wrapping -----------------------------------------------------------------------------


def _wrap(text: str, indent: str, *, continuation: str | None = None) -> str:
    """``indent + text`` in lines of at most :data:`WIDTH` columns: broken after the last
    ``", "`` or `` = `` that fits, outside string literals, else after the last ``.`` that fits (a long
    dotted id), else after a comma of a shape (one longer than a line), else at the line's end;
    continued ``_CONTINUATION`` columns deeper (or with ``continuation``). Nothing is dropped:
    joined back, the lines are the text."""
    if len(indent) + len(text) <= WIDTH:
        return (indent + text).replace(_KEEP, " ")
    more = continuation if continuation is not None else " " * min(len(indent) + _CONTINUATION, _MAX_INDENT)
    commas, dots, shapes = _break_points(text)
    lines: list[str] = []
    start, prefix = 0, indent
    while True:
        room = max(WIDTH - len(prefix), 1)
        if len(text) - start <= room:
            lines.append(prefix + text[start:])
            break
        end = (
            _last_fit(commas, start, room)
            or _last_fit(dots, start, room)
            or _last_fit(shapes, start, room)
            or start + room
        )
        lines.append((prefix + text[start:end]).rstrip())
        start = end
        while start < len(text) and text[start] in (" ", _KEEP):
            start += 1
        prefix = more
        if start >= len(text):
            break
    return "\n".join(lines).replace(_KEEP, " ")


def _last_fit(points: list[int], start: int, room: int) -> int | None:
    """The last of ``points`` that ends a line begun at ``start`` within ``room`` columns."""
    index = bisect.bisect_right(points, start + room) - 1
    return points[index] if index >= 0 and points[index] > start else None


def _break_points(text: str) -> tuple[list[int], list[int], list[int]]:
    """Offsets just after each ``", "`` and `` = ``, each ``.`` and each comma of a shape that
    lie outside a JSON string literal."""
    commas: list[int] = []
    dots: list[int] = []
    shapes: list[int] = []
    quoted = escaped = False
    for index, char in enumerate(text):
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif (char == "," and text.startswith(", ", index)) or (char == "=" and text.startswith(" = ", index - 1)):
            commas.append(index + 1)
        elif char == ",":
            shapes.append(index + 1)
        elif char == ".":
            dots.append(index + 1)
    return commas, dots, shapes
