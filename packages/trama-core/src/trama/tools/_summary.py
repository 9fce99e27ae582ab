"""What is in a model, in numbers: the facts ``trama info`` prints.

A summary answers "what is this file?" without reading its weights. Tensor sizes come from each
tensor's dtype and shape (:attr:`Tensor.nbytes`), never from its data, so summarising a model
with gigabytes of weights costs time in proportion to its structure only, and a tensor whose
bytes are corrupt or whose external file is missing is still counted.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

from trama.format._dtypes import DTYPE_NAMES
from trama.format._external import ExternalSource, UnresolvedExternal
from trama.format._model import Model, Node, ValueFact
from trama.format._tensor import Tensor
from trama.tools._ssa import describe_metadata_value, format_ref, shown
from trama.version import FORMAT_VERSION

#: The node metadata key that marks a decomposed framework op (docs/format.md §4.6).
DECOMPOSED = "decomposed"

__all__ = ["ModelSummary", "OpCount", "ParameterTotals", "ValueSummary", "render_summary", "summarize"]


@dataclass(frozen=True, slots=True)
class ValueSummary:
    """A model input or output: its name (an output reads as its reference) and known facts."""

    name: str
    dtype: str | None = None
    shape: tuple[int | str, ...] | None = None


@dataclass(frozen=True, slots=True)
class OpCount:
    """How many nodes use one op, leaves and composites counted apart (an op name is opaque to
    the format, so nothing stops a document from using one name both ways). A calling node
    counts as a use of its op, of the kind of the node it calls."""

    op: str
    composite: bool
    count: int


@dataclass(frozen=True, slots=True)
class ParameterTotals:
    """Entry count and tensor sizes of one group of parameter entries."""

    entries: int = 0
    tensors: int = 0
    elements: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """The headline facts of a model; see :func:`summarize`."""

    #: The version of the file the model came from, or the current one for a model built in memory.
    format_version: str
    producer: str | None
    framework: str | None
    opsets: dict[str, int]
    inputs: tuple[ValueSummary, ...]
    outputs: tuple[ValueSummary, ...]
    node_count: int
    #: Leaves and composites exclude calling nodes, which ``call_count`` counts.
    leaf_count: int
    composite_count: int
    #: Calling nodes: second uses of a module that is a node elsewhere in the model.
    call_count: int
    #: Nesting depth: 1 when every node is top level, 0 for an empty model.
    depth: int
    #: Most used first, then by name.
    ops: tuple[OpCount, ...]
    #: Every entry of the table; ``learnable`` and ``frozen`` split it in two.
    parameters: ParameterTotals
    learnable: ParameterTotals
    frozen: ParameterTotals
    #: Entries referenced by more than one slot (tied or shared values).
    shared_entries: int
    #: Tensors whose bytes live in an external weights file.
    external_tensors: int
    #: Bytes of tensor data per dtype, in the format's dtype order.
    dtype_bytes: dict[str, int]
    #: ``Graph`` nodes an exporter wrote as a decomposition of one framework op that has no
    #: catalog op (their ``decomposed`` metadata, docs/format.md §4.6), by that op, most first.
    decomposed: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (``trama info --json``)."""
        return dataclasses.asdict(self)


def summarize(model: Model) -> ModelSummary:
    """Count what ``model`` holds, without decoding a single tensor."""
    calls = sum(1 for node in model.nodes if node.calls is not None)
    composites = sum(1 for node in model.nodes if node.is_composite)
    learnable, frozen, dtype_bytes, external = _parameter_totals(model)
    return ModelSummary(
        format_version=model.source_format_version or FORMAT_VERSION,
        producer=_metadata_text(model.metadata, "producer"),
        framework=_metadata_text(model.metadata, "framework"),
        opsets=dict(sorted(model.opsets.items())),
        inputs=tuple(ValueSummary(name, *_fact(model.input_facts, k)) for k, name in enumerate(model.inputs)),
        outputs=tuple(
            ValueSummary(format_ref(ref), *_fact(model.output_facts, k)) for k, ref in enumerate(model.outputs)
        ),
        node_count=len(model.nodes),
        leaf_count=len(model.nodes) - composites - calls,
        composite_count=composites,
        call_count=calls,
        depth=max((node.id.count(".") + 1 for node in model.nodes), default=0),
        ops=_op_counts(model.nodes),
        parameters=_add(learnable, frozen),
        learnable=learnable,
        frozen=frozen,
        shared_entries=_shared_entries(model.nodes),
        external_tensors=external,
        dtype_bytes=dtype_bytes,
        decomposed=_decomposed(model.nodes),
    )


def _decomposed(nodes: list[Node]) -> dict[str, int]:
    counts = Counter(
        str(node.metadata[DECOMPOSED])
        for node in nodes
        if node.calls is None and node.metadata and isinstance(node.metadata.get(DECOMPOSED), str)
    )
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _metadata_text(metadata: dict[str, Any], key: str) -> str | None:
    return describe_metadata_value(metadata[key]) if key in metadata else None


def _fact(facts: list[ValueFact | None] | None, k: int) -> tuple[str | None, tuple[int | str, ...] | None]:
    fact = facts[k] if facts is not None and k < len(facts) else None
    return (None, None) if fact is None else (fact.dtype, fact.shape)


def _op_counts(nodes: list[Node]) -> tuple[OpCount, ...]:
    composite = {node.id for node in nodes if node.is_composite}
    counts = Counter((node.op, node.is_composite or node.calls in composite) for node in nodes)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0][0], item[0][1]))
    return tuple(OpCount(op, composite, count) for (op, composite), count in ordered)


def _parameter_totals(model: Model) -> tuple[ParameterTotals, ParameterTotals, dict[str, int], int]:
    """Learnable and frozen totals, bytes per dtype, and the number of external tensors."""
    groups = {True: [0, 0, 0, 0], False: [0, 0, 0, 0]}  # entries, tensors, elements, bytes
    per_dtype: Counter[str] = Counter()
    external = 0
    for entry in model.parameters.values():
        group = groups[entry.learnable]
        group[0] += 1
        value = entry.value
        if isinstance(value, Tensor):
            nbytes = value.nbytes
            group[1] += 1
            group[2] += value.size
            group[3] += nbytes
            per_dtype[value.dtype] += nbytes
            if isinstance(value.source, (ExternalSource, UnresolvedExternal)):
                external += 1
    order = {name: k for k, name in enumerate(DTYPE_NAMES)}
    dtype_bytes = dict(sorted(per_dtype.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))
    return ParameterTotals(*groups[True]), ParameterTotals(*groups[False]), dtype_bytes, external


def _add(a: ParameterTotals, b: ParameterTotals) -> ParameterTotals:
    return ParameterTotals(a.entries + b.entries, a.tensors + b.tensors, a.elements + b.elements, a.bytes + b.bytes)


def _shared_entries(nodes: list[Node]) -> int:
    uses = Counter(key for node in nodes for key in node.parameters.values())
    return sum(1 for count in uses.values() if count > 1)


# --- text -------------------------------------------------------------------------------


def render_summary(summary: ModelSummary) -> str:
    """The summary as aligned ``label  value`` lines, for a terminal (ends with a newline)."""
    rows: list[tuple[str, str]] = [("format", _format_line(summary.format_version))]
    for label, text in (("producer", summary.producer), ("framework", summary.framework)):
        if text:
            rows.append((label, text))
    if summary.opsets:
        rows.append(("opsets", ", ".join(f"{name}={version}" for name, version in summary.opsets.items())))
    rows.append(("inputs", _values_line(summary.inputs)))
    rows.append(("outputs", _values_line(summary.outputs)))
    rows += _node_rows(summary)
    if summary.decomposed:
        total = sum(summary.decomposed.values())
        ops = ", ".join(f"{shown(op)} ×{count}" for op, count in summary.decomposed.items())
        rows.append(("decomposed", f"{_plural(total, 'node', 'nodes')} ({ops})"))
    rows += _parameter_rows(summary)
    width = max(len(label) for label, _ in rows)
    return "".join(f"{label.ljust(width)}  {text}".rstrip() + "\n" for label, text in rows)


def _format_line(version: str) -> str:
    return version if version == FORMAT_VERSION else f"{version} (this trama writes {FORMAT_VERSION})"


def _values_line(values: tuple[ValueSummary, ...]) -> str:
    if not values:
        return "none"
    return ", ".join(_value_text(value) for value in values)


def _value_text(value: ValueSummary) -> str:
    if value.dtype is None and value.shape is None:
        return value.name
    dims = "?" if value.shape is None else ", ".join(str(d) for d in value.shape)
    return f"{value.name}: {value.dtype or '?'}[{dims}]"


def _node_rows(summary: ModelSummary) -> list[tuple[str, str]]:
    calls = f", {_plural(summary.call_count, 'call', 'calls')}" if summary.call_count else ""
    headline = (
        f"{summary.node_count} ({_plural(summary.leaf_count, 'leaf', 'leaves')}, "
        f"{_plural(summary.composite_count, 'composite', 'composites')}{calls}, depth {summary.depth})"
    )
    width = max((len(shown(op.op)) for op in summary.ops), default=0)
    count_width = _count_width(summary)
    rows = [("nodes", headline)]
    rows += [
        ("", f"  {shown(op.op).ljust(width)}  {op.count:>{count_width}}{'  composite' if op.composite else ''}")
        for op in summary.ops
    ]
    return rows


def _count_width(summary: ModelSummary) -> int:
    return max((len(str(op.count)) for op in summary.ops), default=1)


def _parameter_rows(summary: ModelSummary) -> list[tuple[str, str]]:
    total = summary.parameters
    rows = [
        (
            "parameters",
            f"{_plural(total.entries, 'entry', 'entries')}, {_plural(total.tensors, 'tensor', 'tensors')}, "
            f"{summary.shared_entries} shared",
        ),
        ("elements", f"{total.elements:,}"),
        ("bytes", _bytes_text(total.bytes)),
        ("learnable", _group_text(summary.learnable)),
        ("frozen", _group_text(summary.frozen)),
        ("dtypes", ", ".join(f"{name} {_bytes_text(n)}" for name, n in summary.dtype_bytes.items()) or "none"),
    ]
    if summary.external_tensors:
        rows.append(("external", f"{summary.external_tensors} tensors in external weights files"))
    return rows


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _group_text(group: ParameterTotals) -> str:
    return f"{_plural(group.entries, 'entry', 'entries')}, {group.elements:,} elements, {_bytes_text(group.bytes)}"


def _bytes_text(n: int) -> str:
    """Exact bytes, with a binary-unit figure when that is shorter to read."""
    if n < 1024:
        return f"{n} B"
    units = ("KiB", "MiB", "GiB", "TiB")
    size, k = n / 1024, 0
    while size >= 1024 and k < len(units) - 1:
        size, k = size / 1024, k + 1
    return f"{n:,} B ({size:.1f} {units[k]})"
